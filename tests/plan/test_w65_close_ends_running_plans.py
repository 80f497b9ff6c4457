"""A plan running in process when its Runtime closes ends promptly, whoever closes it (another
thread, another task of the plan's loop, with or without ``wait``): its running reads end
``cancelled``, its running writes ``unknown_commit`` with their ledger entries noted ``unknown``,
nodes not begun are never sent and block their successors, ``plan_finished`` is written, and no
tool is called again."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actionspace import Observation, Runtime, _closing
from actionspace.plan import PlanResult, ToolLimit
from tests import close_tools
from tests.close_tools import Tools, slow_runtime, write_entries
from tests.plan.start_clock import still_clock

HELD_S = 90.0
"""How long each tool takes here (``SLOW_S``): a thread tool is held on an event the test sets only
once the plan ended (or after this long), so a plan that waited for its tools would take this long."""
ENDS_WITHIN_S = 20.0
"""How long a plan may take to end once ``close()`` was called: far above the milliseconds it takes,
far below the :data:`HELD_S` a plan waiting for its tools would take (a bound a loaded machine meets)."""
WAIT_S = 45.0
"""A bound for a thread's end: above :data:`ENDS_WITHIN_S`, below :data:`HELD_S`."""
CLOSE_WAITS_S = 120.0
"""What ``close()`` would wait for plans here (``_closing.PLAN_END_WAIT_S``, ``PLAN_CUT_SEEN_S``)."""


class _HeldTime:
    """``time`` as the thread tools of ``tests.close_tools`` see it: ``sleep`` waits for ``release``."""

    def __init__(self, release: threading.Event) -> None:
        self._release = release

    def sleep(self, seconds: float) -> None:
        self._release.wait(seconds)

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


@pytest.fixture(autouse=True)
def release(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Every tool takes :data:`HELD_S`; a thread tool returns early once the event is set (at the
    test's end at the latest)."""
    event = threading.Event()
    monkeypatch.setattr(close_tools, "SLOW_S", HELD_S)
    monkeypatch.setattr(close_tools, "time", _HeldTime(event))
    try:
        yield event
    finally:
        event.set()


def _released_once_ended(thread: threading.Thread, release: threading.Event) -> None:
    """Let the held tools go once ``thread`` (the plan's) ended: ``close(wait=True)`` waits for them.
    Otherwise they are held to the test's end, so no late answer settles an entry before it is read."""

    def watch() -> None:
        thread.join(HELD_S)
        release.set()

    threading.Thread(target=watch, daemon=True).start()


def _plan(read: str, write: str) -> dict[str, Any]:
    """A read and a write that run at once, and a node after the read that never begins."""
    return {
        "nodes": [
            {"id": "r", "tool": read, "arguments": {"x": 1}},
            {"id": "w", "tool": write, "arguments": {"x": 2}},
            {"id": "after", "tool": read, "arguments": {"x": 3}, "depends_on": ["r"]},
        ]
    }


def _url(tmp_path: Path, store: str) -> str:
    return "memory://" if store == "memory" else f"sqlite:///{tmp_path / 'w65.db'}"


def _assert_category(obs: Observation, category: str) -> None:
    assert obs.error is not None, obs
    assert obs.error.category == category, obs.error
    assert not obs.error.retryable


def _assert_ended_by_close(result: PlanResult, tools: Tools, read: str, write: str) -> None:
    _assert_category(result.nodes["r"], "cancelled")
    _assert_category(result.nodes["w"], "unknown_commit")
    after = result.nodes["after"]
    _assert_category(after, "cancelled")
    assert after.error is not None and after.error.details.get("phase") == "not_dispatched"
    assert result.status == "error"
    assert tools.calls == Counter({read: 1, write: 1})  # each tool once, nothing sent again


def _in_thread(work: Callable[[], PlanResult]) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(work())
        except BaseException as exc:
            out.append(exc)
        out.append(time.monotonic())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def _kinds(url: str, rt: Runtime, run_id: str) -> list[str]:
    if url.startswith("sqlite"):
        with Runtime(url, recover_on_start=False) as again:
            return [e.kind for e in again.trace.events(run_id)]
    return [e.kind for e in rt.trace.events(run_id)]


@pytest.mark.parametrize("store", ["memory", "sqlite"])
@pytest.mark.parametrize("wait", [False, True], ids=["close", "close_wait"])
@pytest.mark.parametrize("use_async", [False, True], ids=["run_plan", "arun_plan"])
@pytest.mark.parametrize(
    "tools_kind", [("get", "put"), ("aget", "aput")], ids=["thread_tools", "async_tools"]
)
def test_a_plan_running_on_another_thread_ends_promptly_when_the_runtime_closes(
    tmp_path: Path,
    store: str,
    wait: bool,
    use_async: bool,
    tools_kind: tuple[str, str],
    release: threading.Event,
) -> None:
    read, write = tools_kind
    url = _url(tmp_path, store)
    tools = Tools(started_after=2)
    rt = slow_runtime(url, tools)
    run_id = rt.new_run()
    plan = _plan(read, write)

    def work() -> PlanResult:
        if use_async:
            return asyncio.run(rt.arun_plan(plan, run_id=run_id))
        return rt.run_plan(plan, run_id=run_id)

    thread, out = _in_thread(work)
    assert tools.started.wait(WAIT_S)
    time.sleep(0.1)
    if (
        wait and read == "get"
    ):  # close(wait=True) waits for the worker threads: let them go once the plan ended
        _released_once_ended(thread, release)
    closed_at = time.monotonic()
    rt.close(wait=wait)
    thread.join(WAIT_S)
    assert not thread.is_alive()
    result, ended_at = out
    assert isinstance(result, PlanResult), result
    if not (wait and read == "get"):  # close(wait=True) itself waits for the worker threads
        assert time.monotonic() - closed_at < ENDS_WITHIN_S
    assert ended_at - closed_at < ENDS_WITHIN_S, ended_at - closed_at
    _assert_ended_by_close(result, tools, read, write)
    [(node, state, error)] = write_entries(url, rt)
    if wait and write == "put":  # its worker thread was let finish: its late answer settled the entry
        assert (node, state) in (("w", "unknown"), ("w", "committed"))
    else:
        assert (node, state) == ("w", "unknown")
        assert error is not None and "closed" in error
    kinds = _kinds(url, rt, run_id)
    assert kinds.count("plan_finished") == 1, kinds
    time.sleep(0.2)
    assert tools.calls == Counter({read: 1, write: 1})


@pytest.mark.parametrize(
    "tools_kind", [("get", "put"), ("aget", "aput")], ids=["thread_tools", "async_tools"]
)
def test_a_plan_ends_promptly_when_another_task_of_its_loop_closes_theslow_runtime(
    tools_kind: tuple[str, str],
) -> None:
    read, write = tools_kind
    tools = Tools(started_after=2)
    rt = slow_runtime("memory://", tools)
    run_id = rt.new_run()

    async def main() -> tuple[PlanResult, float]:
        plan = asyncio.create_task(rt.arun_plan(_plan(read, write), run_id=run_id))
        await asyncio.to_thread(tools.started.wait, WAIT_S)
        await asyncio.sleep(0.1)
        closed_at = time.monotonic()
        rt.close()
        result = await asyncio.wait_for(plan, WAIT_S)
        return result, time.monotonic() - closed_at

    result, took = asyncio.run(main())
    assert took < ENDS_WITHIN_S, took
    _assert_ended_by_close(result, tools, read, write)
    [(node, state, error)] = write_entries("memory://", rt)
    assert (node, state) == ("w", "unknown") and error is not None and "closed" in error
    assert [e.kind for e in rt.trace.events(run_id)].count("plan_finished") == 1


def test_a_plan_whose_loop_runs_on_another_thread_ends_when_the_runtime_closes() -> None:
    tools = Tools(started_after=2)
    rt = slow_runtime("memory://", tools)
    run_id = rt.new_run()
    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_forever, daemon=True)
    runner.start()
    try:
        future = asyncio.run_coroutine_threadsafe(rt.arun_plan(_plan("aget", "aput"), run_id=run_id), loop)
        assert tools.started.wait(WAIT_S)
        closed_at = time.monotonic()
        rt.close()
        result = future.result(WAIT_S)
        assert time.monotonic() - closed_at < ENDS_WITHIN_S
    finally:
        loop.call_soon_threadsafe(loop.stop)
        runner.join(WAIT_S)
        loop.close()
    _assert_ended_by_close(result, tools, "aget", "aput")


def test_a_plan_that_ended_before_the_close_is_not_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    # What close() would wait for a plan it took for running: far above the bound below.
    monkeypatch.setattr(_closing, "PLAN_END_WAIT_S", CLOSE_WAITS_S)
    monkeypatch.setattr(_closing, "PLAN_CUT_SEEN_S", CLOSE_WAITS_S)
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="read")
    def quick(x: int) -> int:
        """Answer at once."""
        return x

    run_id = rt.new_run()
    result = rt.run_plan({"nodes": [{"id": "a", "tool": "quick", "arguments": {"x": 1}}]}, run_id=run_id)
    assert result.status == "ok"
    started = time.monotonic()
    rt.close()
    assert time.monotonic() - started < ENDS_WITHIN_S


def test_nodes_waiting_for_their_tools_rate_limit_end_unsent_at_once_when_the_runtime_closes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    still_clock(monkeypatch)  # the window never moves on: only the close can end n1 and n2
    tools = Tools(started_after=1)
    rt = slow_runtime("memory://", tools)
    run_id = rt.new_run()
    plan = {"nodes": [{"id": f"n{i}", "tool": "aget", "arguments": {"x": i}} for i in range(3)]}
    limits = {"aget": ToolLimit(per_second=1)}  # one start a window: n1 and n2 wait their turn

    thread, out = _in_thread(lambda: rt.run_plan(plan, run_id=run_id, tool_limits=limits))
    assert tools.started.wait(WAIT_S)
    rt.close()
    thread.join(WAIT_S)
    assert not thread.is_alive(), "the plan still waits for a window that never comes"
    result, _ = out
    assert isinstance(result, PlanResult), result
    _assert_category(result.nodes["n0"], "cancelled")
    for k in ("n1", "n2"):
        obs = result.nodes[k]
        _assert_category(obs, "cancelled")
        assert obs.error is not None and obs.error.details.get("sent") is False
    assert tools.calls == Counter({"aget": 1})
