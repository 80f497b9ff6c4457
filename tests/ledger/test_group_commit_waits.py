"""Callers waiting for a shared commit wait on a bare lock: no ``threading.Event`` per waiter (its
``wait`` and ``set`` are Python code run under the interpreter's lock, for every waiting caller of
every group), and every waiter still returns its own result once its group committed."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from actionspace.ledger.sqlite_writer import GroupCommit, Operation, SqliteConnections
from tests.ledger.waits import until

CALLERS = 8
DEADLINE_S = 20.0


def _writer(tmp_path: Path) -> GroupCommit:
    db = SqliteConnections(tmp_path / "w.db", synchronous="FULL", busy_timeout_s=10.0)
    db.init_schema("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)", "meta", "v", 1)
    with db.write() as conn:
        conn.execute("CREATE TABLE t (k TEXT PRIMARY KEY)")
    return GroupCommit(db)


def _until(condition: Callable[[], bool], what: str) -> None:
    until(condition, what, DEADLINE_S)


def _round(group: GroupCommit, r: int, monkeypatch: pytest.MonkeyPatch, made: list[object]) -> None:
    """One caller leads a group that holds until the others all queued behind it; then each
    returns its own operation's result. Events made meanwhile are noted in ``made``."""
    real_event = threading.Event
    started, release = real_event(), real_event()
    results: dict[int, object] = {}

    def first(conn: sqlite3.Connection) -> str:
        conn.execute("INSERT INTO t (k) VALUES (?)", (f"r{r}-lead",))
        started.set()
        release.wait(DEADLINE_S)  # the others queue behind this group meanwhile
        return f"r{r}-lead"

    def write(i: int) -> None:
        def op(conn: sqlite3.Connection) -> str:
            conn.execute("INSERT INTO t (k) VALUES (?)", (f"r{r}-{i}",))
            return f"r{r}-{i}"

        results[i] = group.run(op, durable=i % 2 == 0)

    def counted() -> threading.Event:
        event = real_event()
        made.append(event)
        return event

    lead = threading.Thread(target=lambda: results.__setitem__(-1, group.run(first)))
    others = [threading.Thread(target=write, args=(i,)) for i in range(CALLERS - 1)]
    monkeypatch.setattr(threading, "Event", counted)  # the threads made theirs before
    try:
        lead.start()
        assert started.wait(DEADLINE_S)  # its group is taken: the others queue behind it
        for t in others:
            t.start()
        _until(lambda: group.queued == CALLERS - 1, "every other caller to queue")
        release.set()
        for t in [lead, *others]:
            t.join(DEADLINE_S)
    finally:
        release.set()
        monkeypatch.setattr(threading, "Event", real_event)
    assert not any(t.is_alive() for t in [lead, *others])
    assert results == {-1: f"r{r}-lead", **{i: f"r{r}-{i}" for i in range(CALLERS - 1)}}
    assert group.queued == 0


@pytest.mark.parametrize("rounds", [1, 3])
def test_waiting_callers_make_no_event_and_each_gets_its_own_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rounds: int
) -> None:
    group = _writer(tmp_path)
    made: list[object] = []
    for r in range(rounds):
        _round(group, r, monkeypatch, made)
    assert made == []  # the waiters of every round waited without one
    rows = {row[0] for row in group._db.conn().execute("SELECT k FROM t")}
    expected = {f"r{r}-{i}" for r in range(rounds) for i in range(CALLERS - 1)}
    assert rows == expected | {f"r{r}-lead" for r in range(rounds)}
    group._db.close()


def test_a_waiter_handed_the_lead_leads_its_group_and_is_not_woken_twice(tmp_path: Path) -> None:
    """The first waiter after a group is handed the lead; its own group then ends without waking
    it again (a bare lock released twice raises)."""
    group = _writer(tmp_path)
    started, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def first(conn: sqlite3.Connection) -> None:
        started.set()
        release.wait(DEADLINE_S)

    def run(op: Operation) -> None:
        try:
            group.run(op)
        except BaseException as exc:  # reported below
            errors.append(exc)

    lead = threading.Thread(target=run, args=(first,))
    lead.start()
    assert started.wait(DEADLINE_S)
    later = [
        threading.Thread(target=run, args=(lambda conn, i=i: conn.execute("INSERT INTO t VALUES (?)", (i,)),))
        for i in range(3)
    ]
    for t in later:
        t.start()
    _until(lambda: group.queued == 3, "three callers to queue")
    release.set()
    for t in [lead, *later]:
        t.join(DEADLINE_S)
    assert errors == []
    assert group._db.conn().execute("SELECT count(*) FROM t").fetchone()[0] == 3
    assert group.run(lambda conn: conn.execute("INSERT INTO t VALUES ('after')").rowcount) == 1
    group._db.close()
