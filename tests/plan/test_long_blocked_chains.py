"""A failed node blocks every descendant however long the chain below it: the plan ends, each
descendant names the failed node, and nothing of the chain runs."""

from __future__ import annotations

import asyncio
import sys

from actionspace import Runtime, ToolError
from actionspace.plan import PlanResult


def test_a_failure_at_the_head_of_a_chain_longer_than_the_stack_blocks_all_of_it() -> None:
    rt = Runtime("memory://", recover_on_start=False)
    ran: list[int] = []

    @rt.tool(effect="none")
    def step(i: int) -> int:
        """One step of a chain."""
        ran.append(i)
        if i == 0:
            raise ToolError("permanent", "the head fails")
        return i

    length = sys.getrecursionlimit() + 200
    nodes = [
        {"id": f"n{i}", "tool": "step", "arguments": {"i": i}, **({"depends_on": [f"n{i - 1}"]} if i else {})}
        for i in range(length)
    ]

    async def scenario() -> PlanResult:
        return await asyncio.wait_for(rt.arun_plan({"nodes": nodes}), 10)

    result = asyncio.run(scenario())
    assert ran == [0]
    assert result.status == "error" and len(result.nodes) == length
    head = result.nodes["n0"].error
    assert head is not None and head.category == "permanent"
    for i in range(1, length):
        error = result.nodes[f"n{i}"].error
        assert error is not None and error.category == "cancelled" and error.details["blocked_by"] == "n0"
