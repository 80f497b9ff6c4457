"""Committing deferred writes: a settle's own operation adds no statement to the transaction."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest

from actionspace.ledger.sqlite import GroupCommit, SqliteConnections


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


def test_one_deferred_operation_is_committed_without_a_savepoint(tmp_path: Path) -> None:
    db = _db(tmp_path)
    group = GroupCommit(db)
    statements: list[str] = []
    db.writer().set_trace_callback(statements.append)
    group.defer(lambda conn: conn.execute("INSERT INTO t (k) VALUES ('a')"))
    group.settle()
    assert _rows(tmp_path) == {"a"}
    assert [s for s in statements if "SAVEPOINT" in s.upper() or "RELEASE" in s.upper()] == []
    assert sum(s.upper().startswith("BEGIN") for s in statements) == 1
    group.close()
    db.close()


def test_a_settle_with_nothing_deferred_left_opens_no_transaction(tmp_path: Path) -> None:
    db = _db(tmp_path)
    group = GroupCommit(db)
    group.defer(lambda conn: conn.execute("INSERT INTO t (k) VALUES ('a')"))
    group.settle()
    statements: list[str] = []
    db.writer().set_trace_callback(statements.append)
    group.settle()
    group.settle()
    assert statements == []
    assert _rows(tmp_path) == {"a"}
    group.close()
    db.close()


def test_a_lone_deferred_operation_that_fails_is_logged_and_leaves_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = _db(tmp_path)
    group = GroupCommit(db)

    def bad(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO t (k) VALUES ('half')")
        raise RuntimeError("fails after its insert")

    with caplog.at_level(logging.ERROR, logger="actionspace.ledger.sqlite_writer"):
        group.defer(bad)
        group.settle()  # the deferred operation's failure is its own, not the settle's
    assert "a queued write" in caplog.text
    assert _rows(tmp_path) == set()
    assert group.run(lambda conn: conn.execute("INSERT INTO t (k) VALUES ('b')").rowcount) == 1
    group.defer(lambda conn: conn.execute("INSERT INTO t (k) VALUES ('c')"))
    group.settle()
    assert _rows(tmp_path) == {"b", "c"}
    group.close()
    db.close()


def test_a_failing_deferred_operation_beside_others_is_rolled_back_alone(tmp_path: Path) -> None:
    db = _db(tmp_path)
    group = GroupCommit(db)

    def bad(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO t (k) VALUES ('half')")
        raise RuntimeError("fails after its insert")

    group.defer(lambda conn: conn.execute("INSERT INTO t (k) VALUES ('a')"))
    group.defer(bad)
    group.defer(lambda conn: conn.execute("INSERT INTO t (k) VALUES ('b')"))
    group.settle()
    assert _rows(tmp_path) == {"a", "b"}
    group.close()
    db.close()
