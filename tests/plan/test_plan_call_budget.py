"""The plan's own work per node stays small: checking, starting, stepping and settling a plain
node, its ``plan_started`` entry and the plan's status take a handful of Python calls in
``actionspace.plan`` (before: 35 per node), whatever the engine does for the node's call."""

from __future__ import annotations

import asyncio
import sys
from types import FrameType
from typing import Any

from actionspace import Plan, PlanNode, Runtime

PLAN_DIR = "/actionspace/plan/"


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


def _plan_calls(rt: Runtime, plan: Plan) -> tuple[int, Any]:
    """Python-level calls made in ``actionspace.plan`` while ``plan`` runs, and its result."""
    count = 0

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal count
        if event == "call" and PLAN_DIR in frame.f_code.co_filename:
            count += 1

    async def run() -> Any:
        run_id = rt.new_run()
        await rt.arun_plan(plan, run_id=run_id)  # warm: the run's tool entries exist
        sys.setprofile(profile)
        try:
            return await rt.arun_plan(plan, run_id=run_id)
        finally:
            sys.setprofile(None)

    result = asyncio.run(run())
    return count, result


def test_a_plain_node_costs_the_plan_a_handful_of_calls() -> None:
    with _runtime() as rt:
        small, ok_small = _plan_calls(rt, _plan(20))
        large, ok_large = _plan_calls(rt, _plan(220))
    assert ok_small.status == ok_large.status == "ok"
    assert [o.data for o in ok_large.nodes.values()] == list(range(220))
    per_node = (large - small) / 200
    assert per_node <= 13, per_node
