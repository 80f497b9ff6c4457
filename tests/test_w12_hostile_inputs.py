"""Whatever a model or a client hands the runtime ends as an observation or an ``ActionError`` with a
category: never another exception, never a hang. Hypothesis draws arbitrary JSON-ish and Python
values (keys that are not text, bytes, NaN and infinities, integers of thousands of digits, nesting
up to and past the limits, objects whose ``__repr__``, ``__eq__`` or ``__hash__`` raise, a list
whose ``__len__`` lies) and hands them through every public entry point that takes model output:
``Runtime.call`` and ``acall`` in each provider shape, ``call_all`` and ``acall_all``, a session's
turn, the streaming parser, and a plan."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.errors import CATEGORIES, InvalidPlan
from actionspace.parse import StreamParser
from actionspace.types import ToolCall

_SETTINGS = settings(
    max_examples=60,
    deadline=timedelta(seconds=120),  # generous: a hang, not a slow machine, is what fails
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


class RaisingRepr:
    def __repr__(self) -> str:
        raise RuntimeError("repr")

    __str__ = __repr__


class RaisingEq:
    def __eq__(self, other: object) -> bool:
        raise RuntimeError("eq")

    def __hash__(self) -> int:
        return id(self) >> 4  # apart from every other key: a dict never compares it


class RaisingHash:
    def __hash__(self) -> int:
        raise RuntimeError("hash")


class LyingList(list[Any]):
    def __len__(self) -> int:
        return 0  # holds items all the same


class LongRepr:
    def __repr__(self) -> str:
        return "r" * 5_000_000


def _nested(value: Any, levels: int) -> Any:
    for at in range(levels):
        value = [value] if at % 2 else {"k": value}
    return value


_SPECIAL = (10**5000, -(10**4400), 2**64, float("nan"), float("inf"), -float("inf"), -0.0)
_HOSTILE = st.sampled_from([RaisingRepr, RaisingEq, RaisingHash, LongRepr]).map(lambda kind: kind())
_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(0, len(_SPECIAL) - 1).map(_SPECIAL.__getitem__)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=10)
    | st.binary(max_size=10)
    | _HOSTILE
)
_KEYS = (
    st.text(max_size=5)
    | st.integers()
    | st.none()
    | st.floats()
    | st.tuples(st.integers())
    | _HOSTILE.filter(lambda key: not isinstance(key, RaisingHash))
)
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=3).map(tuple)
        | st.lists(inner, max_size=3).map(LyingList)
        | st.dictionaries(_KEYS, inner, max_size=4)
    ),
    max_leaves=25,
)
_DEEP = st.builds(_nested, _VALUES, st.integers(150, 260))
_ARGS = _VALUES | _DEEP | st.dictionaries(st.text(max_size=5), _VALUES | _DEEP, max_size=4)


def _text(value: Any) -> Any:
    """``value`` as the JSON text of arguments, when it has one; else the value itself."""
    try:
        return json.dumps(value)
    except Exception:
        return value


@st.composite
def _outputs(draw: st.DrawFn) -> Any:
    """A model's output in one of the shapes a provider gives, carrying drawn arguments and ids."""
    args = draw(_ARGS)
    ident = draw(st.text(max_size=6) | _VALUES)
    name = draw(st.sampled_from(["echo", "missing"]) | _VALUES)
    shape = draw(st.sampled_from(["chat", "anthropic", "responses", "generic", "toolcall", "text", "raw"]))
    if shape == "chat":
        entry = {"id": ident, "type": "function", "function": {"name": name, "arguments": _text(args)}}
        return {"role": "assistant", "content": draw(_VALUES), "tool_calls": [entry]}
    if shape == "anthropic":
        return {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": ident, "name": name, "input": args}],
        }
    if shape == "responses":
        return [{"type": "function_call", "call_id": ident, "name": name, "arguments": _text(args)}]
    if shape == "generic":
        return {"name": name, "arguments": args, "id": ident}
    if shape == "toolcall":  # a caller's own ToolCall, its name any value (not text: invalid_name)
        return ToolCall(name=name, arguments=args, id=ident)  # type: ignore[arg-type]
    if shape == "text":
        text = _text(args)
        return (
            f'<tool_call>{{"name": "echo", "arguments": {text if isinstance(text, str) else 0}}}</tool_call>'
        )
    return args


def _runtime() -> Runtime:
    rt = Runtime("memory://")

    @rt.tool(name="echo", effect="read")
    def echo(value: Any = None, other: Any = None) -> Any:
        """Give back what it was given."""
        return [value, other]

    return rt


_RT = _runtime()


def _ended(out: Any) -> None:
    """``out`` is an observation (or several) whose error, when there is one, has a category."""
    for obs in out if isinstance(out, list) else [out]:
        assert obs.status in ("ok", "error", "unknown_commit", "needs_approval", "denied", "skipped"), (
            obs.status
        )
        if obs.error is not None:
            assert obs.error.category in CATEGORIES


def _guarded(run: Any) -> None:
    _ended(run())


@_SETTINGS
@given(output=_outputs())
def test_every_output_handed_to_call_and_acall_ends_typed(output: Any) -> None:
    _guarded(lambda: _RT.call(output))
    _guarded(lambda: asyncio.run(_RT.acall(output)))


@_SETTINGS
@given(outputs=st.lists(_outputs(), min_size=1, max_size=3))
def test_every_output_handed_to_call_all_and_acall_all_ends_typed(outputs: list[Any]) -> None:
    _guarded(lambda: _RT.call_all(outputs))
    _guarded(lambda: asyncio.run(_RT.acall_all(outputs)))


@_SETTINGS
@given(output=_outputs(), provider=st.sampled_from(["openai_chat", "openai_responses", "anthropic"]))
def test_every_output_handed_to_a_session_ends_typed(output: Any, provider: str) -> None:
    turn = _RT.session(provider=provider).handle(output)  # type: ignore[arg-type]
    for obs in turn.observations:
        _ended(obs)


@_SETTINGS
@given(
    events=st.lists(st.text(max_size=20))
    | st.lists(
        st.dictionaries(_KEYS, _VALUES, max_size=3)
        | st.dictionaries(
            st.sampled_from(["type", "delta", "choices", "index", "item", "content_block"]), _VALUES
        )
    )
)
def test_every_event_fed_to_the_streaming_parser_ends_typed(events: list[Any]) -> None:
    """A stream is of text or of mappings (another type, or both, is a caller's ``TypeError``)."""
    parser = StreamParser()
    for event in events:
        parser.feed(event)
    result = parser.finish()
    assert result.error is None or result.error.category in CATEGORIES


@_SETTINGS
@given(
    nodes=st.lists(
        st.fixed_dictionaries({"id": _VALUES, "tool": st.just("echo") | _VALUES, "arguments": _ARGS})
    )
)
def test_every_plan_handed_to_run_plan_ends_typed(nodes: list[Any]) -> None:
    try:
        result = _RT.run_plan({"nodes": nodes})
    except InvalidPlan as exc:  # a plan that cannot be built: raised, carrying its typed error
        assert exc.error.category in CATEGORIES
        return
    assert result.error is None or result.error.category in CATEGORIES
    for obs in result.nodes.values():
        _ended(obs)
