"""The alternatives of a speculative node are calls of their tools like any other: a per-tool
limit bounds them too. An alternative whose tool has no free slot is not launched."""

from __future__ import annotations

import asyncio
from typing import Any

from actionspace import Plan, PlanNode, Runtime
from actionspace.plan import Alternative, ToolLimit


def _runtime(active: dict[str, int], most: dict[str, int]) -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)

    async def track(name: str, source: str) -> dict[str, Any]:
        active[name] = active.get(name, 0) + 1
        most[name] = max(most.get(name, 0), active[name])
        await asyncio.sleep({"fast": 0.005, "slow": 0.03}.get(source, 0.02))
        active[name] -= 1
        return {"source": source}

    @rt.tool(effect="read", reads=["quotes:"])
    async def quote(source: str) -> dict[str, Any]:
        """Ask one price source."""
        return await track("quote", source)

    @rt.tool(effect="read", reads=["mirror:"])
    async def mirror(source: str) -> dict[str, Any]:
        """Ask a mirror of the price sources."""
        return await track("mirror", source)

    return rt


def test_alternatives_of_one_tool_stay_within_its_concurrency_cap() -> None:
    active: dict[str, int] = {}
    most: dict[str, int] = {}
    rt = _runtime(active, most)
    plan = Plan(
        nodes=[
            PlanNode(
                id="price",
                first_of=(
                    Alternative(tool="quote", arguments={"source": "slow"}),
                    Alternative(tool="quote", arguments={"source": "fast"}),
                ),
            )
        ]
    )
    result = rt.run_plan(plan, tool_limits={"quote": ToolLimit(max_concurrent=1)})
    assert most["quote"] == 1
    assert result.status == "ok" and result.nodes["price"].data == {"source": "slow"}
    assert result.stats["extra_calls"] == 0


def test_an_alternative_of_another_tool_counts_against_that_tools_cap() -> None:
    active: dict[str, int] = {}
    most: dict[str, int] = {}
    rt = _runtime(active, most)
    plan = Plan(
        nodes=[
            PlanNode(id="busy", tool="mirror", arguments={"source": "slow"}),
            PlanNode(
                id="price",
                first_of=(
                    Alternative(tool="quote", arguments={"source": "slow"}),
                    Alternative(tool="mirror", arguments={"source": "fast"}),
                ),
            ),
        ]
    )
    result = rt.run_plan(plan, tool_limits={"mirror": 1})
    assert most["mirror"] == 1
    assert result.status == "ok"


def test_alternatives_within_the_cap_still_race() -> None:
    active: dict[str, int] = {}
    most: dict[str, int] = {}
    rt = _runtime(active, most)
    plan = Plan(
        nodes=[
            PlanNode(
                id="price",
                first_of=(
                    Alternative(tool="quote", arguments={"source": "slow"}),
                    Alternative(tool="quote", arguments={"source": "fast"}),
                ),
            )
        ]
    )
    result = rt.run_plan(plan, tool_limits={"quote": 2})
    assert result.nodes["price"].data == {"source": "fast"}
    assert result.stats["extra_calls"] == 1 and most["quote"] == 2
