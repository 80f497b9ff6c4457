"""Plans under concurrency and rate limits: a per-tool cap, a per-second window, and which ready
node takes a slot first when slots are short."""

from __future__ import annotations

import asyncio
import threading

import pytest

from actionspace import Plan, PlanNode, Runtime
from actionspace.plan import PlanResult, ToolLimit
from tests.plan.start_clock import still_clock

WAIT_S = 10.0
LOOK_S = 0.02
"""The still clock's window: a start it refused is looked at again every ``LOOK_S`` real seconds."""


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


def test_a_per_second_limit_spaces_call_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = still_clock(monkeypatch, window_s=LOOK_S)
    rt = Runtime("memory://", recover_on_start=False)
    starts: list[float] = []
    fourth = threading.Event()

    @rt.tool(effect="read", reads=["api:"])
    async def ping(i: int) -> int:
        """Ping."""
        starts.append(clock.now)
        if len(starts) == 4:
            fourth.set()
        return i

    nodes = [PlanNode(id=f"p{i}", tool="ping", arguments={"i": i}) for i in range(6)]

    async def main() -> PlanResult:
        limits = {"ping": ToolLimit(per_second=4)}
        run = asyncio.create_task(rt.arun_plan(Plan(nodes=nodes), tool_limits=limits))
        assert await asyncio.to_thread(fourth.wait, WAIT_S)
        looked = clock.reads
        # the two refused starts were looked at again (twice each) while the clock stood still
        assert await asyncio.to_thread(clock.read_at_least, looked + 4, WAIT_S)
        assert len(starts) == 4
        clock.advance(LOOK_S)  # the first four starts leave the window
        return await asyncio.wait_for(run, WAIT_S)

    result = asyncio.run(main())
    assert result.status == "ok"
    assert starts == [0.0] * 4 + [LOOK_S] * 2  # four in the first window, the fifth and sixth in the next


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
