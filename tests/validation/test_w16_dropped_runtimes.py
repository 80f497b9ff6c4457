"""A dropped runtime's tools are collectable: the caches every runtime shares (compiled schemas,
definition hashes, parameter names) hold neither the specs nor the functions that close over the
caller's objects, while a spec still in use is compiled and hashed once."""

from __future__ import annotations

import gc
import weakref
from typing import Any

from actionspace import Plan, PlanNode, Runtime, ToolCall
from actionspace.catalog._callables import accepts
from actionspace.catalog.spec import ToolSpec
from actionspace.discovery.runs import definition_hash
from actionspace.validation.validator import compile_tool

SCHEMA = {
    "type": "object",
    "properties": {"x": {"type": "integer"}, "when": {"type": "string", "format": "date-time"}},
    "required": ["x"],
}


class _Held:
    """What a tool's function holds (a client, a connection pool, a large table)."""

    def __init__(self) -> None:
        self.table = bytearray(1 << 20)


def _use_and_drop(approval: bool) -> weakref.ref[Any]:
    """A runtime whose tools' functions hold a fresh object, used on every path that fills a shared
    cache (calls, a plan, an offer, a held call), closed and dropped; a weak reference to the object."""
    held = _Held()

    def read(x: int, when: str | None = None) -> int:
        return x + len(held.table)

    def write(x: int, idempotency_key: str = "") -> int:
        return x + len(held.table)

    with Runtime("memory://", recover_on_start=False) as rt:
        rt.add_tool(name="read", input_schema=SCHEMA, fn=read, effect="read")
        rt.add_tool(
            name="write",
            input_schema={"type": "object", "properties": {"x": {"type": "integer"}}},
            fn=write,
            effect="write",
            idempotency="native",
            requires_approval=approval,
        )
        run = rt.new_run()
        rt.offer(["read", "write"], run_id=run)
        assert rt.call(ToolCall(name="read", arguments={"x": 1}), run_id=run).ok
        obs = rt.call(ToolCall(name="write", arguments={"x": 2}), run_id=run)
        assert obs.ok != approval
        plan = Plan(nodes=[PlanNode(id="n0", tool="read", arguments={"x": 3})])
        assert rt.run_plan(plan, run_id=run).status == "ok"
    return weakref.ref(held)


def test_a_closed_and_dropped_runtime_keeps_nothing_its_tools_hold_alive() -> None:
    refs = [_use_and_drop(approval) for approval in (False, True, False)]
    gc.collect()
    assert [ref() for ref in refs] == [None] * 3


def test_specs_made_and_dropped_leave_no_function_behind() -> None:
    """Specs made directly (as an evaluation or a replay makes them), compiled and hashed."""
    refs = []
    for i in range(3):
        held = _Held()

        def fn(x: int, idempotency_key: str = "", held: _Held = held) -> int:
            return x

        spec = ToolSpec(name=f"t{i}", input_schema=SCHEMA, fn=fn, effect="write", idempotency="native")
        compile_tool(spec)
        definition_hash(spec)
        assert accepts(fn, "idempotency_key")
        refs.append(weakref.ref(held))
        del spec, fn, held
    gc.collect()
    assert [ref() for ref in refs] == [None] * 3


def test_a_spec_in_use_is_compiled_and_hashed_once() -> None:
    """The caches still serve a spec that lives on (every fresh runtime of an evaluation registers
    the same spec objects): its definition hash is not computed again, its schema not compiled
    again, and a spec of the same schema but another definition gets its own hash."""
    spec = ToolSpec(name="t", input_schema=SCHEMA, fn=lambda x: x, effect="read")
    first = compile_tool(spec)
    again = compile_tool(spec)
    assert again.spec is spec and again.schema is first.schema and again.checks is first.checks
    assert definition_hash(spec) == definition_hash(spec)
    other = spec.evolve(description="something else entirely")
    assert compile_tool(other).spec is other
    assert definition_hash(other) != definition_hash(spec)
    assert compile_tool(other).schema is first.schema  # one schema, compiled once


def test_the_definition_hash_of_a_spec_at_a_reused_address_is_its_own() -> None:
    """A spec made where a dropped one lived (CPython reuses addresses) is hashed for itself."""
    seen: dict[int, str] = {}
    for i in range(200):
        spec = ToolSpec(name="t", description=f"version {i}", input_schema=SCHEMA, effect="read")
        found = definition_hash(spec)
        if id(spec) in seen:
            assert seen[id(spec)] != found
        seen[id(spec)] = found
        assert compile_tool(spec).spec is spec
        del spec
