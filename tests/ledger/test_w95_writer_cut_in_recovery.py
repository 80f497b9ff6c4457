"""The SQLite writer interrupted while it recovers from an interruption, or as a lone caller lets it go.

The first interruption lands before the group's ``COMMIT``: the writer rolls the transaction back
and tells every caller of the group that its write failed. A second signal handler's exception
landing as that rollback returns cut the recovery before the callers were told: the group's other
caller was answered with what its operation returned, as if it were written, though nothing of it
is in the file.

A lone caller (no group: the writer idle) interrupted as it began to let go of the writer, its write
committed, left the writer held: every later write of the process waited for ever.

What must hold: every caller of the group not written is told it failed (the other caller with an
``Exception`` of its own), nobody waits for ever, no transaction is left open, a later write goes
through.
"""

from __future__ import annotations

import sqlite3
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from actionspace.ledger.sqlite_writer import COMMIT, GroupCommit, SqliteConnections
from tests.ledger.waits import until

DEADLINE_S = 10.0
"""A bound for a step of another thread (milliseconds each), reached only by a caller waiting for ever."""


class Interrupted(BaseException):
    """What a signal handler raises in the leader's thread."""


class Again(BaseException):
    """What a second signal handler raises there, during the recovery from the first."""


def _until(condition: Callable[[], bool], what: str) -> None:
    until(condition, what, DEADLINE_S)


class _RollbackCut:
    """The writing connection: its ``rollback`` in the leader's thread rolls back, then raises."""

    def __init__(self, conn: sqlite3.Connection, leader: Callable[[], threading.Thread | None]) -> None:
        self._conn = conn
        self._leader = leader
        self.armed = False

    def rollback(self) -> None:
        self._conn.rollback()
        if self.armed and threading.current_thread() is self._leader():
            self.armed = False
            raise Again

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


class _BeforeCommit:
    """The writer's kept cursor, raising in the leader's thread instead of running ``COMMIT``."""

    def __init__(self, cursor: sqlite3.Cursor, leader: Callable[[], threading.Thread | None]) -> None:
        self._cursor = cursor
        self._leader = leader
        self.armed = True

    def execute(self, sql: str, *args: Any) -> Any:
        if sql == COMMIT and self.armed and threading.current_thread() is self._leader():
            self.armed = False
            raise Interrupted
        return self._cursor.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


def _insert(key: str) -> Callable[[sqlite3.Connection], str]:
    def op(conn: sqlite3.Connection) -> str:
        conn.execute("INSERT INTO t (k) VALUES (?)", (key,))
        return key

    return op


def test_a_second_interruption_in_the_rollback_of_the_first_still_fails_every_caller(tmp_path: Path) -> None:
    path = tmp_path / "w.db"
    db = SqliteConnections(path, synchronous="FULL", busy_timeout_s=10.0)
    db.init_schema("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)", "meta", "v", 1)
    with db.write() as conn:
        conn.execute("CREATE TABLE t (k TEXT PRIMARY KEY)")
    group = GroupCommit(db)
    threads: list[threading.Thread] = []
    leader: Callable[[], threading.Thread | None] = lambda: threads[1] if len(threads) > 1 else None  # noqa: E731
    proxy = _RollbackCut(db.writer(), leader)
    as_conn: Any = proxy
    db.writer = lambda: as_conn  # type: ignore[method-assign]
    group.run(lambda conn: None)  # the writer made ready on the proxy
    wal = group._wal
    assert wal is not None and wal[0] is as_conn
    cursor = _BeforeCommit(wal[2], leader)
    group._wal = (wal[0], wal[1], cursor)  # type: ignore[assignment]
    out: dict[str, Any] = {}
    started, release = threading.Event(), threading.Event()

    def hold(conn: sqlite3.Connection) -> str:
        conn.execute("INSERT INTO t (k) VALUES ('a')")
        started.set()
        release.wait(DEADLINE_S)
        return "a"

    def call(name: str, op: Callable[[sqlite3.Connection], Any]) -> None:
        try:
            out[name] = group.run(op)
        except BaseException as exc:  # noted for the test to look at
            out[name] = exc

    for name, op in (("a", hold), ("b", _insert("b")), ("c", _insert("c"))):
        threads.append(threading.Thread(target=call, args=(name, op), daemon=True, name=f"caller-{name}"))
        threads[-1].start()
        if name == "a":
            assert started.wait(DEADLINE_S)
        else:
            _until(lambda: group.queued == len(threads) - 1, f"{name} to queue")
    proxy.armed = True
    release.set()
    for thread in threads:
        thread.join(DEADLINE_S)
        assert not thread.is_alive(), f"{thread.name} waits for ever"
    assert not cursor.armed and not proxy.armed  # both interruptions landed
    other = sqlite3.connect(path)
    try:
        rows = {row[0] for row in other.execute("SELECT k FROM t")}
    finally:
        other.close()
    assert rows == {"a"}
    assert isinstance(out.get("b"), (Interrupted, Again)), out.get("b")
    c = out.get("c")
    assert isinstance(c, Exception), f"c was answered {c!r} though nothing of it is in the file"
    assert not proxy.in_transaction
    assert group.run(_insert("d")) == "d"
    group.close()
    db.close()


def _writer(path: Path) -> tuple[GroupCommit, SqliteConnections]:
    db = SqliteConnections(path, synchronous="FULL", busy_timeout_s=10.0)
    db.init_schema("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)", "meta", "v", 1)
    with db.write() as conn:
        conn.execute("CREATE TABLE t (k TEXT PRIMARY KEY)")
    group = GroupCommit(db)
    group.run(lambda conn: None)
    return group, db


def _interrupted_as_let_go_begins(fired: list[bool]) -> Callable[[FrameType, str, Any], Any]:
    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "call" and frame.f_code.co_name == "_let_go" and not fired[0]:
            fired[0] = True
            sys.settrace(None)
            raise Interrupted  # as the call begins: nothing of it done
        return None

    return tracer


@pytest.mark.parametrize("hold", ["run", "read_kept"])
def test_a_lone_caller_interrupted_as_it_lets_go_leaves_the_writer_free(tmp_path: Path, hold: str) -> None:
    group, db = _writer(tmp_path / "w.db")
    fired = [False]
    sys.settrace(_interrupted_as_let_go_begins(fired))
    try:
        with pytest.raises(Interrupted):
            if hold == "run":
                group.run(_insert("b"))
            else:
                group.read_kept("SELECT k FROM t WHERE k = ?", "b", db)
    finally:
        sys.settrace(None)
    assert fired[0]
    out: dict[str, Any] = {}
    later = threading.Thread(target=lambda: out.__setitem__("d", group.run(_insert("d"))), daemon=True)
    later.start()
    later.join(DEADLINE_S)
    assert not later.is_alive(), "a later write waits for ever: the writer was left held"
    assert out["d"] == "d"
    group.close()
    db.close()
