"""The plan's own work per plain node, counted in bytecodes the interpreter executes: unlike a
time, the count does not move with the machine's load, so it holds the zero-latency DAG's
scheduling cost (``actionspace bench``, "DAG scheduling per node") from creeping back.

Counted: every bytecode run in ``actionspace/`` (the plan package, the node's call, the trace
store, the flow state) while a warm plan of instant plain nodes is checked, run and ended; the
difference of a large and a small plan, per node (each node here has two predecessors). The plan
package's own share (with ``pipeline/fast_nodes.py`` and ``policy/stamped.py``) went from 1,369
bytecodes (checking 349 of them: a check ran ``declared_edges`` and ``_listed_in_order`` over a
plan listed in dependency order) to 1,080 (checking 245), 859 (checking 63) and 843. Counted over
the whole package, as now (the node's call took over work the fast path's entry lookup and the
generic shaping did), a node took 1,342, then 1,174; now 1,128:

- a tool that answers at once makes its node's compact record once, with no ``Succeeded``;
- a simple node's declared edges are added while it is checked (a plan listed in dependency
  order needs no second pass, no order check, no conflict pass), its predecessors, independence
  claims and argument types looked up in C (``all(map(...))``);
- the ready queue orders nodes by one integer each, and takes a whole wave with one sort;
- the scheduler's end reads its results with ``map`` and ``zip``, and an ok node settles on a
  short path;
- the recorder of a node that answered at once serves the next node, its record buffered inline;
- a plan of simple nodes listed in dependency order is checked across the plan at once
  (``plan/_simple_plan.py``: each field read for every node with ``map``, one short loop making
  the checked nodes), its ``plan_started`` entries made without asking each node what more to
  say, and a node queued as ready is only noted until a node is popped from the heap;
- an ok node that answered at once settles in one frame (``Scheduler._finish``: the driver's
  end, the scheduler's settling and ``taken`` written out together), its four event numbers
  taken in one call, its observation given the tags its output label already holds;
- a plain node reads its tool's precompiled entry without ``FastPath.entry``'s call and checks
  its arguments with the schema's own check when that settles them; an ``int`` result is put in
  its envelope without the generic shaping (its digest remembered); a plan whose every node is
  plain says so once (``CheckedPlan.plain``); showing the plan's observations at its end reads
  the run label again only where it may have changed; the trace store looks a node's shape up
  only when it differs from the last one's;
- ``Engine.plain_node`` is the node path itself (no forwarding frame), called with positional
  arguments, and an ``int`` result's observation is made inline (no ``_int_observation`` frame);
- the counted run is the warm-up's plan object run again, and such a plan keeps its check
  (``plan/_simple_plan.py`` ``keep``), its ready queue's keys and its ``plan_started`` entries
  (1,138 → 982; a new plan object is checked as before, held by the checking test below);
- a node that answered at once ``ok`` is begun and settled in one frame (``plan/_instant.py``:
  ``_plain_now`` and ``Scheduler._finish`` written out together), and showing the plan's
  observations at its end keeps the last tags and the quiet label in locals, not tuples
  (982 → 955);
- the nodes a node released are the next wave as they are, sorted in the ready queue's order,
  when nothing else is queued (``plan/_waves.py``: no ``ReadyQueue.extend`` and ``take_all``,
  here where every wave is one node), and the lower bounds of an ``int`` are made once, not
  negated per node (862 → 796).
"""

from __future__ import annotations

import asyncio
import sys
from types import FrameType
from typing import Any

from actionspace import Plan, PlanNode, Runtime
from actionspace.plan.check import CheckedPlan, check_plan

COUNTED = ("/actionspace/",)


def _runtime() -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="none")
    async def quick(x: int) -> int:
        return x

    return rt


def _plan(n: int) -> Plan:
    """``n`` plain nodes; node i waits for nodes i-1 and i-3 (a DAG some waves wide)."""
    nodes = [
        PlanNode(
            id=f"n{i}",
            tool="quick",
            arguments={"x": i},
            depends_on=tuple(f"n{j}" for j in (i - 1, i - 3) if j >= 0),
        )
        for i in range(n)
    ]
    return Plan(nodes=nodes, max_concurrency=n)


def _counting() -> tuple[list[int], Any]:
    """A trace function counting the bytecodes run in :data:`COUNTED` files, and its counter."""
    count = [0]

    def opcodes(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "opcode":
            count[0] += 1
        return opcodes

    def calls(frame: FrameType, event: str, arg: Any) -> Any:
        if event != "call":
            return None
        name = frame.f_code.co_filename
        if not any(part in name for part in COUNTED):
            return None
        frame.f_trace_opcodes = True
        frame.f_trace_lines = False
        return opcodes

    return count, calls


def _plan_bytecodes(rt: Runtime, plan: Plan) -> tuple[int, Any]:
    count, calls = _counting()

    async def run() -> Any:
        run_id = rt.new_run()
        await rt.arun_plan(plan, run_id=run_id)  # warm: the run's tool entries exist
        sys.settrace(calls)
        try:
            return await rt.arun_plan(plan, run_id=run_id)
        finally:
            sys.settrace(None)

    result = asyncio.run(run())
    return count[0], result


def test_a_plain_instant_node_costs_under_830_bytecodes_of_the_whole_package() -> None:
    """967 while each node checked that its tool's precompiled entry was still valid (the run's
    resolution, the catalog, the policy, the stages, the guard); now once per plan and tool. 902
    while each node's arguments were asked of ``unfit_arguments`` and the compiled schema even when
    they are exactly its tool's flat names and types (``Entry.plain``), now checked by those alone.
    862 while the nodes a node released were queued (``ReadyQueue.extend``) and the next wave was
    taken out of the queue (``take_all``) when they were all it held (``plan/_waves.py``)."""
    with _runtime() as rt:
        small, ok_small = _plan_bytecodes(rt, _plan(20))
        large, ok_large = _plan_bytecodes(rt, _plan(220))
    assert ok_small.status == ok_large.status == "ok"
    assert [o.data for o in ok_large.nodes.values()] == list(range(220))
    per_node = (large - small) / 200
    assert per_node <= 830, per_node


def test_checking_a_plan_of_simple_nodes_listed_in_dependency_order_takes_under_90_bytecodes_a_node() -> None:
    with _runtime() as rt:
        spec = rt.engine.catalog.get("quick")
        counts = []
        for n in (20, 220):
            plan = _plan(n)
            count, calls = _counting()
            sys.settrace(calls)
            try:
                checked = check_plan(plan, lambda _name: spec, rt.principal)
            finally:
                sys.settrace(None)
            assert isinstance(checked, CheckedPlan)
            assert checked.topo == [f"n{i}" for i in range(n)]
            counts.append(count[0])
    per_node = (counts[1] - counts[0]) / 200
    assert per_node <= 90, per_node


def _fresh_plan_bytecodes(rt: Runtime, n: int) -> tuple[int, Any]:
    """Bytecodes while a new plan object of ``n`` nodes (as a model's plan arrives) is checked,
    run and ended, on a run whose tool entries exist."""
    count, calls = _counting()

    async def run() -> Any:
        run_id = rt.new_run()
        await rt.arun_plan(_plan(n), run_id=run_id)  # warm: the run's tool entries exist
        plan = _plan(n)
        sys.settrace(calls)
        try:
            return await rt.arun_plan(plan, run_id=run_id)
        finally:
            sys.settrace(None)

    result = asyncio.run(run())
    return count[0], result


def test_a_new_plan_objects_instant_node_costs_under_915_bytecodes_of_the_whole_package() -> None:
    """A plan object run once is checked, keyed for the ready queue and listed in ``plan_started``
    on its run: 1,102 bytecodes a node while its ready-queue keys were made node by node in
    Python and its ``plan_started`` entries read each node's ``ToolSpec.key``, and its node began
    and settled in two frames; 1,052 while each node checked its tool's entry again; 987 while each
    node's arguments were asked of ``unfit_arguments`` and the compiled schema (now, when they are
    exactly its tool's flat names and types, of those alone); 945 while a wave of the nodes one
    node released went through the ready queue."""
    with _runtime() as rt:
        small, ok_small = _fresh_plan_bytecodes(rt, 20)
        large, ok_large = _fresh_plan_bytecodes(rt, 220)
    assert ok_small.status == ok_large.status == "ok"
    assert [o.data for o in ok_large.nodes.values()] == list(range(220))
    per_node = (large - small) / 200
    assert per_node <= 915, per_node
