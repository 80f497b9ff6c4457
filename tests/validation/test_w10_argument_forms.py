"""The precompiled path's schema check never lets through a call that needs converting, and both
paths give the tool, the key and the trace the same arguments, over generated schemas and values."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Runtime, ToolCall
from actionspace.catalog import spec_from_schema
from actionspace.validation.forms import SettledCheck
from actionspace.validation.validator import compile_tool
from tests.pipeline.test_fast import _view

DT = {"type": "string", "format": "date-time"}
SCHEMAS: dict[str, dict[str, Any]] = {
    "flat": {"type": "object", "properties": {"n": {"type": "integer"}, "t": DT, "s": {"type": "string"}}},
    "optional": {
        "type": "object",
        "properties": {
            "n": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "t": {"anyOf": [DT, {"type": "null"}]},
        },
    },
    "ref": {
        "type": "object",
        "$defs": {"count": {"type": "integer", "minimum": -5000}, "when": DT},
        "properties": {"n": {"$ref": "#/$defs/count"}, "t": {"allOf": [{"$ref": "#/$defs/when"}]}},
    },
    "mixed": {
        "type": "object",
        "properties": {
            "n": {"anyOf": [{"type": "integer", "minimum": 10}, {"type": "number"}]},
            "m": {"type": ["integer", "number"]},
            "k": {"type": ["integer", "string", "null"]},
        },
    },
    "nested": {
        "type": "object",
        "properties": {
            "ids": {"type": "array", "items": {"type": "integer"}},
            "when": {"type": "array", "items": DT},
            "o": {"type": "object", "properties": {"n": {"type": "integer"}, "t": DT}},
        },
    },
}

SPELLINGS = [
    "2026-03-01T10:00:00Z",
    "2026-03-01T10:00:00+00:00",
    "2026-03-01t10:00z",
    "2026-03-01 10:00:00.500+0530",
    "2026-03-01T10:00:00.5+05:30",
    "2026-03-01T10:00:00-00:00",
    "not a date",
]

scalars = st.one_of(
    st.integers(-1000, 1000),
    st.integers(-1000, 1000).map(float),
    st.floats(-1e6, 1e6, allow_nan=False),
    st.sampled_from(SPELLINGS),
    st.none(),
)
values = st.one_of(
    scalars, st.lists(scalars, max_size=3), st.dictionaries(st.sampled_from(["n", "t"]), scalars)
)
argument_sets = st.dictionaries(
    st.sampled_from(["n", "t", "s", "m", "k", "ids", "when", "o"]), values, max_size=4
)


def _exact(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _exact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_exact(v) for v in value]
    return (type(value).__name__, value)


@settings(max_examples=400, deadline=None)
@given(name=st.sampled_from(list(SCHEMAS)), args=argument_sets)
def test_what_the_precompiled_check_lets_through_needs_no_conversion(name: str, args: dict[str, Any]) -> None:
    compiled = compile_tool(spec_from_schema(name, SCHEMAS[name], lambda **kw: None, effect="none"))
    assert compiled.forms is not None and isinstance(compiled.validator, SettledCheck)
    if not compiled.schema.is_valid(args):
        assert not compiled.validator.is_valid(args)
        return
    before = json.dumps(_exact(args))
    received, known = compiled.forms.split(args)
    assert json.dumps(_exact(args)) == before  # never mutated
    if compiled.validator.is_valid(args):
        assert received is args and known is args
    assert compiled.forms.split(received)[0] is received  # converted once, for good
    assert compiled.forms.split(known) == (known, known)
    assert compiled.schema.is_valid(received) and compiled.schema.is_valid(known)


def _runtime(fast: bool, got: list[Any]) -> Runtime:
    rt = Runtime("memory://")
    for name, schema in SCHEMAS.items():
        for effect in ("read", "write"):

            def fn(_tool: str = f"{name}_{effect}", **kwargs: Any) -> str:
                got.append((_tool, _exact(kwargs)))
                return f"{_tool} {len(got)}"

            extra = {"idempotency": "none"} if effect == "write" else {}
            rt.add_tool(name=f"{name}_{effect}", input_schema=schema, fn=fn, effect=effect, **extra)
    rt.engine.fast.enabled = fast
    return rt


def _play(rt: Runtime, calls: list[tuple[str, dict[str, Any], bool]]) -> dict[str, Any]:
    run_id = rt.new_run("r-forms")

    async def play() -> list[Any]:
        out = []
        for i, (tool, args, as_text) in enumerate(calls):
            raw: Any = ToolCall(name=tool, arguments=args, id=f"c{i}")
            if as_text:
                function = {"name": tool, "arguments": json.dumps(args)}
                raw = json.dumps({"id": f"c{i}", "type": "function", "function": function})
            out.append(await rt.acall(raw, run_id=run_id) if i % 2 else rt.call(raw, run_id=run_id))
        return out

    return _view(rt, run_id, asyncio.run(play()))


tools = st.sampled_from([f"{name}_{effect}" for name in SCHEMAS for effect in ("read", "write")])


@st.composite
def call_lists(draw: st.DrawFn) -> list[tuple[str, dict[str, Any], bool]]:
    """Calls of one or two tools, so that most after the first of a tool may take the precompiled path."""
    names = draw(st.lists(tools, min_size=1, max_size=2, unique=True))
    call = st.tuples(st.sampled_from(names), argument_sets, st.booleans())
    return draw(st.lists(call, min_size=2, max_size=7))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls=call_lists())
def test_both_paths_give_the_tool_the_key_and_the_trace_the_same_arguments(
    calls: list[tuple[str, dict[str, Any], bool]],
) -> None:
    fast_got: list[Any] = []
    staged_got: list[Any] = []
    with _runtime(True, fast_got) as fast, _runtime(False, staged_got) as staged:
        want = _play(staged, calls)
        assert _play(fast, calls) == want
    assert fast_got == staged_got
