"""A per-tool limit that could never admit a call is a configuration error when the plan is
started, never a plan that waits forever or an error from inside the scheduler."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.errors import ConfigurationError
from actionspace.plan import ToolLimit


def _runtime(ran: list[int]) -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="read")
    async def fetch(x: int) -> int:
        """Fetch one item."""
        ran.append(x)
        await asyncio.sleep(0)
        return x

    return rt


PLAN = {"nodes": [{"id": f"n{i}", "tool": "fetch", "arguments": {"x": i}} for i in range(3)]}


@pytest.mark.parametrize(
    "limit",
    [0, -1, "2"],
    ids=["zero", "negative", "text"],
)
def test_a_concurrency_cap_that_admits_nothing_is_refused_before_anything_runs(limit: Any) -> None:
    ran: list[int] = []
    rt = _runtime(ran)

    async def scenario() -> None:
        await asyncio.wait_for(rt.arun_plan(PLAN, tool_limits={"fetch": limit}), 5)

    with pytest.raises(ConfigurationError, match="fetch"):
        asyncio.run(scenario())
    assert ran == []


@pytest.mark.parametrize(
    "make",
    [
        lambda: ToolLimit(max_concurrent=0),
        lambda: ToolLimit(per_second=0),
        lambda: ToolLimit(per_second=-2.0),
        lambda: ToolLimit(per_second=float("nan")),
    ],
    ids=["max_concurrent=0", "per_second=0", "per_second<0", "per_second=nan"],
)
def test_a_tool_limit_that_admits_nothing_cannot_be_made(make: Any) -> None:
    with pytest.raises(ConfigurationError):
        make()


def test_a_fractional_rate_still_admits_every_call_in_time() -> None:
    ran: list[int] = []
    rt = _runtime(ran)
    result = rt.run_plan(PLAN, tool_limits={"fetch": ToolLimit(max_concurrent=1, per_second=50.0)})
    assert result.status == "ok" and sorted(ran) == [0, 1, 2]
