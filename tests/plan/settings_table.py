"""The settings table the atomic-group tests write through a SQLite environment, and environments
that fail at its commit or rollback."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from actionspace.plan.environments import SqliteEnvironment, SqliteTransaction

__all__ = ["CommitAnswerLost", "RollbackRaises", "make_settings_db", "rows"]


def make_settings_db(path: Path) -> Path:
    """A SQLite file at ``path`` holding an empty ``settings (name, value)`` table."""
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE settings (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
    return path


def rows(path: Path) -> list[tuple[str, str]]:
    """The table's rows, sorted."""
    with sqlite3.connect(path) as conn:
        return sorted(conn.execute("SELECT name, value FROM settings").fetchall())


class RollbackRaises(SqliteEnvironment):
    """Rolls back, then raises (a disk that went away during the rollback)."""

    def begin(self, key: str) -> SqliteTransaction:
        tx = super().begin(key)
        real = tx.rollback

        def rollback() -> None:
            real()
            raise OSError("disk went away during rollback")

        tx.rollback = rollback  # type: ignore[method-assign]
        return tx


class CommitAnswerLost(SqliteEnvironment):
    """Commits, loses the answer, and cannot tell afterwards whether it committed."""

    def begin(self, key: str) -> SqliteTransaction:
        tx = super().begin(key)
        real = tx.commit

        def commit() -> None:
            real()
            raise ConnectionError("reply lost after commit")

        tx.commit = commit  # type: ignore[method-assign]
        return tx

    def committed(self, key: str) -> bool | None:
        return None
