"""A durable commit's leader interrupted while it lends the writer to the flusher, and a lone caller
interrupted as its transaction begins.

When the flusher's linger is over, the next durable commit lends it the writer for the length of
its ``fdatasync`` (``_flusher.Lend.sync``): it claims the lend, releases the flusher, syncs, then
waits for a flusher that began its transaction. A signal handler's exception landing between the
claim and the release left the flusher waiting for ever for a release that never came: the deferred
rows were no longer committed behind anyone's back, and ``close()`` could not end the thread. One
landing as the leader read whether the flusher had begun made it let the writer go while the
flusher's transaction was open on the connection: the next caller's ``BEGIN`` failed on it.

A lone caller's ``BEGIN`` that returned just as the interruption came left its transaction open,
holding the file's write lock: every later write of the process failed on its own ``BEGIN``.

The fault is injected at the exact step: the lock the lend is claimed and taken back under raises as
it is let go, in the leader's thread; the writer's ``BEGIN`` runs, then raises.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from actionspace.ledger import sqlite_writer
from actionspace.ledger.sqlite_writer import BEGIN, GroupCommit, SqliteConnections
from tests.ledger.waits import until

DEADLINE_S = 10.0
LINGER_S = 0.2


class Interrupted(BaseException):
    """What a signal handler raises in the leader's thread."""


def _writer(tmp_path: Path) -> GroupCommit:
    """The file's shared writer (its last ``close()`` stops the flusher's thread)."""
    db = SqliteConnections(tmp_path / "w.db", synchronous="FULL", busy_timeout_s=10.0)
    db.init_schema("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)", "meta", "v", 1)
    with db.write() as conn:
        conn.execute("CREATE TABLE t (k TEXT PRIMARY KEY)")
    db.close()
    group = GroupCommit.open(tmp_path / "w.db", busy_timeout_s=10.0)
    group.run(lambda conn: None)  # the writing connection made ready (its level, its WAL's descriptor)
    return group


def _rows(tmp_path: Path) -> set[str]:
    other = sqlite3.connect(tmp_path / "w.db")  # only committed rows are visible to it
    try:
        return {row[0] for row in other.execute("SELECT k FROM t")}
    finally:
        other.close()


def _until(condition: Callable[[], bool], what: str) -> None:
    until(condition, what, DEADLINE_S)


def _insert(key: str) -> Callable[[sqlite3.Connection], str]:
    def op(conn: sqlite3.Connection) -> str:
        conn.execute("INSERT INTO t (k) VALUES (?)", (key,))
        return key

    return op


class _ExitCut:
    """The lend's lock, raising in ``caller``'s thread as it is let go for the ``nth`` time."""

    def __init__(self, lock: Any, caller: int, nth: int) -> None:
        self._lock = lock
        self._caller = caller
        self._nth = nth
        self.exits = 0
        self.fired = False

    def __enter__(self) -> bool:
        return bool(self._lock.__enter__())

    def __exit__(self, *exc: object) -> None:
        self._lock.__exit__(*exc)
        if threading.get_ident() == self._caller and exc[0] is None:
            self.exits += 1
            if self.exits == self._nth:
                self.fired = True
                raise Interrupted

    def __getattr__(self, name: str) -> Any:
        return getattr(self._lock, name)


def _flusher_thread(group: GroupCommit) -> threading.Thread:
    flusher = group._lend.flusher
    assert flusher is not None
    return flusher._thread


def test_a_lend_interrupted_as_it_is_claimed_leaves_the_flusher_committing_and_closable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_writer, "LINGER_S", LINGER_S)
    group = _writer(tmp_path)
    group.defer(_insert("deferred"))
    thread = _flusher_thread(group)
    _until(lambda: group._lend.due, "the flusher's linger to end")  # it waits to be lent the writer
    cut = _ExitCut(group._lend.lock, threading.get_ident(), 1)
    group._lend.lock = cut  # type: ignore[assignment]
    with pytest.raises(Interrupted):
        group.run(_insert("intent"))  # its sync lends the writer: cut as the lend is claimed
    assert cut.fired
    assert "intent" in _rows(tmp_path)  # committed before the interruption, as a lone commit is
    # Nobody settles here: the flusher itself commits the deferred row, its thread not stuck.
    deadline = time.monotonic() + DEADLINE_S
    while "deferred" not in _rows(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert "deferred" in _rows(tmp_path), "the flusher waits for ever for a lend the interruption cut"
    group.defer(_insert("later"))  # and goes on committing what is deferred after
    deadline = time.monotonic() + DEADLINE_S
    while "later" not in _rows(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert "later" in _rows(tmp_path)
    assert group.run(_insert("after")) == "after"
    group.close()
    thread.join(DEADLINE_S)
    assert not thread.is_alive(), "close() left the flusher's thread running"


def test_a_lend_interrupted_as_it_is_taken_back_waits_for_the_flushers_transaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_writer, "LINGER_S", LINGER_S)
    group = _writer(tmp_path)
    caller = threading.get_ident()
    flushing, release = threading.Event(), threading.Event()

    def deferred(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO t (k) VALUES ('deferred')")
        flushing.set()
        release.wait(DEADLINE_S)  # the flusher's transaction stays open meanwhile

    group.defer(deferred)
    _until(lambda: group._lend.due, "the flusher's linger to end")
    fdatasync = os.fdatasync

    def sync(fd: int) -> None:
        if threading.get_ident() == caller:  # the leader's sync lasts until the flusher began
            assert flushing.wait(DEADLINE_S)
        fdatasync(fd)

    monkeypatch.setattr(os, "fdatasync", sync)
    cut = _ExitCut(group._lend.lock, caller, 2)  # the claim's exit, then the take-back's
    group._lend.lock = cut  # type: ignore[assignment]
    timer = threading.Timer(0.3, release.set)  # the flusher's transaction ends a while later
    timer.start()
    with pytest.raises(Interrupted):
        group.run(_insert("intent"))
    assert cut.fired
    out: dict[str, Any] = {}

    def later() -> None:
        try:
            out["later"] = group.run(_insert("later"))
        except BaseException as exc:  # noted for the test to look at
            out["later"] = exc

    writer = threading.Thread(target=later, daemon=True)
    writer.start()
    writer.join(DEADLINE_S)
    release.set()
    timer.join(DEADLINE_S)
    assert not writer.is_alive(), "a write after the interruption waits for ever"
    assert out.get("later") == "later"  # not a BEGIN inside the flusher's open transaction
    assert _rows(tmp_path) >= {"intent", "deferred", "later"}
    group.close()


class _BeginThenInterrupt:
    """The writer's kept cursor, whose ``BEGIN`` begins the transaction, then raises."""

    def __init__(self, cursor: sqlite3.Cursor) -> None:
        self._cursor = cursor
        self.armed = True

    def execute(self, sql: str, *args: Any) -> Any:
        result = self._cursor.execute(sql, *args)
        if sql == BEGIN and self.armed:
            self.armed = False
            raise Interrupted
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


def test_a_lone_caller_interrupted_as_its_transaction_begins_leaves_none_open(tmp_path: Path) -> None:
    group = _writer(tmp_path)
    wal = group._wal
    assert wal is not None
    cursor = _BeginThenInterrupt(wal[2])
    group._wal = (wal[0], wal[1], cursor)  # type: ignore[assignment]
    with pytest.raises(Interrupted):
        group.run(_insert("cut"))
    assert not cursor.armed
    assert group.run(_insert("next")) == "next"  # its BEGIN is not inside a transaction left open
    assert _rows(tmp_path) == {"next"}  # the interrupted caller's operation never ran
    assert group.run(_insert("durable"), durable=True) == "durable"
    group.close()
