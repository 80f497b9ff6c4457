"""A speculative node's losing alternatives are cancelled and awaited (for a bounded time) before
the node ends, whether a winner was found or the node itself was cancelled; either way the trace
records a ``speculation`` event naming the alternatives that were cancelled."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

import actionspace.plan.speculate as speculation
from actionspace import CancelScope, Runtime
from actionspace.plan import PlanResult


class _Tools:
    def __init__(self) -> None:
        self.running: set[str] = set()
        self.started: dict[str, asyncio.Event] = {}
        self.released = asyncio.Event()

    def start(self, name: str) -> None:
        self.running.add(name)
        self.started.setdefault(name, asyncio.Event()).set()

    async def until_started(self, *names: str) -> None:
        for name in names:
            await asyncio.wait_for(self.started.setdefault(name, asyncio.Event()).wait(), 5)


def _runtime(tools: _Tools) -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="read", reads=["r:{name}"])
    async def slow(name: str) -> str:
        """A read that waits long, and tidies up for a moment when it is cancelled."""
        tools.start(name)
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            await asyncio.sleep(0.02)
            raise
        finally:
            tools.running.discard(name)
        return name

    @rt.tool(effect="read", reads=["r:{name}"])
    async def fast(name: str) -> str:
        """A read that answers at once."""
        await asyncio.sleep(0.01)
        return name

    @rt.tool(effect="read", reads=["r:{name}"])
    async def stubborn(name: str) -> str:
        """A read that ignores its first cancel and ends only when the test releases it."""
        tools.start(name)
        try:
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                await tools.released.wait()
                raise
        finally:
            tools.running.discard(name)
        return name

    return rt


def _plan(*alternatives: tuple[str, str]) -> dict[str, Any]:
    return {
        "nodes": [
            {
                "id": "s",
                "first_of": [{"tool": tool, "arguments": {"name": name}} for tool, name in alternatives],
            }
        ]
    }


def _speculation(rt: Runtime, run_id: str) -> Mapping[str, Any]:
    (event,) = [e.data for e in rt.trace.events(run_id) if e.kind == "speculation"]
    return event


def test_a_cancelled_speculation_stops_every_alternative_and_records_it() -> None:
    tools = _Tools()
    rt = _runtime(tools)
    scope = CancelScope()

    async def scenario() -> tuple[PlanResult, set[str]]:
        task = asyncio.create_task(
            rt.arun_plan(_plan(("slow", "a"), ("slow", "b")), run_id="t2-c", cancel=scope)
        )
        await tools.until_started("a", "b")
        scope.cancel(reason="stop")
        result = await asyncio.wait_for(task, 5)
        return result, set(tools.running)  # as the plan returned, before anything else runs

    result, running = asyncio.run(scenario())
    assert running == set()
    s = result.nodes["s"].error
    assert s is not None and s.category == "cancelled"
    event = _speculation(rt, result.run_id)
    assert event["winner"] is None and event["launched"] == 2
    assert event["cancelled"] == [0, 1]
    assert event["non_authoritative"] == []


def test_the_losers_of_a_won_speculation_have_stopped_when_the_plan_returns() -> None:
    tools = _Tools()
    rt = _runtime(tools)

    async def scenario() -> tuple[PlanResult, set[str]]:
        result = await asyncio.wait_for(rt.arun_plan(_plan(("slow", "a"), ("fast", "b")), run_id="t2-w"), 5)
        return result, set(tools.running)

    result, running = asyncio.run(scenario())
    assert running == set()
    s = result.nodes["s"]
    assert s.ok and s.data == "b", s.error
    event = _speculation(rt, result.run_id)
    assert event["winner"] == 1 and event["cancelled"] == [0]


def test_a_loser_that_ignores_its_cancel_delays_the_node_only_for_a_bounded_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(speculation, "LOSER_GRACE_S", 0.05)
    tools = _Tools()
    rt = _runtime(tools)
    scope = CancelScope()

    async def scenario() -> tuple[PlanResult, set[str]]:
        plan = _plan(("stubborn", "a"), ("slow", "b"))
        task = asyncio.create_task(rt.arun_plan(plan, run_id="t2-b", cancel=scope))
        await tools.until_started("a", "b")
        scope.cancel(reason="stop")
        result = await asyncio.wait_for(task, 5)
        running = set(tools.running)
        tools.released.set()
        for _ in range(20):
            await asyncio.sleep(0)
        return result, running

    result, running = asyncio.run(scenario())
    assert running == {"a"}  # still tidying up: the plan did not wait for it past the bound
    event = _speculation(rt, result.run_id)
    assert event["cancelled"] == [0, 1]
    assert event["still_running"] == [0]
