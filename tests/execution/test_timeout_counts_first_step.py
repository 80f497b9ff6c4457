"""A tool's timeout counts from its call, its first step included, on every path.

An async tool's first step runs on the calling path (no timer is armed for a tool that answers
without waiting); the timer is armed once it waits. It must be armed for what is left of the
timeout, not for the whole timeout again: a first step that stalls (a blocking call before the
first ``await``, or a process descheduled under load) would otherwise let the tool run past its
timeout. Here the first step takes 150 ms and the wait 100 ms, under a 200 ms timeout.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from actionspace import Plan, PlanNode, Runtime, ToolCall
from actionspace.catalog.spec import RetryPolicy

FIRST_STEP_S = 0.15
WAIT_S = 0.1
TIMEOUT_S = 0.2


def _runtime() -> Runtime:
    rt = Runtime("memory://")

    async def stall(x: int) -> int:
        time.sleep(FIRST_STEP_S)  # the first step, before the first wait
        await asyncio.sleep(WAIT_S)
        return x

    rt.add_tool(
        name="stall",
        input_schema={"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]},
        fn=stall,
        effect="read",
        timeout_s=TIMEOUT_S,
        retry=RetryPolicy(max_attempts=1),
    )
    return rt


def _timed_out(obs: object) -> bool:
    error = getattr(obs, "error", None)
    return error is not None and error.details.get("timeout_s") == TIMEOUT_S


@pytest.mark.parametrize("path", ["acall", "acall_staged", "call", "plan"])
def test_a_tool_whose_first_step_took_most_of_its_timeout_times_out_at_its_first_wait(path: str) -> None:
    rt = _runtime()
    run = rt.new_run()
    call = ToolCall(name="stall", arguments={"x": 1})
    rt.call(ToolCall(name="stall", arguments={"x": 0}), run_id=run)  # the name resolved: the fast path
    if path == "acall":
        obs = asyncio.run(rt.acall(call, run_id=run))
    elif path == "acall_staged":
        rt.engine.fast.enabled = False
        obs = asyncio.run(rt.acall(call, run_id=run))
    elif path == "call":
        obs = rt.call(call, run_id=run)
    else:
        result = rt.run_plan(Plan(nodes=[PlanNode(id="n1", tool="stall", arguments={"x": 1})]), run_id=run)
        obs = result.nodes["n1"]
    assert obs.status == "error" and _timed_out(obs), obs
