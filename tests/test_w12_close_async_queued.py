"""An async caller's write (``await rt.acall``) whose blocking tool waits in the worker pool's queue
when the runtime closes: its intent is durable (``dispatched``) and its caller has handed the
attempt over, but no worker thread took it, so nothing was sent. The window is held by a real
fault: the executor's only worker thread is taken by another blocking call. ``close()`` withdraws
the queued attempt, so the tool is never called; its ledger entry must go straight to ``failed``
(``cancelled``, not sent), never through ``unknown`` (which says "it may have been sent", DESIGN
§6), and its call must answer ``cancelled`` with ``details["sent"]`` False, never
``unknown_commit``. The sync caller's path does the same (tests/test_w11_close_sync_unsent.py)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from collections.abc import Sequence
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


@pytest.mark.parametrize("how", ["acall", "acall_all", "arun_plan"])
def test_an_async_write_waiting_for_a_worker_when_the_runtime_closes_is_never_unknown(
    tmp_path: Path, how: str
) -> None:
    path = tmp_path / "w12.db"
    rt = Runtime(f"sqlite:///{path}", recover_on_start=False, max_threads=1)
    busy, free = threading.Event(), threading.Event()
    sent: list[int] = []
    states: list[str] = []  # every state the ledger moved the write's entry to

    @rt.tool(effect="read", reads=["hold"])
    def hold() -> bool:
        """Take the executor's only worker thread until the test frees it."""
        busy.set()
        return free.wait(WAIT_S)

    @rt.tool(effect="write", writes=["w:{x}"])
    def put(x: int) -> int:
        """A write on a worker thread; it counts its sends."""
        sent.append(x)
        return x

    transition = rt.ledger.transition

    def noted(key: str, expected: Sequence[str], entry: LedgerEntry) -> LedgerEntry | None:
        states.append(entry.state)
        return transition(key, expected, entry)

    rt.ledger.transition = noted  # type: ignore[method-assign]
    call = {"name": "put", "arguments": {"x": 1}}

    async def write() -> Observation:
        if how == "acall":
            return await rt.acall(call)
        if how == "arun_plan":
            result = await rt.arun_plan({"nodes": [{"id": "n1", "tool": "put", "arguments": {"x": 1}}]})
            return result.nodes["n1"]
        [obs] = await rt.acall_all([{**call, "id": "c1"}])
        return obs

    holder, held = in_thread(lambda: rt.call({"name": "hold", "arguments": {}}))
    try:
        assert busy.wait(WAIT_S)
        caller, answered = in_thread(lambda: asyncio.run(write()))
        until(lambda: _queued(rt) == 1, "the write's attempt waits in the pool's queue")
        [(state, _)] = _entries(path)
        assert state == "dispatched"  # its intent is durable: the window is open
        closer, closed = in_thread(rt.close)
        caller.join(WAIT_S)  # the close withdrew its attempt: the call ends while the hold runs on
        assert not caller.is_alive()
        seen = _entries(path)
    finally:
        free.set()
    closer.join(WAIT_S)
    holder.join(WAIT_S)
    assert not closer.is_alive() and closed == [None], closed
    assert not holder.is_alive() and len(held) == 1, held
    assert sent == []  # the tool was never called
    assert "unknown" not in states, states  # not even for a moment
    [(state, error)] = seen
    assert state == "failed", seen
    assert error is not None and error["category"] == "cancelled", error
    assert error["details"]["sent"] is False, error
    assert _entries(path) == seen  # and so it stays
    [obs] = answered
    assert isinstance(obs, Observation), obs
    assert obs.error is not None and obs.error.category == "cancelled", obs
    assert obs.error.details.get("sent") is False, obs
