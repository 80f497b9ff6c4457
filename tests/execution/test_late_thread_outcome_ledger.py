"""A blocking side-effecting tool whose caller stopped waiting (its timeout, or its task cancelled)
still runs on its worker thread; when that thread ends, its outcome reaches the ledger, so the same
action proposed again replays it instead of answering ``unknown_commit`` for ever. The caller that
stopped waiting keeps the honest answer it got at the time. Driven by events, not by sleeps."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actionspace import Plan, Runtime
from actionspace.errors import ToolError
from actionspace.ledger.commit import still_running
from actionspace.ledger.entries import LedgerEntry
from actionspace.ledger.recover import resolve_by_hand
from actionspace.ledger.status import NotCommitted

RUN, NODE = "late-run", "n1"
RAW = {"name": "book", "arguments": {"seat": "12A"}}


def _wait_until(predicate: Callable[[], bool], limit_s: float = 3.0) -> None:
    deadline = time.monotonic() + limit_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("the condition never came")
        time.sleep(0.002)


class Booking:
    """A booking service whose send blocks until the test releases it, then commits or refuses."""

    def __init__(self, *, refuse: bool = False) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.refuse = refuse
        self.sends = 0
        self.booked: list[str] = []

    def book(self, seat: str) -> dict[str, str]:
        self.sends += 1
        self.started.set()
        self.release.wait(30)
        if self.refuse:
            raise ToolError("permanent", f"seat {seat} does not exist")
        self.booked.append(seat)
        return {"seat": seat, "booking": "B-1"}


@pytest.fixture(params=["memory", "sqlite"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'ledger.db'}"


@pytest.fixture
def booking() -> Iterator[Booking]:
    service = Booking()
    yield service
    service.release.set()


def _runtime(url: str, service: Booking) -> Runtime:
    rt = Runtime(url, recover_on_start=False)
    rt.add_tool(
        name="book",
        input_schema={
            "type": "object",
            "properties": {"seat": {"type": "string"}},
            "required": ["seat"],
            "additionalProperties": False,
        },
        fn=service.book,
        effect="write",
        timeout_s=0.1,
    )
    return rt


def _entry(rt: Runtime) -> LedgerEntry:
    entry = rt.ledger.get_node(RUN, NODE)
    assert entry is not None
    return entry


def _settles(rt: Runtime, state: str) -> None:
    _wait_until(lambda: _entry(rt).state == state and not still_running(_entry(rt).key))


def test_a_timed_out_write_that_commits_later_is_replayed_not_unknown(
    store_url: str, booking: Booking
) -> None:
    rt = _runtime(store_url, booking)
    with rt:
        first = rt.call(RAW, run_id=RUN, node_id=NODE)
        assert first.error is not None and first.error.category == "unknown_commit"
        booking.release.set()
        _settles(rt, "committed")
        again = rt.call(RAW, run_id=RUN, node_id=NODE)
        assert again.status == "ok", again.error
        assert again.data == {"seat": "12A", "booking": "B-1"}
        assert again.diagnostics.get("replayed") is True
    assert booking.sends == 1
    assert booking.booked == ["12A"]


def test_a_timed_out_write_that_fails_later_is_recorded_failed(store_url: str) -> None:
    service = Booking(refuse=True)
    rt = _runtime(store_url, service)
    try:
        with rt:
            first = rt.call(RAW, run_id=RUN, node_id=NODE)
            assert first.error is not None and first.error.category == "unknown_commit"
            service.release.set()
            _settles(rt, "failed")
            assert (_entry(rt).error or {}).get("category") == "permanent"
            again = rt.call(RAW, run_id=RUN, node_id=NODE)
            assert again.error is not None and again.error.category == "permanent"
    finally:
        service.release.set()
    assert service.sends == 1


def test_a_cancelled_callers_write_that_commits_later_is_replayed(store_url: str, booking: Booking) -> None:
    rt = _runtime(store_url, booking)

    async def cancelled_call() -> None:
        task = asyncio.create_task(rt.acall(RAW, run_id=RUN, node_id=NODE))
        while not booking.started.is_set():
            await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with rt:
        asyncio.run(cancelled_call())
        assert _entry(rt).state in ("dispatched", "unknown")
        booking.release.set()
        _settles(rt, "committed")
        again = rt.call(RAW, run_id=RUN, node_id=NODE)
        assert again.status == "ok", again.error
        assert again.data == {"seat": "12A", "booking": "B-1"}
    assert booking.sends == 1


def test_a_cancelled_caller_is_unknown_commit_while_its_thread_still_runs(booking: Booking) -> None:
    rt = _runtime("memory://", booking)

    async def cancelled_call() -> None:
        task = asyncio.create_task(rt.acall(RAW, run_id=RUN, node_id=NODE))
        while not booking.started.is_set():
            await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with rt:
        asyncio.run(cancelled_call())
        assert still_running(_entry(rt).key)
        meanwhile = rt.call(RAW, run_id=RUN, node_id=NODE)
        assert meanwhile.error is not None and meanwhile.error.category == "unknown_commit"
        booking.release.set()
        _settles(rt, "committed")
    assert booking.sends == 1


def test_a_late_failure_never_overwrites_a_persons_reconciliation(store_url: str) -> None:
    service = Booking(refuse=True)
    rt = _runtime(store_url, service)
    try:
        with rt:
            first = rt.call(RAW, run_id=RUN, node_id=NODE)
            assert first.error is not None and first.error.category == "unknown_commit"
            key = _entry(rt).key
            resolve_by_hand(rt.ledger, key, outcome="committed", by="ops", reason="seen", record=rt.record)
            service.release.set()
            _wait_until(lambda: not still_running(key))
            assert _entry(rt).state == "committed"
            assert (_entry(rt).resolution or {}).get("by") == "ops"
    finally:
        service.release.set()


def _cancel_while_it_runs(rt: Runtime, service: Booking, start: Callable[[], Any]) -> None:
    async def cancelled() -> None:
        task = asyncio.ensure_future(start())
        while not service.started.is_set():
            await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancelled())


def test_a_cancelled_plans_write_that_commits_later_is_replayed_by_the_plan_run_again(
    store_url: str, booking: Booking
) -> None:
    rt = _runtime(store_url, booking)
    plan = Plan.from_dict({"nodes": [{"id": NODE, "tool": "book", "arguments": {"seat": "12A"}}]})
    with rt:
        _cancel_while_it_runs(rt, booking, lambda: rt.arun_plan(plan, run_id=RUN))
        booking.release.set()
        _settles(rt, "committed")
        again = rt.run_plan(plan, run_id=RUN)
        node = again.nodes[NODE]
        assert node.status == "ok", node.error
        assert node.data == {"seat": "12A", "booking": "B-1"}
    assert booking.sends == 1


def test_recovery_while_the_thread_runs_never_makes_it_sendable_again() -> None:
    service = Booking()
    rt = Runtime("memory://", recover_on_start=False)
    rt.add_tool(
        name="book",
        input_schema={"type": "object", "properties": {"seat": {"type": "string"}}, "required": ["seat"]},
        fn=service.book,
        effect="write",
        timeout_s=0.1,
        idempotency="query",
        status_query=lambda *, key, arguments: NotCommitted(),  # truthful until the thread commits
    )
    try:
        with rt:
            _cancel_while_it_runs(rt, service, lambda: rt.acall(RAW, run_id=RUN, node_id=NODE))
            report = rt.recover()
            assert _entry(rt).key not in report.redispatchable
            meanwhile = rt.call(RAW, run_id=RUN, node_id=NODE)
            assert meanwhile.error is not None and meanwhile.error.category == "unknown_commit"
            service.release.set()
            _settles(rt, "committed")
            again = rt.call(RAW, run_id=RUN, node_id=NODE)
            assert again.status == "ok", again.error
    finally:
        service.release.set()
    assert service.sends == 1
    assert service.booked == ["12A"]
