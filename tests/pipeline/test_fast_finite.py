"""A non-finite number never reaches a tool through the precompiled path.

JSON text such as ``1e999`` reads as an infinity. The precompiled path skips its own walk for one
when the tool's schema alone refuses it (a closed object whose every property is typed
``integer``, ``string``, ``boolean`` or ``null``), so over generated schemas and arguments it must
refuse exactly what the stages refuse, and hand the tool exactly what they hand it.
"""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.pipeline import messages as messages_module
from actionspace.pipeline._direct import direct_caller
from actionspace.pipeline.fast import FastPath

TYPES = ["integer", "number", "string", "boolean", "null", ["integer", "null"], ["number", "string"]]

property_schemas = st.one_of(
    st.builds(lambda t: {"type": t}, st.sampled_from(TYPES)),
    st.just({"type": "array", "items": {"type": "number"}}),
    st.just({"type": "object"}),
    st.just({}),
    st.just({"$ref": "#/$defs/n", "type": "integer"}),
)


@st.composite
def schemas(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3, unique=True))
    schema: dict[str, Any] = {"type": "object", "properties": {n: draw(property_schemas) for n in names}}
    schema["$defs"] = {"n": {"type": "number"}}
    closed = draw(st.sampled_from([False, True, None]))
    if closed is not None:
        schema["additionalProperties"] = closed
    if draw(st.booleans()):
        schema["patternProperties"] = {"^x": {"type": "number"}}
    return schema


VALUES = ["1e999", "-1e999", "1.5", "7", '"s"', "true", "null", "[1e999]", '{"k": 1e999}']


@st.composite
def argument_texts(draw: st.DrawFn) -> str:
    keys = draw(st.lists(st.sampled_from(["a", "b", "c", "x1", "d"]), min_size=1, max_size=3, unique=True))
    return "{" + ", ".join(f'"{k}": {draw(st.sampled_from(VALUES))}' for k in keys) + "}"


def _play(schema: dict[str, Any], texts: list[str], *, fast: bool) -> tuple[list[Any], list[Any]]:
    """(status and error category of each call, the arguments the tool received)."""
    received: list[Any] = []
    rt = Runtime("memory://", recover_on_start=False)

    async def probe(**kwargs: Any) -> int:
        received.append(kwargs)
        return 1

    rt.add_tool(name="probe", input_schema=json.loads(json.dumps(schema)), fn=probe, effect="none")
    rt.engine.fast.enabled = fast

    def raw(i: int, text: str) -> str:
        return json.dumps(
            {"id": f"call_{i}", "type": "function", "function": {"name": "probe", "arguments": text}}
        )

    async def play() -> list[Any]:
        run = rt.new_run("finite")
        await rt.acall(raw(0, "{}"), run_id=run)  # resolves the name: later calls may take the fast path
        out = []
        for i, text in enumerate(texts, start=1):
            obs = await rt.acall(raw(i, text), run_id=run)
            out.append((obs.status, obs.error.category if obs.error else None))
        return out

    with rt:
        return asyncio.run(play()), received[1:]


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    return True


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=schemas(), texts=st.lists(argument_texts(), min_size=1, max_size=4))
def test_the_precompiled_path_refuses_a_non_finite_number_as_the_stages_do(
    schema: dict[str, Any], texts: list[str]
) -> None:
    fast, fast_received = _play(schema, texts, fast=True)
    staged, staged_received = _play(schema, texts, fast=False)
    assert fast == staged
    assert repr(fast_received) == repr(staged_received)
    assert all(_finite(kwargs) for kwargs in fast_received)


def test_a_closed_integer_schema_refuses_an_infinite_literal_on_the_precompiled_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    taken: list[Any] = []
    took: list[str] = []  # the calls FastPath.take read
    original = FastPath.take

    def spy(self: FastPath, raw: Any, *args: Any, **kwargs: Any) -> Any:
        took.append(raw)
        call = original(self, raw, *args, **kwargs)
        if call is not None:  # the precompiled path runs it
            taken.append(call.arguments)
        return call

    def caller(messages: Any) -> Any:  # the one-frame path (pipeline/_direct.py), which take does not see
        quick = direct_caller(messages)

        def spied(raw: str, *args: Any) -> Any:
            got = quick(raw, *args)
            if got is not None and raw not in took:  # ran without FastPath.take or the stages
                taken.append(json.loads(json.loads(raw)["function"]["arguments"]))
            return got

        return spied

    monkeypatch.setattr(FastPath, "take", spy)
    monkeypatch.setattr(messages_module, "direct_caller", caller)
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
        "additionalProperties": False,
    }
    results, received = _play(schema, ['{"a": 1e999}', '{"a": 3, "b": "x"}', '{"a": -1e999}'], fast=True)
    assert [status for status, _ in results] == ["error", "ok", "error"]
    assert received == taken == [{"a": 3, "b": "x"}]
