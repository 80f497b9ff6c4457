"""A sync generator tool that goes silent past its timeout mid-stream still runs on a worker thread:
that thread is one of the executor's, counted in its abandoned attempts until it ends, and a
side-effecting stream's outcome reaches the ledger when it ends (so the same action proposed again
is replayed, not ``unknown_commit`` for ever). Driven by events, not by sleeps."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from actionspace import Effect, Runtime, ToolCall, ToolResult
from actionspace.ledger.commit import still_running
from actionspace.ledger.entries import LedgerEntry

RUN, NODE = "gen-run", "n1"


def _wait_until(predicate: Callable[[], bool], limit_s: float = 10.0) -> None:
    deadline = time.monotonic() + limit_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("the condition never came")
        time.sleep(0.002)


class Export:
    """A write that streams its progress: one row, then it blocks until released, then the rest."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.threads: list[str] = []
        self.rows: list[str] = []
        self.finished = threading.Event()

    def run(self, table: str) -> Iterator[Any]:
        self.threads.append(threading.current_thread().name)
        self.rows.append("row 1")
        yield "row 1\n"
        self.release.wait(30)
        self.threads.append(threading.current_thread().name)
        self.rows.append("row 2")
        yield "row 2\n"
        self.rows.append("row 3")
        yield "row 3\n"
        yield ToolResult(effects=(Effect(resource_id=f"export:{table}", kind="created"),))
        self.finished.set()


def _runtime(export: Export, effect: str = "write") -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)

    def export_rows(table: str) -> Iterator[Any]:
        """Export a table, streaming each row."""
        yield from export.run(table)

    rt.tool(effect=effect, timeout_s=0.1)(export_rows)
    return rt


def _entry(rt: Runtime) -> LedgerEntry:
    entry = rt.ledger.get_node(RUN, NODE)
    assert entry is not None
    return entry


CALL = ToolCall(name="export_rows", arguments={"table": "users"})


def test_a_write_generator_silent_past_its_timeout_runs_on_the_executors_counted_threads() -> None:
    export = Export()
    rt = _runtime(export)
    try:
        with rt:
            first = rt.call(CALL, run_id=RUN, node_id=NODE)
            assert first.error is not None and first.error.category == "unknown_commit"
            assert rt.engine.executor.abandoned == 1
            assert still_running(_entry(rt).key)
            meanwhile = rt.call(CALL, run_id=RUN, node_id=NODE)  # never sent again while it runs
            assert meanwhile.error is not None and meanwhile.error.category == "unknown_commit"
            export.release.set()
            _wait_until(lambda: rt.engine.executor.abandoned == 0)
    finally:
        export.release.set()
    assert all(name.startswith("actionspace-tool") for name in export.threads), export.threads
    assert len(export.threads) == 2


def test_a_write_generator_that_finishes_after_its_timeout_is_recorded_committed_and_replayed() -> None:
    export = Export()
    rt = _runtime(export)
    try:
        with rt:
            first = rt.call(CALL, run_id=RUN, node_id=NODE)
            assert first.error is not None and first.error.category == "unknown_commit"
            export.release.set()
            _wait_until(lambda: _entry(rt).state == "committed" and not still_running(_entry(rt).key))
            again = rt.call(CALL, run_id=RUN, node_id=NODE)
            assert again.status == "ok", again.error
            assert again.diagnostics.get("replayed") is True
            assert [e.resource_id for e in again.effects] == ["export:users"]
            assert again.data == "row 1\nrow 2\nrow 3\n"
    finally:
        export.release.set()
    assert export.rows == ["row 1", "row 2", "row 3"]  # run once, to its end


def test_a_write_generator_failing_after_its_timeout_is_recorded_failed() -> None:
    release = threading.Event()

    def broken(table: str) -> Iterator[str]:
        """Streams a row, then the service refuses."""
        yield "row 1\n"
        release.wait(30)
        raise PermissionError(f"no write access to {table}")

    rt = Runtime("memory://", recover_on_start=False)
    rt.tool(effect="write", timeout_s=0.1)(broken)
    call = ToolCall(name="broken", arguments={"table": "users"})
    try:
        with rt:
            first = rt.call(call, run_id=RUN, node_id=NODE)
            assert first.error is not None and first.error.category == "unknown_commit"
            release.set()
            _wait_until(lambda: _entry(rt).state == "failed" and not still_running(_entry(rt).key))
            assert (_entry(rt).error or {}).get("category") == "permission_denied"
    finally:
        release.set()


def test_a_read_generator_past_its_timeout_is_counted_then_stopped_not_drained() -> None:
    export = Export()
    rt = _runtime(export, effect="read")
    try:
        with rt:
            first = rt.call(CALL, run_id=RUN)
            assert first.error is not None and first.error.category == "transient"
            assert rt.engine.executor.abandoned == 1
            export.release.set()
            _wait_until(lambda: rt.engine.executor.abandoned == 0)
    finally:
        export.release.set()
    assert export.rows == ["row 1", "row 2"]  # the chunk it was producing, nothing after
    assert not export.finished.is_set()


def test_a_cancelled_callers_write_generator_is_recorded_when_it_ends() -> None:
    waiting, release = threading.Event(), threading.Event()
    rows: list[str] = []

    def slow_export(table: str) -> Iterator[str]:
        """Export a table slowly."""
        rows.append("row 1")
        yield "row 1\n"
        waiting.set()
        release.wait(30)
        rows.append("row 2")
        yield "row 2\n"

    rt = Runtime("memory://", recover_on_start=False)
    rt.tool(effect="write", timeout_s=5.0)(slow_export)

    async def cancelled() -> None:
        task = asyncio.ensure_future(
            rt.acall(ToolCall(name="slow_export", arguments={"table": "t"}), run_id=RUN)
        )
        while not waiting.is_set():
            await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    try:
        with rt:
            asyncio.run(cancelled())
            assert rt.engine.executor.abandoned == 1
            release.set()
            _wait_until(lambda: [e.state for e in rt.ledger.list()] == ["committed"])
            _wait_until(lambda: rt.engine.executor.abandoned == 0)
            entry = rt.ledger.list()[0]
            assert (entry.observation or {}).get("data") == "row 1\nrow 2\n"
    finally:
        release.set()
    assert rows == ["row 1", "row 2"]
