"""The file's writer writes on one connection, whichever thread leads a group."""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

import pytest

from actionspace.ledger.sqlite import GroupCommit, SqliteConnections, SqliteLedgerStore
from tests.ledger.factories import entry


def _db(tmp_path: Path) -> SqliteConnections:
    db = SqliteConnections(tmp_path / "w.db", synchronous="FULL", busy_timeout_s=10.0)
    meta = "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)"
    db.init_schema(meta, "meta", "v", 1)
    with db.write() as conn:
        conn.execute("CREATE TABLE t (k TEXT PRIMARY KEY)")
    return db


def test_every_thread_writes_on_the_same_connection(tmp_path: Path) -> None:
    db = _db(tmp_path)
    group = GroupCommit(db)
    seen: list[sqlite3.Connection] = []

    def write(i: int) -> None:
        def op(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT INTO t (k) VALUES (?)", (f"k{i}",))
            seen.append(conn)

        group.run(op)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    write(99)  # and the main thread too
    assert len(seen) == 7
    assert len({id(c) for c in seen}) == 1
    assert seen[0] is not db.conn()  # readers keep their own connections
    assert db.conn().execute("SELECT count(*) FROM t").fetchone()[0] == 7
    db.close()


def test_closing_closes_the_writing_connection(tmp_path: Path) -> None:
    db = _db(tmp_path)
    writer = GroupCommit(db).run(lambda conn: conn)
    db.close()
    with pytest.raises(sqlite3.ProgrammingError):
        writer.execute("SELECT 1")
    with pytest.raises(ValueError):
        db.writer()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_writes_on_its_own_connection(tmp_path: Path) -> None:
    store = SqliteLedgerStore(tmp_path / "f.db")
    store.begin(entry(node_id="parent"))
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: begin through the inherited store, report, leave at once
        ok = b"0"
        try:
            ok = b"1" if store.begin(entry(node_id="child")).created else b"0"
        finally:
            os.write(write, ok)
            os._exit(0)
    os.close(write)
    assert os.read(read, 1) == b"1"
    os.waitpid(pid, 0)
    assert store.begin(entry(node_id="parent-again")).created
    assert store.get_node("r1", "child") is not None
    assert store.get_node("r1", "parent-again") is not None
    store.close()
