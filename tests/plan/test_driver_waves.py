"""Waves of nodes that never wait follow each other in one driver task: the loop turns once
between two waves (other tasks run), but no task is made per wave."""

from __future__ import annotations

import asyncio

from actionspace import Plan, Runtime
from actionspace.plan.model import PlanResult


def test_a_chain_of_nodes_that_never_wait_runs_in_one_task_and_yields_between_waves() -> None:
    rt = Runtime("memory://", recover_on_start=False)
    tasks: list[object] = []
    seen: list[str] = []

    @rt.tool(effect="none")
    async def step(name: str) -> str:
        tasks.append(asyncio.current_task())
        seen.append(name)
        return name

    chain = [{"id": "c0", "tool": "step", "arguments": {"name": "c0"}}]
    chain += [
        {"id": f"c{i}", "tool": "step", "arguments": {"name": f"c{i}"}, "depends_on": [f"c{i - 1}"]}
        for i in range(1, 8)
    ]

    async def ticker() -> None:
        while True:
            seen.append("tick")
            await asyncio.sleep(0)

    async def scenario() -> PlanResult:
        other = asyncio.ensure_future(ticker())
        try:
            return await asyncio.wait_for(rt.arun_plan(Plan.from_dict({"nodes": chain})), 10)
        finally:
            other.cancel()

    result = asyncio.run(scenario())

    assert result.status == "ok"
    assert [o.data for o in result.nodes.values()] == [f"c{i}" for i in range(8)]
    assert len(tasks) == 8
    assert len({id(t) for t in tasks}) == 1  # one driver task for the eight waves
    between = [seen[seen.index(f"c{i}") + 1 : seen.index(f"c{i + 1}")] for i in range(7)]
    assert all("tick" in gap for gap in between)  # and the loop ran the ticker between them
