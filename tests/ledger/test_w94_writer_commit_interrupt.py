"""A group's leader interrupted once its group committed, or between taking its group and giving the
writer back.

A signal handler runs in the main thread at the next point where the interpreter looks for one: as
a call returns or begins. The leader of a group runs every queued caller's operation and commits
them in one transaction; an interruption landing in the ``fdatasync`` that follows the ``COMMIT``
(or as the ``COMMIT`` returns) reached the leader after its group was written, and every caller of
the group was told the interruption as its own failure, though its operation is in the file. An
interruption between taking the group out of the queue and the ``try`` that hands the writer on, or
at the start of that hand-on, left the group's other callers waiting and the writer held for ever.

What must hold: the interrupted leader raises the interruption; every other caller of the group is
answered with what its operation returned (it is in the file), or, when the group was not written,
with the failure; nobody waits for ever, and later writes of the process go through. The fault is
injected at the exact step: the sync (or ``COMMIT``) completes and then raises in the leader's
thread; the writer's lock raises as it is let go just after the group was taken; the hand-on raises
as it begins.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from actionspace.ledger.sqlite_writer import COMMIT, GroupCommit, SqliteConnections
from tests.ledger.waits import until

DEADLINE_S = 10.0


class Interrupted(BaseException):
    """What a signal handler raises in the leader's thread."""


def _writer(tmp_path: Path) -> GroupCommit:
    db = SqliteConnections(tmp_path / "w.db", synchronous="FULL", busy_timeout_s=10.0)
    db.init_schema("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)", "meta", "v", 1)
    with db.write() as conn:
        conn.execute("CREATE TABLE t (k TEXT PRIMARY KEY)")
    group = GroupCommit(db)
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


def _in_thread(fn: Callable[[], Any], out: dict[str, Any], name: str) -> threading.Thread:
    def body() -> None:
        try:
            out[name] = fn()
        except BaseException as exc:  # noted for the test to look at
            out[name] = exc

    thread = threading.Thread(target=body, daemon=True, name=f"caller-{name}")
    thread.start()
    return thread


def _joined(threads: list[threading.Thread], what: str) -> None:
    for thread in threads:
        thread.join(DEADLINE_S)
        assert not thread.is_alive(), f"{thread.name} still waits: {what}"


def _group_of_two(group: GroupCommit, out: dict[str, Any], durable: bool) -> Callable[[], list[Any]]:
    """``a`` holds the writer while ``b`` then ``c`` queue behind it (``b`` leads their group once
    ``a`` let go); returns the release, which answers the three threads."""
    started, release = threading.Event(), threading.Event()

    def first(conn: sqlite3.Connection) -> str:
        conn.execute("INSERT INTO t (k) VALUES ('a')")
        started.set()
        release.wait(DEADLINE_S)
        return "a"

    a = _in_thread(lambda: group.run(first), out, "a")
    assert started.wait(DEADLINE_S)
    b = _in_thread(lambda: group.run(_insert("b"), durable=durable), out, "b")
    _until(lambda: group.queued == 1, "b to queue")
    c = _in_thread(lambda: group.run(_insert("c"), durable=durable), out, "c")
    _until(lambda: group.queued == 2, "c to queue")

    def go() -> list[Any]:
        release.set()
        return [a, b, c]

    go.b = b  # type: ignore[attr-defined]
    return go


def _later_writes_go_through(group: GroupCommit, out: dict[str, Any]) -> None:
    later = _in_thread(lambda: group.run(_insert("d")), out, "d")
    _joined([later], "a write after the interruption waits for a writer nobody gives back")
    assert out.get("d") == "d"
    assert group.queued == 0


def test_an_interruption_in_the_groups_sync_fails_nobody_whose_operation_is_on_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    group = _writer(tmp_path)
    out: dict[str, Any] = {}
    go = _group_of_two(group, out, durable=True)
    leader = go.b  # type: ignore[attr-defined]
    fdatasync = os.fdatasync
    armed = [True]

    def sync_then_interrupt(fd: int) -> None:
        fdatasync(fd)
        if armed[0] and threading.current_thread() is leader:
            armed[0] = False
            raise Interrupted  # the handler runs as the sync returns: the group is on disk

    monkeypatch.setattr(os, "fdatasync", sync_then_interrupt)
    _joined(go(), "a caller of the interrupted group was never released")
    assert not armed[0]
    assert out.get("a") == "a"
    assert isinstance(out.get("b"), Interrupted)  # the leader's own call raises the interruption
    assert _rows(tmp_path) >= {"b", "c"}  # the group committed
    assert out.get("c") == "c"  # so its other caller is told its operation's answer, not a failure
    _later_writes_go_through(group, out)
    group.close()


class _CommitThenInterrupt:
    """The writer's kept cursor, whose ``COMMIT`` in the leader's thread commits, then raises."""

    def __init__(self, cursor: sqlite3.Cursor, leader: Callable[[], threading.Thread]) -> None:
        self._cursor = cursor
        self._leader = leader
        self.armed = True

    def execute(self, sql: str, *args: Any) -> Any:
        result = self._cursor.execute(sql, *args)
        if sql == COMMIT and self.armed and threading.current_thread() is self._leader():
            self.armed = False
            raise Interrupted
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


@pytest.mark.parametrize("durable", [True, False], ids=["durable", "not_durable"])
def test_an_interruption_as_the_groups_commit_returns_fails_nobody_whose_operation_is_in_the_file(
    tmp_path: Path, durable: bool
) -> None:
    group = _writer(tmp_path)
    out: dict[str, Any] = {}
    wal = group._wal
    assert wal is not None
    holder: list[threading.Thread] = []
    cursor = _CommitThenInterrupt(wal[2], lambda: holder[0])
    group._wal = (wal[0], wal[1], cursor)  # type: ignore[assignment]
    go = _group_of_two(group, out, durable=durable)
    holder.append(go.b)  # type: ignore[attr-defined]
    _joined(go(), "a caller of the interrupted group was never released")
    assert not cursor.armed
    assert isinstance(out.get("b"), Interrupted)
    assert _rows(tmp_path) >= {"b", "c"}
    assert out.get("c") == "c"
    _later_writes_go_through(group, out)
    group.close()


def test_an_interruption_before_the_groups_commit_fails_its_callers_and_writes_none_of_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other side of the two tests above: a group not written is answered as failed."""
    group = _writer(tmp_path)
    out: dict[str, Any] = {}
    wal = group._wal
    assert wal is not None
    holder: list[threading.Thread] = []

    class _BeforeCommit(_CommitThenInterrupt):
        def execute(self, sql: str, *args: Any) -> Any:
            if sql == COMMIT and self.armed and threading.current_thread() is self._leader():
                self.armed = False
                raise Interrupted
            return self._cursor.execute(sql, *args)

    cursor = _BeforeCommit(wal[2], lambda: holder[0])
    group._wal = (wal[0], wal[1], cursor)  # type: ignore[assignment]
    go = _group_of_two(group, out, durable=True)
    holder.append(go.b)  # type: ignore[attr-defined]
    _joined(go(), "a caller of the interrupted group was never released")
    assert isinstance(out.get("b"), Interrupted)
    # its operation was rolled back: told so, as a failure of its own call (an Exception), not as
    # the interruption of a thread it does not run in
    assert isinstance(out.get("c"), Exception) and not isinstance(out.get("c"), Interrupted)
    assert _rows(tmp_path) == {"a"}
    _later_writes_go_through(group, out)
    group.close()


class _ExitCutAfter:
    """The writer's lock, raising as it is let go at the end of the ``with`` block in which the
    group is taken (``_take`` ran in the leader's thread): the lead taken, the ``try`` not begun."""

    def __init__(self, lock: Any, group: GroupCommit, leader: Callable[[], threading.Thread]) -> None:
        self._lock = lock
        self._group = group
        self._leader = leader
        self.armed = True

    def __enter__(self) -> bool:
        return bool(self._lock.__enter__())

    def __exit__(self, *exc: object) -> None:
        self._lock.__exit__(*exc)
        taken = self._group._queue == [] and self._group._waiting == 0
        if self.armed and exc[0] is None and taken and threading.current_thread() is self._leader():
            self.armed = False
            raise Interrupted

    def __getattr__(self, name: str) -> Any:
        return getattr(self._lock, name)


def test_a_leader_interrupted_just_after_it_took_its_group_leaves_nobody_waiting(tmp_path: Path) -> None:
    group = _writer(tmp_path)
    out: dict[str, Any] = {}
    holder: list[threading.Thread] = []
    cut = _ExitCutAfter(group._lock, group, lambda: holder[0] if holder else threading.main_thread())
    group._lock = cut  # type: ignore[assignment]
    go = _group_of_two(group, out, durable=True)
    holder.append(go.b)  # type: ignore[attr-defined]
    _joined(go(), "the interrupted leader's group was taken and never handed on")
    assert not cut.armed
    assert isinstance(out.get("b"), Interrupted)
    assert "c" not in _rows(tmp_path) or out.get("c") == "c"  # never told failed once in the file
    _later_writes_go_through(group, out)
    group.close()


def test_a_leader_interrupted_as_it_begins_handing_on_its_committed_group_releases_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    group = _writer(tmp_path)
    out: dict[str, Any] = {}
    holder: list[threading.Thread] = []
    hand_on = group._hand_on
    armed = [True]

    def interrupted_hand_on(handed: Any) -> None:
        if armed[0] and handed and holder and threading.current_thread() is holder[0]:
            armed[0] = False
            raise Interrupted  # as the call begins: nothing of it done
        hand_on(handed)

    monkeypatch.setattr(group, "_hand_on", interrupted_hand_on)
    go = _group_of_two(group, out, durable=True)
    holder.append(go.b)  # type: ignore[attr-defined]
    _joined(go(), "the interrupted leader's committed group was never handed on")
    assert not armed[0]
    assert isinstance(out.get("b"), Interrupted)
    assert out.get("c") == "c"
    assert _rows(tmp_path) >= {"a", "b", "c"}
    _later_writes_go_through(group, out)
    group.close()
