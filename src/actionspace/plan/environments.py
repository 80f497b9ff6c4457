"""A ready-made transactional environment over SQLite, for atomic plan groups.

``SqliteEnvironment(path)`` opens one connection per transaction (``BEGIN IMMEDIATE``); group
members write through ``transaction.connection``. Commit records the group's key in the same
transaction (table ``actionspace_group_commits``), which is what ``committed(key)`` reads.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from actionspace.plan.model import GroupMode

__all__ = ["SqliteEnvironment", "SqliteTransaction"]

_TABLE = "actionspace_group_commits"


class SqliteTransaction:
    """One open SQLite transaction; ``connection`` is what member tools use."""

    def __init__(self, connection: sqlite3.Connection, key: str) -> None:
        self.connection = connection
        self.key = key

    def commit(self) -> None:
        try:
            self.connection.execute(f"INSERT INTO {_TABLE} (key, at) VALUES (?, ?)", (self.key, time.time()))
            self.connection.commit()
        finally:
            self.connection.close()

    def rollback(self) -> None:
        try:
            self.connection.rollback()
        finally:
            self.connection.close()


class SqliteEnvironment:
    """The environment's own transaction (``mode = "transaction"``) over one SQLite file."""

    mode: GroupMode = "transaction"

    def __init__(self, path: str | Path, *, timeout_s: float = 10.0) -> None:
        self.path = Path(path)
        self.timeout_s = timeout_s
        with self._connect() as conn:
            conn.execute(f"CREATE TABLE IF NOT EXISTS {_TABLE} (key TEXT PRIMARY KEY, at REAL NOT NULL)")

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path, timeout=self.timeout_s, isolation_level=None, check_same_thread=False
        )
        conn.execute("PRAGMA journal_mode=WAL")
        return conn

    def begin(self, key: str) -> SqliteTransaction:
        conn = self._connect()
        conn.isolation_level = "DEFERRED"
        conn.execute("BEGIN IMMEDIATE")
        return SqliteTransaction(conn, key)

    def committed(self, key: str) -> bool | None:
        try:
            with self._connect() as conn:
                row = conn.execute(f"SELECT 1 FROM {_TABLE} WHERE key = ?", (key,)).fetchone()
        except sqlite3.Error:
            return None
        return row is not None
