"""Plans under concurrency and rate limits: a per-tool cap, a per-second window, and which ready
node takes a slot first when slots are short."""

from __future__ import annotations

import asyncio
import time

from actionspace import Plan, PlanNode, Runtime
from actionspace.plan import ToolLimit


def test_tool_limits_bound_concurrency_per_tool() -> None:
    rt = Runtime("memory://", recover_on_start=False)
    running = {"now": 0, "peak": 0}

    @rt.tool(effect="read", reads=["api:"])
    async def search(q: str) -> str:
        """Search."""
        running["now"] += 1
        running["peak"] = max(running["peak"], running["now"])
        await asyncio.sleep(0.002)
        running["now"] -= 1
        return q

    nodes = [PlanNode(id=f"q{i}", tool="search", arguments={"q": str(i)}) for i in range(12)]
    result = rt.run_plan(Plan(nodes=nodes), tool_limits={"search": 3})
    assert result.status == "ok"
    assert running["peak"] == 3


def test_a_per_second_limit_spaces_call_starts() -> None:
    rt = Runtime("memory://", recover_on_start=False)
    starts: list[float] = []

    @rt.tool(effect="read", reads=["api:"])
    async def ping(i: int) -> int:
        """Ping."""
        starts.append(time.monotonic())
        return i

    nodes = [PlanNode(id=f"p{i}", tool="ping", arguments={"i": i}) for i in range(6)]
    result = rt.run_plan(Plan(nodes=nodes), tool_limits={"ping": ToolLimit(per_second=4)})
    assert result.status == "ok"
    assert len(starts) == 6
    assert starts[4] - starts[0] >= 0.95  # the fifth start waited for the window
    assert starts[3] - starts[0] < 0.5


def test_when_slots_are_short_the_head_of_the_longest_chain_starts_first() -> None:
    rt = Runtime("memory://", recover_on_start=False)
    started: list[str] = []

    @rt.tool(effect="none")
    async def step(name: str) -> str:
        """One step."""
        started.append(name)
        await asyncio.sleep(0)
        return name

    plan = Plan.from_dict(
        {
            "nodes": [
                {"id": "lone", "tool": "step", "arguments": {"name": "lone"}},
                {"id": "head", "tool": "step", "arguments": {"name": "head"}},
                {"id": "mid", "tool": "step", "arguments": {"name": "mid"}, "depends_on": ["head"]},
                {"id": "tail", "tool": "step", "arguments": {"name": "tail"}, "depends_on": ["mid"]},
            ]
        }
    )
    result = rt.run_plan(plan, max_concurrency=1)
    assert result.status == "ok"
    assert started[0] == "head"
    assert set(started) == {"lone", "head", "mid", "tail"}
