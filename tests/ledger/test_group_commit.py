"""Group commit: concurrent SQLite writers share a transaction, and each still returns only once durable."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from actionspace.ledger.sqlite import GroupCommit, SqliteConnections, SqliteLedgerStore
from tests.ledger.factories import entry


def _db(tmp_path: Path) -> SqliteConnections:
    db = SqliteConnections(tmp_path / "g.db", synchronous="FULL", busy_timeout_s=10.0)
    db.init_schema("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)", "meta", "v", 1)
    with db.write() as conn:
        conn.execute("CREATE TABLE t (k TEXT PRIMARY KEY)")
    return db


def test_a_failing_operation_is_rolled_back_alone_and_the_others_of_its_group_commit(tmp_path: Path) -> None:
    db = _db(tmp_path)
    group = GroupCommit(db)
    start = threading.Barrier(16)
    errors: list[BaseException] = []

    def write(i: int) -> None:
        def op(conn: sqlite3.Connection) -> int:
            conn.execute("INSERT INTO t (k) VALUES (?)", (f"k{i}",))
            if i % 5 == 0:
                raise ValueError(f"op {i} fails after its insert")
            return i

        start.wait()
        try:
            assert group.run(op) == i
        except ValueError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    other = sqlite3.connect(tmp_path / "g.db")  # another connection: only committed rows are visible
    rows = {r[0] for r in other.execute("SELECT k FROM t")}
    assert rows == {f"k{i}" for i in range(16) if i % 5}
    assert len(errors) == 4
    db.close()


def test_a_lone_failing_operation_raises_and_leaves_nothing(tmp_path: Path) -> None:
    db = _db(tmp_path)
    group = GroupCommit(db)

    def op(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO t (k) VALUES ('x')")
        raise RuntimeError("no")

    with pytest.raises(RuntimeError):
        group.run(op)
    assert db.conn().execute("SELECT count(*) FROM t").fetchone()[0] == 0
    assert group.run(lambda conn: conn.execute("INSERT INTO t (k) VALUES ('y')").rowcount) == 1
    db.close()


def test_concurrent_begins_of_one_node_create_it_once(tmp_path: Path) -> None:
    store = SqliteLedgerStore(tmp_path / "l.db")
    start = threading.Barrier(12)
    created: list[bool] = []

    def begin() -> None:
        start.wait()
        created.append(store.begin(entry("n1")).created)

    threads = [threading.Thread(target=begin) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert created.count(True) == 1 and len(created) == 12
    assert store.get_node("r1", "n1") == entry("n1")
    store.close()
