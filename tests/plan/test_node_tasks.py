"""A node's tool runs in one task of its own, from its first step to its end, as under
``asyncio.gather``: what the tool binds to the current task in its first step (its own
``asyncio.timeout``, a ``TaskGroup``) belongs to that node, never to the driver that began it or
to another node.

Every test runs twice: with a node's call begun at once as its task (the driver makes the task
current for the call's first step), and as where asyncio offers no way to do that (the call
begins when its task first runs)."""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Iterator
from typing import Any

import pytest

from actionspace import Plan, Runtime
from actionspace.plan import driver
from actionspace.plan.model import PlanResult


@pytest.fixture(autouse=True, params=["begun at once", "begun on the task's first run"])
def _begin(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    if request.param != "begun at once":
        monkeypatch.setattr(driver, "_swap", None)
    yield


def _runtime() -> Runtime:
    return Runtime("memory://", recover_on_start=False)


def _plan(tool: str, n: int, **extra: Any) -> Plan:
    nodes = [{"id": f"n{i}", "tool": tool, "arguments": {"x": i}} for i in range(n)]
    return Plan.from_dict({"nodes": nodes, **extra})


async def _within(rt: Runtime, plan: Plan, seconds: float = 10.0, **kwargs: Any) -> PlanResult:
    return await asyncio.wait_for(rt.arun_plan(plan, run_id=rt.new_run(), **kwargs), seconds)


def test_a_tools_own_timeout_fires_inside_a_plan() -> None:
    """Six nodes of a tool that bounds its own wait with ``asyncio.timeout``: each times out
    after 50 ms, in the first plan (the tool not yet seen waiting) and in the next."""
    rt = _runtime()

    @rt.tool(effect="none")
    async def bounded(x: int) -> str:
        try:
            async with asyncio.timeout(0.05):
                await asyncio.sleep(5)
        except TimeoutError:
            return "timed out"
        return "slept"

    for _ in range(2):
        started = time.monotonic()
        result = asyncio.run(_within(rt, _plan("bounded", 6), max_concurrency=6))
        assert result.status == "ok"
        assert [o.data for o in result.nodes.values()] == ["timed out"] * 6
        assert time.monotonic() - started < 2.0


def test_a_tool_runs_in_one_task_of_its_own_from_its_first_step_to_its_end() -> None:
    rt = _runtime()
    seen: dict[int, tuple[object, object]] = {}

    @rt.tool(effect="none")
    async def where(x: int) -> int:
        first = asyncio.current_task()
        await asyncio.sleep(0.001)
        seen[x] = (first, asyncio.current_task())
        return x

    for _ in range(2):
        seen.clear()
        result = asyncio.run(_within(rt, _plan("where", 8), max_concurrency=8))
        assert result.status == "ok"
        assert sorted(seen) == list(range(8))
        assert all(first is last for first, last in seen.values())
        assert len({id(first) for first, _ in seen.values()}) == 8


def test_a_failing_task_group_in_one_node_cancels_no_other_node() -> None:
    """A tool's ``TaskGroup`` cancels its parent task when a child fails: that must be the
    node's own task, never the driver that began it (finished by then, or waiting for another
    node), and asyncio has nothing to report to the loop's exception handler."""
    rt = _runtime()

    async def fail_soon() -> None:
        await asyncio.sleep(0.01)
        raise ValueError("child failed")

    @rt.tool(effect="none")
    async def grouped(x: int) -> str:
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(fail_soon())
                group.create_task(asyncio.sleep(1))
        except ExceptionGroup as failed:
            return "child failed" if failed.subgroup(ValueError) else "other failure"
        return "no failure"

    @rt.tool(effect="none")
    def steady(x: int) -> int:
        time.sleep(0.2)
        return x

    reported: list[dict[str, Any]] = []

    async def scenario(plan: Plan) -> PlanResult:
        asyncio.get_running_loop().set_exception_handler(lambda _loop, context: reported.append(context))
        return await _within(rt, plan)

    for _ in range(2):
        plan = Plan.from_dict(
            {
                "nodes": [
                    {"id": "g", "tool": "grouped", "arguments": {"x": 0}},
                    {"id": "s", "tool": "steady", "arguments": {"x": 7}},
                    {"id": "h", "tool": "grouped", "arguments": {"x": 1}},
                ]
            }
        )
        result = asyncio.run(scenario(plan))
        assert result.nodes["g"].data == result.nodes["h"].data == "child failed"
        steady_obs = result.nodes["s"]
        assert steady_obs.status == "ok" and steady_obs.data == 7, steady_obs.error
        assert [c.get("message") for c in reported] == []


def test_what_a_node_sets_in_its_context_no_other_node_sees() -> None:
    """A tool that makes something current for the length of its call (as a tracing span does:
    a context variable set in its first step and reset at its end): every node finds the value
    the plan's caller had as its parent, never another node's, as under ``asyncio.gather``."""
    rt = _runtime()
    current: contextvars.ContextVar[str] = contextvars.ContextVar("current", default="caller")
    parents: dict[int, str] = {}

    @rt.tool(effect="none")
    async def spanned(x: int) -> int:
        parents[x] = current.get()
        token = current.set(f"span of node {x}")
        try:
            await asyncio.sleep(0.001)
        finally:
            current.reset(token)
        return x

    for _ in range(2):
        parents.clear()
        result = asyncio.run(_within(rt, _plan("spanned", 6), max_concurrency=6))
        assert result.status == "ok"
        assert parents == dict.fromkeys(range(6), "caller")


def test_a_tool_that_cancels_its_own_task_in_its_first_step_sees_the_cancel_at_its_wait() -> None:
    """As under ``asyncio.gather``: the cancel reaches the tool where it waits next, the tool
    may catch it and answer, and the plan goes on (whether the node was begun by the driver or
    in a task of its own)."""
    rt = _runtime()

    @rt.tool(effect="none")
    async def restless(x: int) -> str:
        if x % 2 == 0:
            task = asyncio.current_task()
            assert task is not None
            task.cancel()
        try:
            await asyncio.sleep(0.01)
        except asyncio.CancelledError:
            return "cancel caught"
        return "slept"

    for _ in range(2):
        result = asyncio.run(_within(rt, _plan("restless", 6), seconds=5, max_concurrency=6))
        assert result.status == "ok"
        assert [o.data for o in result.nodes.values()] == ["cancel caught", "slept"] * 3
