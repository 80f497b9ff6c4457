"""The settings table the atomic-group tests write through a SQLite environment."""

from __future__ import annotations

import sqlite3
from pathlib import Path

__all__ = ["make_settings_db", "rows"]


def make_settings_db(path: Path) -> Path:
    """A SQLite file at ``path`` holding an empty ``settings (name, value)`` table."""
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE settings (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
    return path


def rows(path: Path) -> list[tuple[str, str]]:
    """The table's rows, sorted."""
    with sqlite3.connect(path) as conn:
        return sorted(conn.execute("SELECT name, value FROM settings").fetchall())
