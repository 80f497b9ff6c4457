"""Every proposal the model can produce ends as an Observation, and bad ones never reach a tool."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import CATEGORIES, Runtime, ToolCall

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=50)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5),
    max_leaves=20,
)
names = st.sampled_from(["put", "get", "put@1", "put@2", "nope", "", "pu", "PUT"]) | st.text(max_size=30)
good_args = st.fixed_dictionaries(
    {"key": st.text(min_size=1, max_size=20), "value": st.integers(min_value=0, max_value=1000)},
    optional={"tags": st.lists(st.text(max_size=5), max_size=3)},
)
arguments = good_args | json_values | st.dictionaries(st.text(max_size=8), json_values, max_size=6)
huge = st.builds(
    lambda n, c: c * n, st.integers(10_000, 200_000), st.sampled_from(["a", "[", "{", "é", "\x00"])
)


def _openai(name: str, args: Any, as_text: bool) -> Any:
    payload = json.dumps(args) if as_text else args
    return {"id": "call_1", "type": "function", "function": {"name": name, "arguments": payload}}


raws = st.one_of(
    json_values,
    st.text(max_size=200),
    huge,
    st.builds(lambda n, a: ToolCall(name=n, arguments=a), names, arguments),
    st.builds(_openai, names, arguments, st.booleans()),
    st.builds(lambda n, a: json.dumps(_openai(n, a, True)), names, arguments),
    st.builds(lambda n, a: {"type": "tool_use", "id": "t1", "name": n, "input": a}, names, arguments),
    st.builds(
        lambda n, a: f"<tool_call>{json.dumps({'name': n, 'arguments': a})}</tool_call>", names, arguments
    ),
    st.builds(
        lambda s, k: s[:k],
        st.builds(lambda n, a: json.dumps(_openai(n, a, True)), names, arguments),
        st.integers(0, 60),
    ),
    st.builds(lambda d: "[" * d + "]" * d, st.integers(500, 5000)),
)


def _runtime() -> tuple[Runtime, list[dict[str, Any]]]:
    rt = Runtime("memory://")
    executed: list[dict[str, Any]] = []

    @rt.tool(effect="write", writes=["kv:{key}"])
    def put(key: str, value: int, tags: list[str] | None = None) -> dict[str, Any]:
        """Store a value."""
        executed.append({"key": key, "value": value, "tags": tags})
        return {"stored": key}

    @rt.tool(effect="read")
    def get(key: str) -> int:
        return 1

    return rt, executed


RT, EXECUTED = _runtime()


@pytest.mark.slow  # over 10 s: 600 generated proposals
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=raws)
def test_any_proposal_ends_as_an_observation_and_only_valid_arguments_execute(raw: Any) -> None:
    before = len(EXECUTED)
    obs = RT.call(raw)
    calls = list(obs.items) if obs.tool == "*" else [obs]
    for o in calls:
        assert o.status in ("ok", "error")
        if o.status == "error":
            assert o.error is not None and o.error.category in CATEGORIES
            assert o.error.category != "internal", o.error.message
            assert o.error.recovery or o.error.category == "cancelled"
    # a replay (the same put again in the run: one logical action) never runs the tool again
    ok_puts = [o for o in calls if o.status == "ok" and o.tool == "put" and not o.diagnostics.get("replayed")]
    ran = EXECUTED[before:]
    assert len(ran) == len(ok_puts)
    for args in ran:
        assert isinstance(args["key"], str) and type(args["value"]) is int and args["value"] >= 0
        assert args["tags"] is None or all(isinstance(t, str) for t in args["tags"])


@settings(max_examples=200, deadline=None)
@given(raw=raws)
def test_call_all_returns_one_observation_per_call_and_never_raises(raw: Any) -> None:
    out = RT.call_all(raw)
    assert out and all(o.error is None or o.error.category in CATEGORIES for o in out)


messages = st.builds(
    lambda calls, wrap: {"role": "assistant", "content": None, "tool_calls": calls} if wrap else calls,
    st.lists(st.builds(_openai, names, arguments, st.booleans()), min_size=2, max_size=6),
    st.booleans(),
)


@pytest.mark.parametrize("form", ["async", "sync"])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=messages | raws)
def test_a_message_of_several_calls_run_together_ends_as_observations_and_never_raises(
    form: str, raw: Any
) -> None:
    """A message's calls run together (pipeline/messages.py), from async code and from sync code
    (its tools are blocking: worker threads run them either way): whatever the model sent, one
    typed observation per call, no ``internal`` error, and only valid arguments run."""
    import asyncio

    def call_all(rt: Runtime) -> list[Any]:
        return asyncio.run(rt.acall_all(raw)) if form == "async" else rt.call_all(raw)

    rt, executed = _runtime()
    out = call_all(rt)
    assert out
    for o in out:
        assert o.status in ("ok", "error")
        if o.status == "error":
            assert o.error is not None and o.error.category in CATEGORIES
            assert o.error.category != "internal", o.error.message
    ok_puts = [o for o in out if o.status == "ok" and o.tool == "put" and not o.diagnostics.get("replayed")]
    assert len(executed) == len(ok_puts)
    for args in executed:
        assert isinstance(args["key"], str) and type(args["value"]) is int and args["value"] >= 0
    apart, _ = _runtime()
    apart.engine.messages.together = False
    assert [(o.status, o.error and o.error.category) for o in out] == [
        (o.status, o.error and o.error.category) for o in call_all(apart)
    ]


@pytest.mark.parametrize("form", ["async", "sync"])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=messages | raws)
def test_a_session_turn_ends_as_typed_observations_each_answered_and_never_raises(
    form: str, raw: Any
) -> None:
    """A session reads the model's output once and hands what it read to the engine: whatever the
    model sent, the turn is a plain answer or one typed observation per call, never ``internal``,
    each answered by one tool message, and only valid arguments run."""
    import asyncio

    rt, executed = _runtime()
    s = rt.session(provider="openai_chat")
    s.user("store something")
    turn = asyncio.run(s.ahandle(raw)) if form == "async" else s.handle(raw)
    for o in turn.observations:
        assert o.status in ("ok", "error")
        if o.status == "error":
            assert o.error is not None and o.error.category in CATEGORIES
            assert o.error.category != "internal", o.error.message
    # one answer per call id: calls sharing an id are one parse_error, answered once
    assert [m["tool_call_id"] for m in turn.messages] == list(
        dict.fromkeys(o.call_id for o in turn.observations)
    )
    for args in executed:
        assert isinstance(args["key"], str) and type(args["value"]) is int and args["value"] >= 0
    if not turn.observations:  # a plain answer: nothing ran
        assert executed == []
