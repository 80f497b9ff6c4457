"""A number the schema reads as an integer reaches the tool as a Python ``int``.

JSON Schema says ``7.0`` is an integer, so a model that writes it made a valid call; the tool must
get ``7``, as it gets from ``7``, whether it is known by its schema (``add_tool``) or by its type
hints, wherever the integer sits (arrays, objects, ``$ref``, the ``anyOf`` branch it matches), and
on the precompiled path as on the stages. ``7.0`` and ``7`` are one action: one key, sent once.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Runtime, ToolCall
from actionspace.catalog import spec_from_schema
from actionspace.validation.validator import compile_tool, validate

FLAT = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}

NESTED = {
    "type": "object",
    "$defs": {
        "count": {"type": "integer", "minimum": 0},
        "slot": {"type": "object", "properties": {"hour": {"type": "integer"}, "weight": {"type": "number"}}},
    },
    "properties": {
        "ids": {"type": "array", "items": {"type": "integer"}},
        "pair": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]},
        "count": {"$ref": "#/$defs/count"},
        "slots": {"type": "array", "items": {"$ref": "#/$defs/slot"}},
        "either": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
        "maybe": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        "tags": {"type": "object", "additionalProperties": {"type": "integer"}},
        "ratio": {"type": "number"},
        "free": {},
    },
}


def _received(rt: Runtime, name: str, schema: dict[str, Any], effect: str = "none") -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = []

    def fn(**kwargs: Any) -> str:
        got.append(kwargs)
        return "ok"

    extra = {"idempotency": "none"} if effect == "write" else {}
    rt.add_tool(name=name, input_schema=schema, fn=fn, effect=effect, **extra)
    return got


def _raw(name: str, arguments: str, call_id: str = "c1") -> str:
    call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
    return json.dumps(call)


def _exact(value: Any) -> Any:
    """``value`` with each number tagged by its type, so ``7`` and ``7.0`` compare apart."""
    if isinstance(value, dict):
        return {k: _exact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_exact(v) for v in value]
    return (type(value).__name__, value)


@pytest.mark.parametrize("fast", [True, False], ids=["precompiled", "stages"])
def test_a_schema_tool_declared_integer_receives_an_int_for_seven_point_zero(fast: bool) -> None:
    with Runtime("memory://") as rt:
        rt.engine.fast.enabled = fast
        got = _received(rt, "count", FLAT)
        assert rt.call(ToolCall(name="count", arguments={"n": 1})).ok  # resolves the name
        assert rt.call(ToolCall(name="count", arguments={"n": 7.0})).ok
        assert rt.call(_raw("count", '{"n": 7.0}')).ok  # model text, read once on the precompiled path
        assert rt.call(_raw("count", '{"n": 7.5}')).error is not None  # not an integer: refused
    assert [_exact(kw) for kw in got] == [{"n": ("int", 1)}, {"n": ("int", 7)}, {"n": ("int", 7)}]


@pytest.mark.parametrize("fast", [True, False], ids=["precompiled", "stages"])
def test_a_typed_int_parameter_receives_an_int_for_seven_point_zero(fast: bool) -> None:
    got: list[Any] = []
    with Runtime("memory://") as rt:
        rt.engine.fast.enabled = fast

        @rt.tool(effect="read")
        def nth(n: int, label: str = "") -> str:
            """The n-th item."""
            got.append(n)
            return "ok"

        assert rt.call(ToolCall(name="nth", arguments={"n": 1})).ok
        assert rt.call(ToolCall(name="nth", arguments={"n": 7.0})).ok
    assert [_exact(n) for n in got] == [("int", 1), ("int", 7)]


def test_integers_nested_in_arrays_objects_refs_and_matching_branches_become_ints() -> None:
    sent = {
        "ids": [1.0, 2, 3.0],
        "pair": [4.0, "x"],
        "count": 5.0,
        "slots": [{"hour": 9.0, "weight": 2.0}],
        "either": 6.0,
        "maybe": 8.0,
        "tags": {"a": 10.0},
        "ratio": 3.0,
        "free": 11.0,
    }
    with Runtime("memory://") as rt:
        got = _received(rt, "nested", NESTED)
        assert rt.call(ToolCall(name="nested", arguments=sent)).ok
    assert _exact(got[0]) == {
        "ids": [("int", 1), ("int", 2), ("int", 3)],
        "pair": [("int", 4), ("str", "x")],
        "count": ("int", 5),
        "slots": [{"hour": ("int", 9), "weight": ("float", 2.0)}],  # a number stays as written
        "either": ("int", 6),
        "maybe": ("int", 8),
        "tags": {"a": ("int", 10)},
        "ratio": ("float", 3.0),
        "free": ("float", 11.0),  # no type: nothing says it is an integer
    }
    assert sent["ids"] == [1.0, 2, 3.0] and isinstance(sent["count"], float)  # the caller's copy is kept


def test_validating_leaves_the_callers_arguments_untouched_and_converts_once() -> None:
    compiled = compile_tool(spec_from_schema("t", NESTED, lambda **kw: None, effect="none"))
    args = {"ids": [1.0], "ratio": 1.0}
    checked = validate(compiled, args, {}, None)
    assert _exact(dict(checked.arguments)) == {"ids": [("int", 1)], "ratio": ("float", 1.0)}
    assert _exact(args) == {"ids": [("float", 1.0)], "ratio": ("float", 1.0)}
    plain = {"ids": [1], "ratio": 1.5}
    assert validate(compiled, plain, {}, None).arguments is plain  # nothing to convert: no copy


@pytest.mark.parametrize("fast", [True, False], ids=["precompiled", "stages"])
def test_seven_point_zero_and_seven_are_one_action_sent_once(fast: bool) -> None:
    with Runtime("memory://") as rt:
        rt.engine.fast.enabled = fast
        got = _received(rt, "put", FLAT, effect="write")
        rt.new_run("r1")
        first = rt.call(ToolCall(name="put", arguments={"n": 7}), run_id="r1")
        again = rt.call(ToolCall(name="put", arguments={"n": 7.0}), run_id="r1")
        pinned = rt.call(ToolCall(name="put", arguments={"n": 7.0}), run_id="r1", node_id="p1")
        pinned_again = rt.call(ToolCall(name="put", arguments={"n": 7}), run_id="r1", node_id="p1")
    assert first.ok and again.ok and pinned.ok and pinned_again.ok
    assert again.diagnostics["idempotency_key"] == first.diagnostics["idempotency_key"]
    assert again.diagnostics.get("replayed") is True and pinned_again.diagnostics.get("replayed") is True
    assert [_exact(kw) for kw in got] == [{"n": ("int", 7)}, {"n": ("int", 7)}]


def test_a_plan_node_written_seven_point_zero_receives_an_int() -> None:
    with Runtime("memory://") as rt:
        got = _received(rt, "count", FLAT)
        plan = {
            "nodes": [
                {"id": "a", "tool": "count", "arguments": {"n": 1}},
                {"id": "b", "tool": "count", "arguments": {"n": 7.0}, "depends_on": ["a"]},
            ]
        }
        result = rt.run_plan(plan, run_id="r1")
    assert result.nodes["b"].ok
    assert sorted(_exact(kw)["n"] for kw in got) == [("int", 1), ("int", 7)]


integers = st.integers(min_value=-(2**53), max_value=2**53)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ids=st.lists(integers, max_size=4), count=integers, hour=integers, either=integers, floats=st.data())
def test_any_integer_written_as_a_float_reaches_the_tool_as_written_as_an_int(
    ids: list[int], count: int, hour: int, either: int, floats: st.DataObject
) -> None:
    as_int = {"ids": ids, "count": abs(count), "slots": [{"hour": hour}], "either": either}

    def spelled(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: spelled(v) for k, v in value.items()}
        if isinstance(value, list):
            return [spelled(v) for v in value]
        return float(value) if floats.draw(st.booleans()) else value

    as_float = spelled(as_int)
    with Runtime("memory://") as rt:
        got = _received(rt, "nested", NESTED)
        assert rt.call(ToolCall(name="nested", arguments=as_int)).ok
        seen = rt.call(ToolCall(name="nested", arguments=as_float))
        assert seen.ok, seen.error
    assert _exact(got[1]) == _exact(got[0]) == _exact(as_int)
