"""A caller of the shared SQLite writer interrupted while it waits for its group.

A caller that finds the writer held queues its operation and waits on a bare lock until the
leader of the group before it either committed its operation or handed it the lead. A signal
handler runs between two bytecodes of the main thread, and a lock's wait lets it run: a Ctrl-C can
end the wait before the lead comes, or land just after it came. Either way the caller raises the
interruption, and the writer must go on serving everyone else: its operation never runs, the
callers queued behind it commit, and a later caller does not wait for ever behind a leader that
never comes. The interruption is made to land there: the waiting caller's lock raises from its
wait, at once or once the lead was handed to it.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from actionspace.ledger import sqlite_writer
from actionspace.ledger.sqlite_writer import GroupCommit, SqliteConnections
from tests.ledger.waits import until

DEADLINE_S = 10.0


class Interrupted(BaseException):
    """What a signal handler raises in the waiting caller's thread."""


def _writer(tmp_path: Path) -> GroupCommit:
    db = SqliteConnections(tmp_path / "w.db", synchronous="FULL", busy_timeout_s=10.0)
    db.init_schema("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)", "meta", "v", 1)
    with db.write() as conn:
        conn.execute("CREATE TABLE t (k TEXT PRIMARY KEY)")
    return GroupCommit(db)


def _until(condition: Callable[[], bool], what: str) -> None:
    until(condition, what, DEADLINE_S)


class _CutLock:
    """A waiting caller's lock whose wait (its second ``acquire``) is interrupted: at once
    (``handed=False``) or once the leader released it (``handed=True``)."""

    def __init__(self, handed: bool) -> None:
        self._lock = threading.Lock()
        self._handed = handed
        self._acquires = 0

    def acquire(self) -> bool:
        self._acquires += 1
        if self._acquires == 1:  # taken by run() while it queues
            return self._lock.acquire()
        if self._handed:
            self._lock.acquire()
        raise Interrupted

    def release(self) -> None:
        self._lock.release()


def _insert(key: str) -> Callable[[sqlite3.Connection], str]:
    def op(conn: sqlite3.Connection) -> str:
        conn.execute("INSERT INTO t (k) VALUES (?)", (key,))
        return key

    return op


def _in_thread(fn: Callable[[], Any], out: dict[str, Any], name: str) -> threading.Thread:
    def body() -> None:
        try:
            out[name] = fn()
        except BaseException as exc:  # noted for the test to look at
            out[name] = exc

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("handed", [False, True], ids=["in_the_wait", "once_handed_the_lead"])
def test_a_caller_interrupted_while_it_waits_leaves_the_writer_serving_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, handed: bool
) -> None:
    group = _writer(tmp_path)
    started, release = threading.Event(), threading.Event()
    out: dict[str, Any] = {}

    def first(conn: sqlite3.Connection) -> str:
        conn.execute("INSERT INTO t (k) VALUES ('a')")
        started.set()
        release.wait(DEADLINE_S)  # the others queue behind this group meanwhile
        return "a"

    made: list[Any] = []

    def allocate_lock() -> Any:
        """The first waiter's lock is cut; the next ones wait as usual."""
        made.append(_CutLock(handed) if not made else threading.Lock())
        return made[-1]

    monkeypatch.setattr(sqlite_writer, "_thread", SimpleNamespace(allocate_lock=allocate_lock))
    lead = _in_thread(lambda: group.run(first), out, "a")
    assert started.wait(DEADLINE_S)
    cut = _in_thread(lambda: group.run(_insert("b")), out, "b")
    if not handed:
        cut.join(DEADLINE_S)
        assert isinstance(out.get("b"), Interrupted)
    _until(lambda: len(made) == 1, "the interrupted caller to queue")
    behind = _in_thread(lambda: group.run(_insert("c")), out, "c")
    _until(lambda: len(made) == 2, "the caller behind it to queue")
    release.set()
    for thread in (lead, cut, behind):
        thread.join(DEADLINE_S)
    assert isinstance(out.get("b"), Interrupted)
    assert out.get("a") == "a"
    assert out.get("c") == "c"  # the caller queued behind it was served, not left waiting
    later = _in_thread(lambda: group.run(_insert("d")), out, "d")
    later.join(DEADLINE_S)
    assert out.get("d") == "d"  # and so is a later one
    rows = {row[0] for row in group._db.conn().execute("SELECT k FROM t")}
    assert rows == {"a", "c", "d"}  # the interrupted caller's operation never ran
    assert group.queued == 0
    group._db.close()


class _ExitCut:
    """The writer's lock, whose next release at the end of a ``with`` block is followed by the
    interruption (where a signal handler runs once the block's last call returned)."""

    def __init__(self, lock: Any) -> None:
        self._lock = lock
        self.armed = True

    def __enter__(self) -> bool:
        return bool(self._lock.__enter__())

    def __exit__(self, *exc: object) -> None:
        self._lock.__exit__(*exc)
        if self.armed and exc[0] is None:
            self.armed = False
            raise Interrupted

    def __getattr__(self, name: str) -> Any:
        return getattr(self._lock, name)


@pytest.mark.parametrize("step", ["run", "read_kept"])
def test_a_lone_caller_interrupted_as_it_takes_the_writer_leaves_it_free(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    """The lone caller marks the writer held under its lock; the interruption lands once the lock
    is released, before the caller began its statement: the writer is free again, not held for ever."""
    group = _writer(tmp_path)
    group.run(_insert("a"))
    readers = SqliteConnections(tmp_path / "w.db", synchronous="NORMAL", busy_timeout_s=10.0)
    cut = _ExitCut(group._lock)
    monkeypatch.setattr(group, "_lock", cut)
    with pytest.raises(Interrupted):
        if step == "run":
            group.run(_insert("b"))
        else:
            group.read_kept("SELECT k FROM t WHERE k = ?", "a", readers)
    assert not cut.armed
    out: dict[str, Any] = {}
    later = _in_thread(lambda: group.run(_insert("c")), out, "c")
    later.join(DEADLINE_S)
    assert out.get("c") == "c"  # a later caller takes the writer
    rows = {row[0] for row in group._db.conn().execute("SELECT k FROM t")}
    assert "c" in rows and "b" not in rows
    readers.close()
    group._db.close()
