"""A sync write (``rt.call`` from a thread) has the window a async one has between its intent and
its send: the intent is durable (``dispatched``) and the send has begun as far as the ledger
driver knows, but the tool is not called yet. Here the window is held by a real fault: every
worker thread of the executor is taken by another blocking call, so the write's attempt waits in
the pool's queue. ``close()`` withdraws the queued attempt (the pool shuts down), so the tool is
never called: the write was not sent. Its ledger entry must say so (``failed``, ``cancelled``,
not sent), never ``unknown``, and its call must answer ``cancelled`` (``details["sent"]`` False),
never ``unknown_commit`` ("the write may have committed")."""

from __future__ import annotations

import json
import sqlite3
import sys
import threading
from pathlib import Path
from typing import Any

from actionspace import Observation, Runtime
from tests.close_tools import WAIT_S, in_thread, until


def _entries(path: Path) -> list[tuple[str, dict[str, Any] | None]]:
    """The (state, error) of the file's ledger entries, as another process reads them now."""
    db = sqlite3.connect(path, timeout=WAIT_S)
    try:
        rows = db.execute("select state, error from ledger_entries").fetchall()
    finally:
        db.close()
    return [(state, None if error is None else json.loads(error)) for state, error in rows]


def _waiting_for_workers() -> int:
    """How many threads wait now for a blocking attempt handed to the executor's pool."""
    count = 0
    for frame in list(sys._current_frames().values()):
        names = set()
        walk: Any = frame
        while walk is not None:
            names.add(walk.f_code.co_name)
            walk = walk.f_back
        if {"_attempt", "result"} <= names:
            count += 1
    return count


def test_a_sync_write_waiting_for_a_worker_when_the_runtime_closes_is_not_sent_nor_unknown(
    tmp_path: Path,
) -> None:
    path = tmp_path / "w11.db"
    rt = Runtime(f"sqlite:///{path}", recover_on_start=False, max_threads=1)
    busy, free = threading.Event(), threading.Event()
    sent: list[int] = []

    @rt.tool(effect="read", reads=["hold"])
    def hold() -> bool:
        """Take the executor's only worker thread until the test frees it."""
        busy.set()
        return free.wait(WAIT_S)

    @rt.tool(effect="write", writes=["w:{x}"])
    def put(x: int) -> int:
        """A write; it counts its sends."""
        sent.append(x)
        return x

    holder, held = in_thread(lambda: rt.call({"name": "hold", "arguments": {}}))
    try:
        assert busy.wait(WAIT_S)
        caller, answered = in_thread(lambda: rt.call({"name": "put", "arguments": {"x": 1}}))
        until(lambda: _waiting_for_workers() == 2, "the write's attempt waits in the pool's queue")
        [(state, _)] = _entries(path)
        assert state == "dispatched"  # its intent is durable: the window is open
        closer, closed = in_thread(rt.close)
        caller.join(WAIT_S)  # the pool withdrew its attempt: the call ends while close() waits
        assert not caller.is_alive()
        seen = _entries(path)
    finally:
        free.set()
    closer.join(WAIT_S)
    holder.join(WAIT_S)
    assert not closer.is_alive() and closed == [None], closed
    assert not holder.is_alive() and len(held) == 1, held
    assert sent == []  # the tool was never called
    [(state, error)] = seen
    assert state == "failed", seen  # never "unknown": it was not sent
    assert error is not None and error["category"] == "cancelled", error
    assert error["details"]["sent"] is False, error
    assert _entries(path) == seen  # and so it stays
    [obs] = answered
    assert isinstance(obs, Observation), obs
    assert obs.error is not None and obs.error.category == "cancelled", obs
    assert obs.error.details.get("sent") is False, obs
