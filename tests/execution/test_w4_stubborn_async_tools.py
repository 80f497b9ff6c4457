"""An async tool that catches the cancel its timeout throws in and keeps waiting holds its caller
no longer than its timeout and a short grace (``CANCEL_GRACE_S``): the caller gets its timeout
answer (``transient`` for a read, ``unknown_commit`` for a write), and the tool goes on, on a task
of its own. A write's eventual outcome reaches the ledger, so the same action proposed again
replays it. Every tool here stops on its own after a few seconds, so the old behaviour fails the
timing assertions instead of hanging the suite."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.catalog.spec import NO_RETRY
from actionspace.errors import ToolError
from actionspace.execution.deadlines import CANCEL_GRACE_S
from actionspace.ledger.commit import still_running
from actionspace.ledger.entries import LedgerEntry

TIMEOUT_S = 0.1
BOUND_S = TIMEOUT_S + CANCEL_GRACE_S + 0.6
"""What a caller may wait at most: the timeout, the grace, and slack for a loaded machine."""
RUN, NODE = "w4-run", "n1"


class Stubborn:
    """Tools that swallow every cancel and wait on until ``release`` is set (or ``SAFETY_S``
    passes, so an unbounded caller ends the test rather than hanging it)."""

    SAFETY_S = 4.0

    def __init__(self) -> None:
        self.release = threading.Event()
        self.cancels = 0
        self.sends = 0
        self.ended = threading.Event()
        self._timer = threading.Timer(self.SAFETY_S, self.release.set)
        self._timer.daemon = True
        self._timer.start()

    async def wait_out(self) -> None:
        try:
            while not self.release.is_set():
                try:
                    await asyncio.sleep(0.01)
                except asyncio.CancelledError:
                    self.cancels += 1
        finally:
            self.ended.set()

    def stop(self) -> None:
        self.release.set()
        self._timer.cancel()


@pytest.fixture
def stubborn() -> Iterator[Stubborn]:
    tools = Stubborn()
    yield tools
    tools.stop()


def _runtime(tools: Stubborn, *, refuse: bool = False) -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="read", timeout_s=TIMEOUT_S, retry=NO_RETRY)  # one attempt: its bound is measured
    async def lookup(q: str) -> str:
        await tools.wait_out()
        return f"found {q}"

    @rt.tool(effect="write", timeout_s=TIMEOUT_S)
    async def book(seat: str) -> dict[str, str]:
        tools.sends += 1
        await tools.wait_out()
        if refuse:
            raise ToolError("permanent", f"seat {seat} does not exist")
        return {"seat": seat, "booking": "B-1"}

    return rt


def _wait_until(predicate: Callable[[], bool], limit_s: float = 5.0) -> None:
    deadline = time.monotonic() + limit_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("the condition never came")
        time.sleep(0.005)


async def _await_until(predicate: Callable[[], bool], limit_s: float = 5.0) -> None:
    deadline = time.monotonic() + limit_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("the condition never came")
        await asyncio.sleep(0.005)


def _entry(rt: Runtime) -> LedgerEntry:
    entry = rt.ledger.get_node(RUN, NODE)
    assert entry is not None
    return entry


def test_an_async_read_that_swallows_its_cancel_frees_its_async_caller(stubborn: Stubborn) -> None:
    rt = _runtime(stubborn)

    async def scenario() -> tuple[Any, float, int]:
        started = time.monotonic()
        obs = await rt.acall({"name": "lookup", "arguments": {"q": "x"}})
        elapsed = time.monotonic() - started
        task = asyncio.current_task()
        assert task is not None
        cancelling = task.cancelling()
        stubborn.stop()
        await _await_until(stubborn.ended.is_set)
        return obs, elapsed, cancelling

    with rt:
        obs, elapsed, cancelling = asyncio.run(scenario())
    assert elapsed < BOUND_S
    assert obs.error is not None and obs.error.category == "transient"
    assert cancelling == 0
    assert stubborn.cancels >= 1


def test_an_async_read_that_swallows_its_cancel_frees_its_sync_caller(stubborn: Stubborn) -> None:
    rt = _runtime(stubborn)
    with rt:
        started = time.monotonic()
        obs = rt.call({"name": "lookup", "arguments": {"q": "x"}})
        elapsed = time.monotonic() - started
        stubborn.stop()
        _wait_until(stubborn.ended.is_set)
    assert elapsed < BOUND_S
    assert obs.error is not None and obs.error.category == "transient"


def test_a_caller_freed_from_a_stubborn_tool_still_times_out_later(stubborn: Stubborn) -> None:
    rt = _runtime(stubborn)

    async def scenario() -> str:
        await rt.acall({"name": "lookup", "arguments": {"q": "x"}})
        try:
            async with asyncio.timeout(0.05):
                await asyncio.sleep(5)
        except TimeoutError:
            return "timed out"
        finally:
            stubborn.stop()
        return "slept"

    with rt:
        assert asyncio.run(scenario()) == "timed out"


def test_a_stubborn_async_write_is_unknown_commit_then_its_late_commit_is_replayed(
    stubborn: Stubborn,
) -> None:
    rt = _runtime(stubborn)
    raw = {"name": "book", "arguments": {"seat": "12A"}}

    async def scenario() -> tuple[Any, float, Any]:
        started = time.monotonic()
        first = await rt.acall(raw, run_id=RUN, node_id=NODE)
        elapsed = time.monotonic() - started
        assert _entry(rt).state != "committed"
        meanwhile = await rt.acall(raw, run_id=RUN, node_id=NODE)
        assert meanwhile.error is not None and meanwhile.error.category == "unknown_commit"
        stubborn.stop()
        await _await_until(lambda: _entry(rt).state == "committed" and not still_running(_entry(rt).key))
        again = await rt.acall(raw, run_id=RUN, node_id=NODE)
        return first, elapsed, again

    with rt:
        first, elapsed, again = asyncio.run(scenario())
    assert elapsed < BOUND_S + TIMEOUT_S  # plus the protocol's wait for a late answer (one timeout)
    assert first.error is not None and first.error.category == "unknown_commit"
    assert again.status == "ok", again.error
    assert again.data == {"seat": "12A", "booking": "B-1"}
    assert again.diagnostics.get("replayed") is True
    assert stubborn.sends == 1


def test_a_stubborn_async_write_called_from_sync_code_settles_its_late_failure(
    stubborn: Stubborn,
) -> None:
    rt = _runtime(stubborn, refuse=True)
    raw = {"name": "book", "arguments": {"seat": "12A"}}
    with rt:
        started = time.monotonic()
        first = rt.call(raw, run_id=RUN, node_id=NODE)
        elapsed = time.monotonic() - started
        stubborn.stop()
        _wait_until(lambda: _entry(rt).state == "failed" and not still_running(_entry(rt).key))
        again = rt.call(raw, run_id=RUN, node_id=NODE)
    assert elapsed < BOUND_S + TIMEOUT_S
    assert first.error is not None and first.error.category == "unknown_commit"
    assert again.error is not None and again.error.category == "permanent"
    assert stubborn.sends == 1


def test_a_tool_that_ends_within_the_grace_still_answers_its_caller() -> None:
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="none", timeout_s=TIMEOUT_S, retry=NO_RETRY)
    async def tidy(x: int) -> str:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            await asyncio.sleep(CANCEL_GRACE_S / 10)  # a short cleanup that awaits
            raise
        return "slept"

    with rt:
        started = time.monotonic()
        obs = asyncio.run(rt.acall({"name": "tidy", "arguments": {"x": 1}}))
        elapsed = time.monotonic() - started
    assert obs.error is not None and obs.error.category == "transient"
    assert elapsed < BOUND_S


def test_a_tool_that_spins_on_bare_yields_is_bounded_too(stubborn: Stubborn) -> None:
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="none", timeout_s=TIMEOUT_S, retry=NO_RETRY)
    async def spin(x: int) -> str:
        while not stubborn.release.is_set():
            try:
                await asyncio.sleep(0)
            except asyncio.CancelledError:
                stubborn.cancels += 1
        return "done"

    async def scenario() -> tuple[Any, float]:
        started = time.monotonic()
        obs = await rt.acall({"name": "spin", "arguments": {"x": 1}})
        elapsed = time.monotonic() - started
        stubborn.stop()
        await asyncio.sleep(0)
        return obs, elapsed

    with rt:
        obs, elapsed = asyncio.run(scenario())
    assert elapsed < BOUND_S
    assert obs.error is not None and obs.error.category == "transient"


def test_a_caller_cancelled_during_the_grace_ends_at_once_and_the_write_settles_later(
    stubborn: Stubborn,
) -> None:
    rt = _runtime(stubborn)
    raw = {"name": "book", "arguments": {"seat": "12A"}}

    async def scenario() -> float:
        task = asyncio.create_task(rt.acall(raw, run_id=RUN, node_id=NODE))
        await _await_until(lambda: stubborn.cancels >= 1)  # its timeout fired: the tool is in its grace
        task.cancel()
        started = time.monotonic()
        with pytest.raises(asyncio.CancelledError):
            await task
        elapsed = time.monotonic() - started
        assert still_running(_entry(rt).key)
        stubborn.stop()
        await _await_until(lambda: _entry(rt).state == "committed" and not still_running(_entry(rt).key))
        return elapsed

    with rt:
        elapsed = asyncio.run(scenario())
        again = rt.call(raw, run_id=RUN, node_id=NODE)
    assert elapsed < CANCEL_GRACE_S
    assert again.status == "ok", again.error
    assert again.data == {"seat": "12A", "booking": "B-1"}
    assert stubborn.sends == 1
