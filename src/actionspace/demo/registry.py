"""A small but real vendor registry on SQLite: vendors with licences and versions, and internal lists.

It is the environment of scenario 2. Lists are versioned: a save names the version it was based
on and fails with a version conflict when someone else saved in between (no silent overwrite).
A save carries an idempotency key; the same key saved again returns the first answer and
writes nothing (the ``saves`` table keeps one row per key, which is what the demo reads back).

For ``actionspace trace replay`` it also builds each scenario's runtime over new services
(:data:`DEMO_RUNTIMES`), so that a demo run can be decided again without running a tool.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from actionspace.demo._sqlite import SqliteService

if TYPE_CHECKING:
    from actionspace.runtime import Runtime

__all__ = [
    "DEMO_RUNTIMES",
    "Vendor",
    "VendorRegistry",
    "VersionConflict",
    "calendar_runtime",
    "followup_runtime",
    "migration_runtime",
    "revenue_runtime",
    "vendors_runtime",
]

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


# ---------------------------------------------------------------------- fresh runtimes for replay
# ``actionspace trace replay RUN --runtime actionspace.demo.registry:<scenario>_runtime`` re-decides
# a demo run against the runtime its scenario builds, over new services in a temporary folder,
# seeded as the demo seeds them; nothing is run. The calendar and vendor scenarios seed for a
# day: ``today`` (default: $ACTIONSPACE_DEMO_TODAY, an ISO date, else today) must be the day the
# demo ran with (its ``--today``).


def _today(today: date | None) -> date:
    if today is not None:
        return today
    told = os.environ.get("ACTIONSPACE_DEMO_TODAY")
    return date.fromisoformat(told) if told else date.today()


def _folder(folder: Path | None) -> Path:
    where = folder or Path(tempfile.mkdtemp(prefix="actionspace-replay-"))
    where.mkdir(parents=True, exist_ok=True)
    return where


def calendar_runtime(*, today: date | None = None, folder: Path | None = None) -> Runtime:
    """Scenario 1's runtime (calendar tools, validators, bindings) over a new seeded calendar."""
    from actionspace.demo.calendar import CalendarService
    from actionspace.demo.scenario import build_runtime, next_tuesday, seed_calendar

    service = CalendarService(_folder(folder) / "calendar.db")
    seed_calendar(service, next_tuesday(_today(today)))
    return build_runtime(service, "memory://")


def followup_runtime(*, today: date | None = None, folder: Path | None = None) -> Runtime:
    """The runtime of scenario 1's follow-up run (``share_with_partner``, with its principal)."""
    from actionspace.demo.followup import TOOL, register
    from actionspace.demo.scenario import PRINCIPAL
    from actionspace.policy.principal import Principal
    from actionspace.runtime import Runtime

    scoped = Principal(id=PRINCIPAL.id, scopes=(*PRINCIPAL.scopes, f"external:{TOOL}"))
    rt = Runtime("memory://", principal=scoped, recover_on_start=False)
    register(rt, store=f"sqlite:///{_folder(folder) / 'replay.db'}")  # the channel lives beside it
    return rt


def vendors_runtime(*, today: date | None = None, folder: Path | None = None) -> Runtime:
    """Scenario 2's runtime over a freshly seeded vendor registry."""
    from actionspace.demo.vendor_tools import SlowAnswers, build_runtime, seed_registry

    day = _today(today)
    registry = VendorRegistry(_folder(folder) / "vendors.db")
    seed_registry(registry, day)
    return build_runtime(registry, "memory://", day, SlowAnswers([]))


def migration_runtime(*, today: date | None = None, folder: Path | None = None) -> Runtime:
    """Scenario 3's runtime over an empty config folder."""
    from actionspace.demo import migrate

    root = _folder(folder)
    return migrate._runtime(root, "memory://", migrate._Fault(root, None))


def revenue_runtime(*, today: date | None = None, folder: Path | None = None) -> Runtime:
    """Scenario 4's runtime over a freshly seeded document store."""
    from actionspace.demo.documents import DocumentStore
    from actionspace.demo.revenue import build_runtime

    docs = DocumentStore(_folder(folder) / "documents.db")
    docs.seed()
    return build_runtime(docs, "memory://")


DEMO_RUNTIMES: dict[str, Callable[..., Runtime]] = {
    "calendar": calendar_runtime,
    "followup": followup_runtime,
    "vendors": vendors_runtime,
    "migration": migration_runtime,
    "revenue": revenue_runtime,
}
"""Scenario → the function that builds its fresh runtime (keywords ``today`` and ``folder``)."""
