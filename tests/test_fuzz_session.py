"""Whatever a model emits in a multi-call message, the session answers every call id it proposed once."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import CATEGORIES, Runtime
from actionspace.session import PROVIDERS, Provider

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
names = st.sampled_from(["put", "get", "put@1", "nope", ""]) | st.text(max_size=12)
arguments = (
    st.fixed_dictionaries({"key": st.sampled_from(["a", "b"]), "value": st.integers(0, 3)})
    | st.dictionaries(st.text(max_size=6), json_values, max_size=4)
    | json_values
)
calls = st.lists(st.tuples(names, arguments), min_size=1, max_size=4)


def _message(provider: Provider, proposed: list[tuple[str, Any]]) -> Any:
    ids = [f"call_{i}" for i in range(len(proposed))]
    if provider == "openai_chat":
        entries = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for i, (n, a) in zip(ids, proposed, strict=True)
        ]
        return {"role": "assistant", "content": None, "tool_calls": entries}
    if provider == "openai_responses":
        return [
            {"type": "function_call", "call_id": i, "name": n, "arguments": json.dumps(a)}
            for i, (n, a) in zip(ids, proposed, strict=True)
        ]
    if provider == "gemini":
        parts = [
            {"functionCall": {"id": i, "name": n, "args": a}} for i, (n, a) in zip(ids, proposed, strict=True)
        ]
        return {"role": "model", "parts": parts}
    blocks = [
        {"type": "tool_use", "id": i, "name": n, "input": a} for i, (n, a) in zip(ids, proposed, strict=True)
    ]
    return {"role": "assistant", "content": blocks}


def _answered(provider: Provider, messages: list[dict[str, Any]]) -> list[str]:
    if provider == "openai_chat":
        return [m["tool_call_id"] for m in messages]
    if provider == "openai_responses":
        return [m["call_id"] for m in messages]
    if provider == "gemini":
        return [p["functionResponse"]["id"] for m in messages for p in m["parts"]]
    return [b["tool_use_id"] for m in messages for b in m["content"]]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(PROVIDERS), calls)
def test_every_proposed_call_gets_exactly_one_result_and_bad_ones_never_run(
    provider: Provider, proposed: list[tuple[str, Any]]
) -> None:
    rt = Runtime("memory://")
    executed: list[dict[str, Any]] = []

    @rt.tool(effect="write", writes=["kv:{key}"])
    def put(key: str, value: int) -> dict[str, Any]:
        """Store a value."""
        executed.append({"key": key, "value": value})
        return {"key": key}

    s = rt.session(provider=provider)
    s.user("store things")
    turn = s.handle(_message(provider, proposed))
    ids = [f"call_{i}" for i in range(len(proposed))]
    if turn.observations and turn.observations[0].tool == "" and turn.observations[0].error is not None:
        assert turn.observations[0].error.category == "parse_error"  # the message as a whole was malformed
        return
    assert [o.call_id for o in turn.observations] == ids
    assert _answered(provider, turn.messages) == ids
    for obs in turn.observations:
        assert obs.ok or (obs.error is not None and obs.error.category in CATEGORIES)
    good = [a for n, a in proposed if n in ("put", "put@1") and _valid(a)]
    assert all(e in good for e in executed)


def _valid(arguments: Any) -> bool:
    return (
        isinstance(arguments, dict)
        and set(arguments) == {"key", "value"}
        and isinstance(arguments["key"], str)
        and type(arguments["value"]) is int
    )
