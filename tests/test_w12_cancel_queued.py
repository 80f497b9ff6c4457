"""An async caller's write (``await rt.acall``) of a blocking tool whose caller cancels its own task
while the attempt waits in the worker pool's queue (every worker busy), the runtime left open. Its
intent is durable (``dispatched``) but no worker thread took the attempt, so nothing was sent: the
send is withdrawn, the tool is never called, and the entry goes straight to ``failed``
(``cancelled``, ``details["sent"]`` False), never through ``unknown`` (which says "it may have been
sent", DESIGN §6). The cancel itself still reaches the caller, as asyncio requires. Once a worker
began the tool, a cancel leaves the entry ``unknown`` as before: the tool may have acted.

The window is held by a real fault: the executor's only worker thread is taken by another blocking
call, so the write's attempt stays queued until the test frees it."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

import pytest

from actionspace import Observation, Runtime
from actionspace.ledger.entries import LedgerEntry
from tests.close_tools import WAIT_S, in_thread, until


def _entries(path: Path) -> list[tuple[str, dict[str, Any] | None]]:
    """The (state, error) of the file's ledger entries, as another connection reads them now."""
    db = sqlite3.connect(path, timeout=WAIT_S)
    try:
        rows = db.execute("select state, error from ledger_entries").fetchall()
    finally:
        db.close()
    return [(state, None if error is None else json.loads(error)) for state, error in rows]


def _queued(rt: Runtime) -> int:
    """Attempts waiting in the executor's pool for a worker thread."""
    return rt.engine.executor._pool._work_queue.qsize()


def _workers(rt: Runtime) -> int:
    """How many worker threads the executor's pool may run at once."""
    return rt.engine.executor._pool._max_workers


class _Loop:
    """An event loop on its own thread running one task the test may cancel from outside."""

    def __init__(self, work: Callable[[], Coroutine[Any, Any, Any]]) -> None:
        self.ready = threading.Event()
        self.task: asyncio.Task[Any] | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread, self.out = in_thread(lambda: asyncio.run(self._main(work)))
        assert self.ready.wait(WAIT_S)

    async def _main(self, work: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
        self.loop = asyncio.get_running_loop()
        self.task = asyncio.create_task(work())
        self.ready.set()
        return await self.task

    def cancel(self) -> None:
        assert self.loop is not None and self.task is not None
        self.loop.call_soon_threadsafe(self.task.cancel)


class _Case:
    """A runtime on ``path`` whose only worker thread ``hold`` takes until :attr:`free` is set, and a
    blocking write ``put`` that counts its sends and says when it began."""

    def __init__(self, path: Path) -> None:
        self.rt = rt = Runtime(f"sqlite:///{path}", recover_on_start=False, max_threads=1)
        self.busy, self.free, self.began, self.release = (threading.Event() for _ in range(4))
        self.sent: list[int] = []
        self.states: list[str] = []  # every state the ledger moved an entry to

        @rt.tool(effect="read", reads=["hold"])
        def hold() -> bool:
            """Take a worker thread until the test frees it."""
            self.busy.set()
            return self.free.wait(WAIT_S)

        @rt.tool(effect="write", writes=["w:{x}"])
        def put(x: int) -> int:
            """A write on a worker thread; it counts its sends and waits to be released."""
            self.sent.append(x)
            self.began.set()
            self.release.wait(WAIT_S)
            return x

        transition = rt.ledger.transition

        def noted(key: str, expected: Sequence[str], entry: LedgerEntry) -> LedgerEntry | None:
            self.states.append(entry.state)
            return transition(key, expected, entry)

        rt.ledger.transition = noted  # type: ignore[method-assign]

    def trace_data(self, kind: str) -> list[dict[str, Any]]:
        """The data of every stored trace event of ``kind``, over all runs."""
        runs = self.rt.trace.runs(limit=10)
        return [dict(e.data) for run in runs for e in self.rt.trace.events(run.run_id) if e.kind == kind]


def _writer(case: _Case, how: str) -> Callable[[], Coroutine[Any, Any, Observation]]:
    rt = case.rt
    call = {"name": "put", "arguments": {"x": 1}}

    async def write() -> Observation:
        if how == "acall":
            return await rt.acall(call)
        if how == "arun_plan":
            result = await rt.arun_plan({"nodes": [{"id": "n1", "tool": "put", "arguments": {"x": 1}}]})
            return result.nodes["n1"]
        [obs] = await rt.acall_all([{**call, "id": "c1"}])
        return obs

    return write


def _cancelled_while_queued(tmp_path: Path, how: str) -> list[str]:
    """Cancel ``how``'s write while its attempt waits for the pool's one worker; check the ledger
    and the caller, and hand back the error categories of the stored observations of ``put``."""
    path = tmp_path / "cancel.db"
    case = _Case(path)
    rt = case.rt
    assert _workers(rt) == 1
    holder, held = in_thread(lambda: rt.call({"name": "hold", "arguments": {}}))
    try:
        assert case.busy.wait(WAIT_S)
        caller = _Loop(_writer(case, how))
        until(lambda: _queued(rt) == 1, "the write's attempt waits in the pool's queue")
        [(state, _)] = _entries(path)
        assert state == "dispatched"  # its intent is durable: the window is open
        caller.cancel()
        caller.thread.join(WAIT_S)  # withdrawn: the call ends while the hold still runs
        assert not caller.thread.is_alive()
        seen = _entries(path)
    finally:
        case.free.set()
    holder.join(WAIT_S)
    assert not holder.is_alive() and len(held) == 1, held
    # the pool's one worker takes its queue in order: once this ends, a queued put would have run
    again = rt.call({"name": "hold", "arguments": {}})
    assert again.error is None, again
    try:
        [out] = caller.out
        assert isinstance(out, asyncio.CancelledError), out  # the caller's own cancel reaches it
        assert caller.task is not None and caller.task.cancelled()
        assert case.sent == []  # the tool was never called
        assert "unknown" not in case.states, case.states  # not even for a moment
        [(state, error)] = seen
        assert state == "failed", seen
        assert error is not None and error["category"] == "cancelled", error
        assert error["details"]["sent"] is False, error
        assert _entries(path) == seen  # and so it stays
        assert all(d.get("to") != "unknown" for d in case.trace_data("ledger"))
        return [str(d.get("category")) for d in case.trace_data("observation") if d.get("tool") == "put"]
    finally:
        rt.close()


@pytest.mark.parametrize("how", ["acall", "acall_all", "arun_plan"])
def test_a_queued_async_write_whose_caller_cancels_it_is_withdrawn_never_unknown(
    tmp_path: Path, how: str
) -> None:
    categories = _cancelled_while_queued(tmp_path, how)
    if how != "arun_plan":  # a plan's own node observation: see the test below
        assert set(categories) <= {"cancelled"}, categories


def test_a_plan_traces_a_withdrawn_write_node_as_cancelled(tmp_path: Path) -> None:
    categories = _cancelled_while_queued(tmp_path, "arun_plan")
    assert set(categories) <= {"cancelled"}, categories


def test_a_write_a_worker_began_is_unknown_when_its_caller_cancels(tmp_path: Path) -> None:
    """The send began (a worker thread called the tool): the cancel cannot withdraw it, and the
    entry is honestly ``unknown`` (abandoned) while the tool runs on."""
    path = tmp_path / "began.db"
    case = _Case(path)
    rt = case.rt
    try:
        caller = _Loop(_writer(case, "acall"))
        assert case.began.wait(WAIT_S)
        caller.cancel()
        caller.thread.join(WAIT_S)
        assert not caller.thread.is_alive()
        [out] = caller.out
        assert isinstance(out, asyncio.CancelledError), out
        [(state, error)] = _entries(path)
        assert state == "unknown", (state, error)
        assert error is not None and error["category"] == "unknown_commit", error
        assert case.sent == [1]
    finally:
        case.release.set()
        case.free.set()
    until(lambda: _entries(path)[0][0] != "unknown", "the late answer settles the entry")
    [(state, _)] = _entries(path)
    assert state == "committed"
    rt.close()


@pytest.mark.parametrize("how", ["acall", "acall_all"])
def test_a_withdrawn_write_proposed_again_is_sent(tmp_path: Path, how: str) -> None:
    """Withdrawn means not sent: the same call proposed again in the same turn (a framework's tools
    node run again on resume, a model re-proposing it) is sent, once, never answered from the
    withdrawn attempt."""
    path = tmp_path / "again.db"
    case = _Case(path)
    rt = case.rt
    holder, held = in_thread(lambda: rt.call({"name": "hold", "arguments": {}}))
    try:
        assert case.busy.wait(WAIT_S)
        caller = _Loop(_writer(case, how))
        until(lambda: _queued(rt) == 1, "the write's attempt waits in the pool's queue")
        caller.cancel()
        caller.thread.join(WAIT_S)
        assert not caller.thread.is_alive()
    finally:
        case.free.set()
    holder.join(WAIT_S)
    assert not holder.is_alive() and len(held) == 1, held
    try:
        assert case.sent == []
        case.release.set()
        again = asyncio.run(_writer(case, how)())
        assert again.error is None and again.data == 1, again
        assert case.sent == [1]
        assert [state for state, _ in _entries(path)] == ["committed"]
        replay = asyncio.run(_writer(case, how)())
        assert replay.data == 1 and case.sent == [1]  # committed now: replayed, not sent again
    finally:
        rt.close()
