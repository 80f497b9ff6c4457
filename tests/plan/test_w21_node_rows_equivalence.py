"""Plans run on the memory store end the same whether their nodes' records are kept as rows of
plain values (trace/_node_rows.py) or packed: the same observations, the same events read back
(types included), the same flow state, for generated plans run again on one run, public or secret."""

from __future__ import annotations

import asyncio
import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Plan, Runtime
from actionspace.policy.labels import Label

CLOCKS = frozenset({"fetched_at", "wall_s", "max_parallel"})


def _runtime(flat: bool) -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)
    rt.trace.flat_nodes = flat  # type: ignore[attr-defined]

    @rt.tool(effect="none")
    async def quick(x: int) -> int:
        return x

    @rt.tool(effect="none")
    async def nap(x: int) -> int:
        await asyncio.sleep(0)
        return x + 1

    @rt.tool(effect="none")
    async def anything(v: Any = None, w: Any = None) -> int:
        return 1 if v is None else 2

    @rt.tool(effect="none")
    def total(xs: list[int], x: int = 0) -> int:
        return sum(xs) + x

    return rt


PLAIN = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**60), max_value=2**60),
    st.floats(allow_nan=False, allow_infinity=False),
    st.just(-0.0),
    st.text(max_size=6),
)


@st.composite
def plans(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(min_value=1, max_value=12))
    nodes: list[dict[str, Any]] = []
    for i in range(n):
        tool = draw(st.sampled_from(("quick", "nap", "anything", "anything", "total")))
        arguments: dict[str, Any]
        if tool == "anything":
            arguments = {}
            for key in draw(st.permutations(["v", "w"]))[: draw(st.integers(0, 2))]:
                arguments[key] = draw(st.one_of(PLAIN, PLAIN, st.lists(PLAIN, max_size=2)))
        elif tool == "total":
            arguments = {"xs": draw(st.lists(st.integers(0, 9), max_size=3)), "x": draw(st.integers(0, 9))}
        else:
            arguments = {"x": draw(st.integers(0, 9))}
        node: dict[str, Any] = {"id": f"n{i}", "tool": tool, "arguments": arguments}
        deps = draw(st.lists(st.integers(0, i - 1), max_size=2, unique=True)) if i else []
        if deps:
            node["depends_on"] = [f"n{d}" for d in deps]
        nodes.append(node)
    return {"nodes": nodes, "max_concurrency": draw(st.sampled_from([1, 4, 16]))}


def _exact(value: Any) -> Any:
    """By type and value (``True`` is not ``1``, ``-0.0`` is not ``0.0``), clocks left out."""
    if isinstance(value, dict):
        return ("dict", [(k, _exact(v)) for k, v in value.items() if k not in CLOCKS])
    if isinstance(value, list | tuple):
        return ("list", [_exact(v) for v in value])
    if isinstance(value, float):
        return ("float", "nan" if math.isnan(value) else float.hex(value))
    return (type(value).__name__, value)


def _outcome(flat: bool, plan: dict[str, Any], secret: bool, runs: int) -> Any:
    with _runtime(flat) as rt:
        run_id = rt.new_run("run-rows")
        if secret:
            rt.engine.run(run_id).flow.add_user_input("the code", Label(confidentiality="secret"))
        checked = Plan.from_dict(plan)  # one plan object run again, as the bench runs it
        results = [rt.run_plan(checked, run_id=run_id) for _ in range(runs)]
        events = [(e.seq, e.kind, e.call_id, _exact(dict(e.data))) for e in rt.trace.events(run_id)]
        flow = rt.engine.run(run_id).flow
        observations = [[_exact(o.to_dict()) for o in r.nodes.values()] for r in results]
        kept = [(args, rows) for args, rows in rt.trace._flat.get(run_id, ())]  # type: ignore[attr-defined]
        return (
            [r.status for r in results],
            observations,
            events,
            (flow.context, dict(flow.pending), list(flow.seen)),
        ), kept


@settings(max_examples=60, deadline=None)
@given(plan=plans(), secret=st.booleans(), runs=st.integers(1, 3))
def test_a_plan_ends_the_same_with_its_node_records_kept_as_rows_or_packed(
    plan: dict[str, Any], secret: bool, runs: int
) -> None:
    rows, kept = _outcome(True, plan, secret, runs)
    packed, none = _outcome(False, plan, secret, runs)
    assert rows == packed
    assert none == []
    events = rows[2]
    assert [e[0] for e in events] == list(range(len(events)))  # numbered once each, in order
    if secret:
        assert kept == []  # every event is labelled: none stays compact


def test_a_plan_of_plain_nodes_keeps_its_records_as_rows() -> None:
    plan = {"nodes": [{"id": f"n{i}", "tool": "quick", "arguments": {"x": i}} for i in range(40)]}
    (statuses, _, events, _), kept = _outcome(True, plan, False, 2)
    assert statuses == ["ok", "ok"]
    assert sum(len(rows) for _, rows in kept) == 80
    proposed = [e for e in events if e[1] == "proposed"]
    assert len(proposed) == 80 and proposed[7][3] == _exact(
        {"tool": "quick", "version": "1", "arguments": {"x": 7}}
    )
