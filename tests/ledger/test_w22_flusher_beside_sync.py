"""The flusher's deferred writes committed while a durable commit's WAL syncs, not after it.

A caller's durable write (an intent) is followed by its next write (the outcome). When the
flusher's linger ends while the intent holds the file's writer, the flusher used to queue behind
it and lead the next group: the caller's outcome, queued meanwhile, rode in the flusher's
transaction and waited for all of it. The flusher now asks to be lent the writer: the intent's
leader lends it for the length of its ``fdatasync`` (the connection and the interpreter's lock are
free then), so the deferred rows are written beside the disk's wait and the outcome runs alone.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from actionspace.ledger import sqlite_writer
from actionspace.ledger.sqlite import GroupCommit, SqliteConnections

LINGER_S = 0.3
"""The flusher's linger here: long enough that the margins below hold on a busy machine."""


def _db(tmp_path: Path) -> SqliteConnections:
    db = SqliteConnections(tmp_path / "g.db", synchronous="FULL", busy_timeout_s=10.0)
    db.init_schema("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)", "meta", "v", 1)
    with db.write() as conn:
        conn.execute("CREATE TABLE t (k TEXT PRIMARY KEY)")
    return db


def _rows(tmp_path: Path) -> set[str]:
    other = sqlite3.connect(tmp_path / "g.db")  # only committed rows are visible to it
    try:
        return {r[0] for r in other.execute("SELECT k FROM t")}
    finally:
        other.close()


def test_the_deferred_rows_are_written_during_the_intents_sync_and_the_outcome_never_waits_for_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_writer, "LINGER_S", LINGER_S)
    group = GroupCommit(_db(tmp_path))
    caller = threading.get_ident()
    deferred_done = threading.Event()
    beside_sync: list[bool] = []
    fdatasync = os.fdatasync

    def sync(fd: int) -> None:
        if threading.get_ident() == caller:  # the intent's sync: a disk slow enough to flush beside
            beside_sync.append(deferred_done.wait(1.0))
        fdatasync(fd)

    monkeypatch.setattr(os, "fdatasync", sync)
    ran_on: dict[str, int] = {}

    def write(name: str, hold_until: float = 0.0) -> sqlite_writer.Operation:
        def op(conn: sqlite3.Connection) -> None:
            ran_on[name] = threading.get_ident()
            while time.monotonic() < hold_until:  # the intent holds the writer as the linger ends
                time.sleep(0.005)
            conn.execute("INSERT INTO t (k) VALUES (?)", (name,))

        return op

    def deferred(name: str) -> sqlite_writer.Operation:
        def op(conn: sqlite3.Connection) -> None:
            ran_on[name] = threading.get_ident()
            conn.execute("INSERT INTO t (k) VALUES (?)", (name,))
            deferred_done.set()  # committed with its transaction, before its group returns

        return op

    rounds = 3
    for i in range(rounds):
        deferred_done.clear()
        group.defer(deferred(f"trace{i}"))  # the flusher's linger starts now
        # the intent holds the writer until half a linger after the flusher's ended
        group.run(write(f"intent{i}", time.monotonic() + 1.5 * LINGER_S), durable=True)
        group.run(write(f"outcome{i}"), durable=False)

    # the flusher's rows were committed while each intent's sync waited (old: after it, the sync
    # timing out), and no write of the caller ran in the flusher's transaction (old: every outcome)
    assert beside_sync == [True] * rounds
    riders = [name for name, thread in ran_on.items() if not name.startswith("trace") and thread != caller]
    assert riders == []
    assert all(ran_on[f"trace{i}"] != caller for i in range(rounds))
    assert _rows(tmp_path) == {f"{kind}{i}" for kind in ("trace", "intent", "outcome") for i in range(rounds)}
    group.close()


def test_with_no_durable_commit_the_flusher_settles_after_another_linger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_writer, "LINGER_S", 0.02)
    group = GroupCommit(_db(tmp_path))
    group.defer(lambda conn: conn.execute("INSERT INTO t (k) VALUES ('a')"))
    group.run(lambda conn: conn.execute("INSERT INTO t (k) VALUES ('b')"), durable=False)  # lends nothing
    deadline = time.monotonic() + 10.0
    while _rows(tmp_path) != {"a", "b"}:
        assert time.monotonic() < deadline, "the deferred write was never committed"
        time.sleep(0.01)
    group.close()


def test_a_failing_deferred_operation_committed_beside_a_sync_is_logged_and_the_intent_stands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(sqlite_writer, "LINGER_S", LINGER_S)
    group = GroupCommit(_db(tmp_path))
    failed = threading.Event()

    def broken(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO t (k) VALUES ('partial')")
        failed.set()
        raise RuntimeError("deferred write failed")

    def hold(conn: sqlite3.Connection) -> None:
        time.sleep(1.5 * LINGER_S)
        conn.execute("INSERT INTO t (k) VALUES ('intent')")

    group.defer(broken)
    group.run(hold, durable=True)
    assert failed.wait(5.0)
    group.run(lambda conn: conn.execute("INSERT INTO t (k) VALUES ('after')"), durable=True)
    assert _rows(tmp_path) == {"intent", "after"}  # nothing of the failed operation is written
    deadline = time.monotonic() + 10.0  # logged by the flusher once it gave the writer back
    while not any("queued write" in r.getMessage() for r in caplog.records):
        assert time.monotonic() < deadline, "the failed deferred write was not logged"
        time.sleep(0.01)
    group.close()
