"""Nodes whose calls never wait run inline in one driver task; a node that waits gets a task of
its own (its timeout is its own); a cancel finds nodes released but not started yet."""

from __future__ import annotations

import asyncio
import gc
import warnings
from collections.abc import Callable
from typing import Any

import pytest

from actionspace import CancelScope, Plan, Runtime
from actionspace.plan.model import PlanResult


def _runtime() -> Runtime:
    return Runtime("memory://", recover_on_start=False)


async def _within(rt: Runtime, plan: Plan, seconds: float = 10.0, **kwargs: Any) -> PlanResult:
    return await asyncio.wait_for(rt.arun_plan(plan, **kwargs), seconds)


def _sleepers(
    rt: Runtime, n: int, started: list[int], ended: list[int], first: Callable[[], object] | None = None
) -> Plan:
    """A plan of ``n`` nodes of a tool that sleeps 30 s; each call's start and end are noted
    (``first`` is called at the start of node 0's)."""

    @rt.tool(effect="none")
    async def nap(x: int) -> int:
        started.append(x)
        if x == 0 and first is not None:
            first()
        try:
            await asyncio.sleep(30)
        finally:
            ended.append(x)
        return x

    return Plan.from_dict(
        {"nodes": [{"id": f"n{i}", "tool": "nap", "arguments": {"x": i}} for i in range(n)]}
    )


@pytest.mark.parametrize("sync", [False, True])
def test_nodes_whose_calls_never_wait_run_without_a_task_each(sync: bool) -> None:
    rt = _runtime()
    tasks: list[object] = []

    def quick_sync(x: int) -> int:
        tasks.append(asyncio.current_task())
        return x

    async def quick_async(x: int) -> int:
        return quick_sync(x)

    rt.tool(effect="none", name="quick")(quick_sync if sync else quick_async)

    nodes = [{"id": f"r{i}", "tool": "quick", "arguments": {"x": i}} for i in range(40)]
    refs = [{"x": {"$ref": f"r{i}.data"}} for i in range(40)]
    nodes += [{"id": f"s{i}", "tool": "quick", "arguments": refs[i]} for i in range(40)]
    result = asyncio.run(_within(rt, Plan.from_dict({"nodes": nodes}), max_concurrency=100))

    assert result.status == "ok"
    assert {k: o.data for k, o in result.nodes.items()} == {
        **{f"r{i}": i for i in range(40)},
        **{f"s{i}": i for i in range(40)},
    }
    assert len(tasks) == 80
    # one driver task per wave: the 40 roots, then the 40 nodes they released
    assert len({id(t) for t in tasks[:40]}) == 1
    assert len({id(t) for t in tasks[40:]}) == 1
    assert result.stats["max_parallel"] == 40  # the wave still counts as running together


def test_a_cancel_arriving_after_a_node_was_released_and_before_it_started_cancels_it() -> None:
    rt = _runtime()
    scope = CancelScope()
    ran: list[str] = []

    @rt.tool(effect="none")
    async def quick(name: str) -> str:
        ran.append(name)
        return name

    @rt.tool(effect="none")
    async def stop(target: str) -> str:
        scope.cancel([target], reason="no longer needed")
        return "asked"

    plan = Plan.from_dict(
        {
            "nodes": [
                {"id": "a", "tool": "quick", "arguments": {"name": "a"}},
                {"id": "x", "tool": "stop", "arguments": {"target": "d"}},
                {"id": "d", "tool": "quick", "arguments": {"name": "d"}, "depends_on": ["a"]},
            ]
        }
    )
    result = asyncio.run(_within(rt, plan, cancel=scope))

    assert result.nodes["a"].status == "ok" and result.nodes["x"].status == "ok"
    d = result.nodes["d"]
    assert d.error is not None and d.error.category == "cancelled"
    assert d.error.details["phase"] == "not_dispatched"
    assert ran == ["a"]
    assert result.stats["cancelled"] == ["d"]


def test_a_node_that_waits_past_its_timeout_fails_alone() -> None:
    rt = _runtime()

    @rt.tool(effect="none")
    async def quick(x: float) -> float:
        return x

    @rt.tool(effect="none", timeout_s=0.05)
    async def nap(seconds: float) -> float:
        await asyncio.sleep(seconds)
        return seconds

    nodes: list[dict[str, Any]] = [
        {"id": "q0", "tool": "quick", "arguments": {"x": 0}},
        {"id": "late", "tool": "nap", "arguments": {"seconds": 2.0}},
        {"id": "q1", "tool": "quick", "arguments": {"x": 1}},
        {"id": "n0", "tool": "nap", "arguments": {"seconds": 0.001}},
        {"id": "n1", "tool": "nap", "arguments": {"seconds": 0.002}},
        {
            "id": "after",
            "tool": "quick",
            "arguments": {"x": {"$ref": "n0.data"}},
            "depends_on": ["q1"],
        },
        {"id": "blocked", "tool": "quick", "arguments": {"x": 2}, "depends_on": ["late"]},
    ]
    result = asyncio.run(_within(rt, Plan.from_dict({"nodes": nodes})))

    late = result.nodes["late"]
    assert late.error is not None and "did not answer within 0.05s" in late.error.message
    assert {k for k, o in result.nodes.items() if o.status == "ok"} == {
        "q0",
        "q1",
        "n0",
        "n1",
        "after",
    }
    assert result.nodes["after"].data == 0.001
    blocked = result.nodes["blocked"]
    assert blocked.error is not None and blocked.error.details["blocked_by"] == "late"


def test_a_read_aborted_while_it_waits_ends_cancelled_and_the_plan_goes_on() -> None:
    rt = _runtime()
    scope = CancelScope()
    started = asyncio.Event()

    @rt.tool(effect="read", reads=["res:x"])
    async def slow_read() -> str:
        started.set()
        await asyncio.sleep(5)
        return "late"

    @rt.tool(effect="none")
    async def quick(x: int) -> int:
        return x

    plan = Plan.from_dict(
        {
            "nodes": [
                {"id": "r", "tool": "slow_read", "arguments": {}},
                *({"id": f"q{i}", "tool": "quick", "arguments": {"x": i}} for i in range(5)),
                {"id": "then", "tool": "quick", "arguments": {"x": 9}, "depends_on": ["q4"]},
            ]
        }
    )

    async def scenario() -> PlanResult:
        running = asyncio.ensure_future(_within(rt, plan, cancel=scope))
        await asyncio.wait_for(started.wait(), 5)
        scope.cancel(["r"], reason="user pressed stop")
        return await running

    result = asyncio.run(scenario())

    r = result.nodes["r"]
    assert r.error is not None and r.error.category == "cancelled"
    assert r.error.details["phase"] == "running"
    assert all(result.nodes[f"q{i}"].data == i for i in range(5))
    assert result.nodes["then"].data == 9


@pytest.mark.parametrize("limit", [1, 2, 3])
def test_inline_nodes_respect_the_concurrency_limit_and_priority(limit: int) -> None:
    rt = _runtime()
    order: list[str] = []

    @rt.tool(effect="none")
    async def mark(name: str) -> str:
        order.append(name)
        return name

    # c0 → c1 → c2 is the longest chain: its head goes first whenever nodes wait for a slot
    nodes = [
        {"id": "a", "tool": "mark", "arguments": {"name": "a"}},
        {"id": "b", "tool": "mark", "arguments": {"name": "b"}},
        {"id": "c0", "tool": "mark", "arguments": {"name": "c0"}},
        {"id": "c1", "tool": "mark", "arguments": {"name": "c1"}, "depends_on": ["c0"]},
        {"id": "c2", "tool": "mark", "arguments": {"name": "c2"}, "depends_on": ["c1"]},
    ]
    result = asyncio.run(_within(rt, Plan.from_dict({"nodes": nodes}), max_concurrency=limit))

    assert result.status == "ok"
    assert result.stats["max_parallel"] <= limit
    assert order[0] == "c0"
    assert order.index("c1") > order.index("c0") and order.index("c2") > order.index("c1")


def test_a_chain_of_nodes_that_never_wait_runs_in_one_task_and_yields_between_waves() -> None:
    rt = _runtime()
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
            return await _within(rt, Plan.from_dict({"nodes": chain}))
        finally:
            other.cancel()

    result = asyncio.run(scenario())

    assert result.status == "ok"
    assert [s for s in seen if s != "tick"] == [f"c{i}" for i in range(8)]
    assert len(tasks) == 8
    assert len({id(t) for t in tasks}) == 1  # one driver task for the eight waves, none per wave
    between = [seen[seen.index(f"c{i}") + 1 : seen.index(f"c{i + 1}")] for i in range(7)]
    assert all("tick" in gap for gap in between)  # and the loop ran the ticker between them


def test_cancelling_a_plan_ends_the_tasks_of_its_waiting_nodes_and_leaves_nothing_running() -> None:
    """Nodes of a tool that waited run in tasks of their own (Driver._solo); a cancelled plan
    cancels them, each ends (its tool's sleep cut short), and no task outlives the plan."""
    rt = _runtime()
    started: list[int] = []
    ended: list[int] = []
    plan = _sleepers(rt, 6, started, ended)

    async def scenario() -> set[asyncio.Task[Any]]:
        run = rt.new_run()
        task = asyncio.ensure_future(rt.arun_plan(plan, run_id=run, max_concurrency=6))
        while len(started) < 6:
            await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(5):
            await asyncio.sleep(0)
        return {t for t in asyncio.all_tasks() if t is not asyncio.current_task()}

    left = asyncio.run(scenario())
    assert left == set()
    assert sorted(ended) == list(range(6))


def test_the_head_of_a_wave_of_waiting_nodes_starts_first() -> None:
    """A wave of a waiting tool's nodes begins with the head of the longest chain: the driver
    steps the wave's nodes in the ready queue's order, each to its tool's first wait."""
    rt = _runtime()
    order: list[str] = []

    @rt.tool(effect="none")
    async def hop(name: str) -> str:
        order.append(name)
        await asyncio.sleep(0.001)
        return name

    def node(name: str, *after: str) -> dict[str, Any]:
        return {"id": name, "tool": "hop", "arguments": {"name": name}, "depends_on": list(after)}

    # x heads the longest chain after w: the ready queue puts it first in the wave [x, y, z]
    plan = Plan.from_dict(
        {
            "nodes": [
                node("w"),
                node("y", "w"),
                node("z", "w"),
                node("x", "w"),
                node("x2", "x"),
                node("x3", "x2"),
            ]
        }
    )
    result = asyncio.run(_within(rt, plan))
    assert result.status == "ok"
    assert order[:2] == ["w", "x"]
    assert set(order[2:4]) == {"y", "z"}


def test_every_node_of_a_wave_whose_tool_waits_begins_before_the_loop_turns() -> None:
    """The driver steps the wave's first node, which waits and keeps the driver's task; each of
    the seven others gets a task of its own whose call begins at once, that task current (as an
    eager task begins): all eight begin in one turn of the loop, in every plan."""
    rt = _runtime()
    began: list[int] = []
    turns = [0]
    run = rt.new_run()

    @rt.tool(effect="none")
    async def nap(x: int) -> int:
        began.append(turns[0])
        await asyncio.sleep(0.005)
        return x

    async def ticker() -> None:
        while True:
            turns[0] += 1
            await asyncio.sleep(0)

    async def scenario() -> PlanResult:
        tick = asyncio.ensure_future(ticker())
        plan = Plan.from_dict(
            {"nodes": [{"id": f"n{i}", "tool": "nap", "arguments": {"x": i}} for i in range(8)]}
        )
        try:
            return await rt.arun_plan(plan, run_id=run, max_concurrency=8)
        finally:
            tick.cancel()

    for _ in range(2):
        began.clear()
        result = asyncio.run(scenario())
        assert result.status == "ok" and [result.nodes[f"n{i}"].data for i in range(8)] == list(range(8))
        assert len(began) == 8 and len(set(began)) == 1, began  # all eight in one turn of the loop


def test_a_plan_cancelled_while_its_wave_begins_ends_every_call_that_began() -> None:
    """The plan is cancelled by the first step of its wave's first call: each call that began is
    cancelled where its tool waits and recorded so (the records of a call ending after the plan's
    last flush are written at once), nothing is left running and no coroutine is left
    unawaited."""
    rt = _runtime()
    started: list[int] = []
    ended: list[int] = []
    outer: dict[str, asyncio.Task[Any]] = {}
    plan = _sleepers(rt, 4, started, ended, first=lambda: outer["plan"].cancel())
    run = rt.new_run()

    async def scenario() -> set[asyncio.Task[Any]]:
        outer["plan"] = task = asyncio.ensure_future(rt.arun_plan(plan, run_id=run, max_concurrency=4))
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(5):
            await asyncio.sleep(0)
        return {t for t in asyncio.all_tasks() if t is not asyncio.current_task()}

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        left = asyncio.run(scenario())
        gc.collect()
    assert left == set()
    assert started and sorted(ended) == sorted(started)
    assert not [w for w in caught if "never awaited" in str(w.message)]
    cancelled = [e.data["node"] for e in rt.trace.events(run) if e.kind == "plan_node_cancelled"]
    assert sorted(cancelled) == [f"n{x}" for x in sorted(started)]


def _awaits(coro: Any) -> list[str]:
    """The names of the coroutines and generators ``coro`` awaits, one inside the next (down to
    one that steps what it drives by hand)."""
    chain: list[str] = []
    while coro is not None and hasattr(coro, "__name__"):
        chain.append(coro.__name__)
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return chain


def test_a_waiting_plain_node_resumes_its_tool_through_three_frames_of_ours() -> None:
    """A plain node whose tool waits is continued by its task through the driver's frame, the
    node's call (observation and trace) and the frame that steps the tool under its timeout: each
    wake of the tool passes those three and no more (the executor's own frame, which types
    failures and retries, is entered only when the tool failed)."""
    rt = _runtime()
    waiting = asyncio.Event()
    chains: list[list[str]] = []

    @rt.tool(effect="none")
    async def wait_for_it(x: int) -> int:
        await waiting.wait()
        return x

    async def scenario() -> PlanResult:
        nodes = [{"id": k, "tool": "wait_for_it", "arguments": {"x": 1}} for k in ("a", "b")]
        plan = Plan.from_dict({"nodes": nodes})
        running = asyncio.ensure_future(rt.arun_plan(plan, run_id=rt.new_run()))
        for _ in range(5):
            await asyncio.sleep(0)
        me = asyncio.current_task()
        chains.extend(_awaits(t.get_coro()) for t in asyncio.all_tasks() if t is not me and t is not running)
        waiting.set()
        return await asyncio.wait_for(running, 5)

    result = asyncio.run(scenario())
    assert result.status == "ok" and result.nodes["a"].data == result.nodes["b"].data == 1
    # each node's task: the driver's frame (the first node, which kept the driver) or the node
    # task's own (the second), the call's and the one stepping the tool under its timeout
    # (before: seven, the driver's three, the call's, the executor's three)
    assert sorted(chain[0] for chain in chains) == ["_drive", "_own"], chains
    assert [len(chain) for chain in chains] == [3, 3], chains
