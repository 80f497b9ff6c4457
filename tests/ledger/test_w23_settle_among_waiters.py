"""A settle queued behind another waiting caller returns only once every deferred operation handed
in before it is committed.

The first waiting caller is woken to lead the next group; the code before took only the waiting
callers' operations into it unless the leader was the settle itself, so a settle waiting behind
another caller (a trace read while another thread writes) returned with the deferred operations
still queued for the flusher, and read without them.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from actionspace.ledger import sqlite_writer
from actionspace.ledger.sqlite_writer import GroupCommit, Operation, SqliteConnections
from tests.ledger.waits import until

DEADLINE_S = 20.0


def _writer(tmp_path: Path) -> GroupCommit:
    db = SqliteConnections(tmp_path / "w.db", synchronous="FULL", busy_timeout_s=10.0)
    db.init_schema("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)", "meta", "v", 1)
    with db.write() as conn:
        conn.execute("CREATE TABLE t (k TEXT PRIMARY KEY)")
    return GroupCommit(db)


def _rows(tmp_path: Path) -> set[str]:
    other = sqlite3.connect(tmp_path / "w.db")  # only committed rows are visible to it
    try:
        return {r[0] for r in other.execute("SELECT k FROM t")}
    finally:
        other.close()


def _until(condition: Callable[[], bool], what: str) -> None:
    until(condition, what, DEADLINE_S)


def _insert(name: str) -> Operation:
    def op(conn: sqlite3.Connection) -> str:
        conn.execute("INSERT INTO t (k) VALUES (?)", (name,))
        return name

    return op


def test_a_settle_waiting_behind_another_caller_returns_with_the_deferred_writes_committed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_writer, "LINGER_S", 30.0)  # the flusher never commits them first
    group = _writer(tmp_path)
    settled: list[set[str]] = []
    group.defer(_insert("deferred"))

    def settler() -> None:
        group.settle()
        settled.append(_rows(tmp_path))

    held, release = threading.Event(), threading.Event()

    def hold(conn: sqlite3.Connection) -> None:
        held.set()
        release.wait(DEADLINE_S)

    first = threading.Thread(target=group.run, args=(hold,), kwargs={"durable": False})
    first.start()
    assert held.wait(DEADLINE_S)
    caller = threading.Thread(target=group.run, args=(_insert("before"),))  # queued before the settle
    caller.start()
    _until(lambda: group.queued == 2, "the caller to queue")  # the deferred write and the caller
    other = threading.Thread(target=settler)
    other.start()
    _until(lambda: group.queued == 3, "the settle to queue")
    release.set()
    for thread in (first, caller, other):
        thread.join(DEADLINE_S)
        assert not thread.is_alive()

    # the code before: the first waiter led its group without the deferred write, and the settle
    # returned before the flusher committed it
    assert settled == [{"before", "deferred"}]
    group.close()
