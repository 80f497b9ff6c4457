"""Arguments that are not JSON values (``actionspace._json_values``): refused as ``invalid_arguments``
at the field that holds them, before any digest, key or store reads them, on every path.

A provider SDK's objects and a caller's own ``ToolCall`` carry Python values: a set, bytes, a key
that is not a string, NaN, an integer of thousands of digits, nesting deeper than the stack. No
canonical JSON exists for them, so an argument digest or idempotency key cannot be made of them.
"""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Runtime, ToolCall
from actionspace._json_values import MAX_DEPTH, MAX_INT_DIGITS, finite_numbers, unfit_arguments

NOT_JSON: list[tuple[str, Any]] = [
    ("set", {1, 2}),
    ("bytes", b"ab"),
    ("nan", math.nan),
    ("infinity", math.inf),
    ("minus infinity", -math.inf),
    ("key not a string", {1: "a"}),
    ("huge integer", 10**MAX_INT_DIGITS),
    ("object", object()),
]


def _nested(levels: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(levels):
        value = {"a": value}
    return value


def _runtime(store: str, sent: list[Any]) -> Runtime:
    rt = Runtime(store, recover_on_start=False)

    def take(**kw: Any) -> str:
        sent.append(kw)
        return "done"

    any_value: dict[str, Any] = {"type": "object", "properties": {"x": {}}}
    rt.add_tool(name="look", input_schema=any_value, fn=take, effect="none", description="Look.")
    rt.add_tool(
        name="pay", input_schema=any_value, fn=take, effect="external", idempotency="none", description="Pay."
    )
    return rt


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return "memory://" if request.param == "memory" else f"sqlite:///{tmp_path}/as.db"


@pytest.mark.parametrize("tool", ["look", "pay"])
@pytest.mark.parametrize(("kind", "bad"), NOT_JSON, ids=[k for k, _ in NOT_JSON])
def test_a_value_that_is_not_json_is_refused_at_its_field_and_nothing_runs(
    store: str, tool: str, kind: str, bad: Any
) -> None:
    sent: list[Any] = []
    rt = _runtime(store, sent)
    run = rt.new_run()
    shapes = [
        ToolCall(name=tool, arguments={"x": {"list": [0, bad]}}, id="c1"),
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "c2", "name": tool, "input": {"x": bad}}],
        },
    ]
    for raw in shapes:
        obs = rt.call(raw, run_id=run)
        assert obs.error is not None and obs.error.category == "invalid_arguments", (kind, obs.error)
        assert obs.error.message == "arguments hold a value that is not JSON"
        (field,) = obs.error.field_errors
        assert field.path in ("/x/list/1", "/x", "/x/list/1/1")  # a key not a string: at its object
        assert obs.error.recovery
    assert sent == []
    assert rt.ledger.list() == []


@pytest.mark.parametrize("tool", ["look", "pay"])
def test_nesting_is_refused_past_the_depth_the_json_parsers_read(store: str, tool: str) -> None:
    sent: list[Any] = []
    rt = _runtime(store, sent)
    run = rt.new_run()
    fits = rt.call(ToolCall(name=tool, arguments={"x": _nested(MAX_DEPTH - 1)}, id="ok"), run_id=run)
    assert fits.status == "ok", fits.error
    too_deep = rt.call(ToolCall(name=tool, arguments={"x": _nested(MAX_DEPTH)}, id="deep"), run_id=run)
    assert too_deep.error is not None and too_deep.error.category == "invalid_arguments"
    assert too_deep.error.field_errors[0].path == "/x" + "/a" * (MAX_DEPTH - 1)
    far_too_deep = rt.call(ToolCall(name=tool, arguments={"x": _nested(5000)}, id="far"), run_id=run)
    assert far_too_deep.error is not None and far_too_deep.error.category == "invalid_arguments"
    assert len(sent) == 1


def test_a_container_inside_itself_is_refused_and_a_shared_one_is_not(store: str) -> None:
    sent: list[Any] = []
    rt = _runtime(store, sent)
    loop: list[Any] = [1]
    loop.append(loop)
    obs = rt.call(ToolCall(name="pay", arguments={"x": loop}, id="c1"))
    assert obs.error is not None and obs.error.category == "invalid_arguments"
    assert obs.error.field_errors[0].path == "/x/1"
    shared = [1, 2]
    ok = rt.call(ToolCall(name="pay", arguments={"x": [shared, shared]}, id="c2"))
    assert ok.status == "ok" and sent == [{"x": [[1, 2], [1, 2]]}]


def _openai(tool: str, arguments: str) -> str:
    return json.dumps({"id": "c1", "type": "function", "function": {"name": tool, "arguments": arguments}})


@pytest.mark.parametrize(
    "arguments",
    [
        '{"x": 1e999}',
        '{"x": [-1e999]}',
        '{"x": NaN}',
        '{"x": {"y": Infinity}}',
        '{"x": 1.5}',
        '{"x": ' + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "}",  # MAX_DEPTH levels
        '{"x": ' + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "}",  # one more
        '{"x": ' + "7" * MAX_INT_DIGITS + "}",
    ],
)
def test_json_text_ends_the_same_on_the_precompiled_path_and_through_the_stages(arguments: str) -> None:
    async def outcome(fast: bool) -> tuple[Any, ...]:
        sent: list[Any] = []
        rt = _runtime("memory://", sent)
        rt.engine.fast.enabled = fast
        run = rt.new_run()
        await rt.acall(_openai("look", '{"x": 0}'), run_id=run)  # the run knows the tool: an entry
        obs = await rt.acall(_openai("look", arguments), run_id=run)
        return obs.status, obs.error and obs.error.category, len(sent)

    assert asyncio.run(outcome(True)) == asyncio.run(outcome(False))


_LIMIT: int = 10**MAX_INT_DIGITS


def _reference(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` is JSON as RFC 8785 writes it, recursively: the definition the walk keeps."""
    if value is None or isinstance(value, bool | str):
        return True
    if isinstance(value, int):
        return bool(abs(value) < _LIMIT)
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict | list | tuple):
        if depth >= MAX_DEPTH:
            return False
        items = value.items() if isinstance(value, dict) else enumerate(value)
        return all(
            (not isinstance(value, dict) or isinstance(k, str)) and _reference(v, depth + 1) for k, v in items
        )
    return False


def _huge(sign: int) -> int:
    return sign * _LIMIT


scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(alphabet="ab", max_size=3)
    | st.sampled_from([b"x", frozenset({1})])
    | st.builds(_huge, st.sampled_from([1, -1]))  # built when drawn: its repr is refused
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=2).map(tuple)
        | st.dictionaries(st.text(alphabet="xy", max_size=2) | st.integers(0, 2), inner, max_size=3)
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.text(alphabet="ab", max_size=2), values, max_size=3))
def test_the_walk_refuses_exactly_what_is_not_json(arguments: dict[str, Any]) -> None:
    found = unfit_arguments(arguments)
    assert (found is None) == _reference(arguments)
    if found is not None:
        assert found[0] == "" or found[0].startswith("/")
    plain = json.loads(json.dumps(arguments, default=str)) if found is None else None
    if plain is not None:
        assert finite_numbers(plain)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.text(alphabet="ab", max_size=2), st.floats() | st.lists(st.floats(), max_size=3)))
def test_finite_numbers_agrees_with_the_walk_on_parsed_json(arguments: dict[str, Any]) -> None:
    assert finite_numbers(arguments) == (unfit_arguments(arguments) is None)
