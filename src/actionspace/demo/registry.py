"""A small but real vendor registry on SQLite: vendors with licences and versions, and internal lists.

It is the environment of scenario 2. Lists are versioned: a save names the version it was based
on and fails with a version conflict when someone else saved in between (no silent overwrite).
A save carries an idempotency key; the same key saved again returns the first answer and
writes nothing (the ``saves`` table keeps one row per key, which is what the demo reads back).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from actionspace.demo._sqlite import SqliteService

__all__ = ["Vendor", "VendorRegistry", "VersionConflict"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS vendors (
    id TEXT PRIMARY KEY, name TEXT NOT NULL, product TEXT NOT NULL, version TEXT NOT NULL,
    licence TEXT NOT NULL, licence_expires TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS lists (id TEXT PRIMARY KEY, name TEXT NOT NULL, version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS list_entries (
    id INTEGER PRIMARY KEY, list_id TEXT NOT NULL REFERENCES lists(id), vendor_id TEXT NOT NULL,
    name TEXT NOT NULL, version TEXT NOT NULL, licence TEXT NOT NULL, added_by TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS list_entries_list ON list_entries(list_id);
CREATE TABLE IF NOT EXISTS saves (
    key TEXT PRIMARY KEY, list_id TEXT NOT NULL, author TEXT NOT NULL, base_version INTEGER NOT NULL,
    version_after INTEGER NOT NULL, result TEXT NOT NULL);
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Vendor:
    """One vendor's registry record."""

    id: str
    name: str
    product: str
    version: str
    """The product version the vendor currently ships."""
    licence: str
    licence_expires: date


class VersionConflict(Exception):
    """A save based on ``base_version`` while the list is at ``current_version``."""

    def __init__(self, list_id: str, base_version: int, current_version: int) -> None:
        super().__init__(
            f"list {list_id} is at version {current_version}, the save was based on {base_version}"
        )
        self.list_id = list_id
        self.base_version = base_version
        self.current_version = current_version


class VendorRegistry(SqliteService):
    """The registry's own API over one SQLite file (WAL; one connection per thread)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, _SCHEMA)

    # ------------------------------------------------------------------ setup
    def seed(self, *, vendors: Iterable[Vendor], lists: Iterable[tuple[str, str]]) -> None:
        """Load vendors and create empty lists ``(id, name)`` at version 1 (existing lists are kept)."""
        with self._tx() as db:
            db.executemany(
                "INSERT OR REPLACE INTO vendors VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (v.id, v.name, v.product, v.version, v.licence, v.licence_expires.isoformat())
                    for v in vendors
                ],
            )
            db.executemany("INSERT OR IGNORE INTO lists (id, name, version) VALUES (?, ?, 1)", lists)

    # ------------------------------------------------------------------ reads
    def vendor(self, vendor_id: str) -> dict[str, Any] | None:
        row = self._conn().execute("SELECT * FROM vendors WHERE id = ?", (vendor_id,)).fetchone()
        return dict(row) if row else None

    def read_list(self, list_id: str) -> dict[str, Any] | None:
        """``{"list_id", "name", "version", "entries": [...]}`` in insertion order; None if unknown."""
        conn = self._conn()
        row = conn.execute("SELECT * FROM lists WHERE id = ?", (list_id,)).fetchone()
        if row is None:
            return None
        entries = conn.execute(
            "SELECT vendor_id, name, version, licence, added_by FROM list_entries WHERE list_id = ?"
            " ORDER BY id",
            (list_id,),
        ).fetchall()
        return {
            "list_id": row["id"],
            "name": row["name"],
            "version": int(row["version"]),
            "entries": [dict(e) for e in entries],
        }

    def saves(self, list_id: str) -> list[dict[str, Any]]:
        """Every save the registry accepted for the list, oldest first (one row per key)."""
        rows = self._conn().execute(
            "SELECT key, author, base_version, version_after FROM saves WHERE list_id = ? ORDER BY rowid",
            (list_id,),
        )
        return [dict(r) for r in rows]

    def saves_with_key(self, key: str) -> int:
        return int(self._conn().execute("SELECT count(*) FROM saves WHERE key = ?", (key,)).fetchone()[0])

    # ------------------------------------------------------------------ writes
    def save_list(
        self,
        list_id: str,
        *,
        base_version: int,
        entries: Sequence[Mapping[str, Any]],
        key: str,
        author: str,
    ) -> dict[str, Any]:
        """Replace the list's entries if it is still at ``base_version``; bumps the version by one.

        A ``key`` seen before returns the first save's answer (with ``replayed: true``) and writes
        nothing. Raises :class:`VersionConflict` when the list moved on, ``LookupError`` when the
        list does not exist.
        """
        with self._tx() as db:
            seen = db.execute("SELECT result FROM saves WHERE key = ?", (key,)).fetchone()
            if seen is not None:
                first: dict[str, Any] = json.loads(seen[0])
                return {**first, "replayed": True}
            row = db.execute("SELECT version FROM lists WHERE id = ?", (list_id,)).fetchone()
            if row is None:
                raise LookupError(f"no list {list_id}")
            current = int(row[0])
            if current != base_version:
                raise VersionConflict(list_id, base_version, current)
            db.execute("DELETE FROM list_entries WHERE list_id = ?", (list_id,))
            db.executemany(
                "INSERT INTO list_entries (list_id, vendor_id, name, version, licence, added_by)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (
                        list_id,
                        e["vendor_id"],
                        e["name"],
                        e["version"],
                        e["licence"],
                        e.get("added_by", author),
                    )
                    for e in entries
                ],
            )
            db.execute("UPDATE lists SET version = ? WHERE id = ?", (current + 1, list_id))
            result = {
                "list_id": list_id,
                "version": current + 1,
                "entries": len(entries),
                "save_id": key,
                "replayed": False,
            }
            db.execute(
                "INSERT INTO saves (key, list_id, author, base_version, version_after, result)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (key, list_id, author, base_version, current + 1, json.dumps(result)),
            )
        return result
