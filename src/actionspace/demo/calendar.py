"""A small but real calendar service on SQLite: users, teams, events, attendees.

It is the environment of the demo scenario: its state lives in a file, survives the process,
and is what the demo's verification reads back.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from actionspace.demo._sqlite import SqliteService

__all__ = ["CalendarService", "Slot"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS teams (id TEXT PRIMARY KEY, name TEXT NOT NULL, location TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS users (
    id TEXT PRIMARY KEY, name TEXT NOT NULL, timezone TEXT NOT NULL, team_id TEXT REFERENCES teams(id),
    invite_scope TEXT NOT NULL DEFAULT 'calendar:invite:staff');
CREATE TABLE IF NOT EXISTS events (
    id TEXT PRIMARY KEY, owner TEXT NOT NULL, title TEXT NOT NULL, start_utc TEXT NOT NULL,
    end_utc TEXT NOT NULL, timezone TEXT NOT NULL, version INTEGER NOT NULL DEFAULT 1,
    request_key TEXT UNIQUE);
CREATE TABLE IF NOT EXISTS attendees (
    event_id TEXT NOT NULL REFERENCES events(id), user_id TEXT NOT NULL REFERENCES users(id),
    PRIMARY KEY (event_id, user_id));
CREATE INDEX IF NOT EXISTS attendees_user ON attendees(user_id);
CREATE TABLE IF NOT EXISTS outbox (
    id INTEGER PRIMARY KEY, event_id TEXT NOT NULL, recipient TEXT NOT NULL, message TEXT NOT NULL);
"""


@dataclass(frozen=True, slots=True)
class Slot:
    start: datetime
    end: datetime

    def to_dict(self, tz: Any) -> dict[str, str]:
        return {"start": self.start.astimezone(tz).isoformat(), "end": self.end.astimezone(tz).isoformat()}


def _utc(ts: datetime) -> str:
    return ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse(ts: str) -> datetime:
    return datetime.fromisoformat(ts.replace("Z", "+00:00"))


class CalendarService(SqliteService):
    """The calendar's own API over one SQLite file (WAL; one connection per thread)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, _SCHEMA)

    # ------------------------------------------------------------------ setup
    def seed(
        self,
        *,
        teams: Iterable[tuple[str, str, str]],
        users: Iterable[tuple[str, str, str, str | None, str]],
        events: Iterable[tuple[str, str, str, datetime, datetime, Sequence[str]]] = (),
    ) -> None:
        """Load teams ``(id, name, location)``, users ``(id, name, tz, team, invite_scope)`` and events."""
        with self._tx() as db:
            db.executemany("INSERT OR REPLACE INTO teams VALUES (?, ?, ?)", teams)
            db.executemany("INSERT OR REPLACE INTO users VALUES (?, ?, ?, ?, ?)", users)
            for eid, owner, title, start, end, people in events:
                db.execute(
                    "INSERT OR REPLACE INTO events (id, owner, title, start_utc, end_utc, timezone)"
                    " VALUES (?, ?, ?, ?, ?, 'UTC')",
                    (eid, owner, title, _utc(start), _utc(end)),
                )
                db.executemany("INSERT OR REPLACE INTO attendees VALUES (?, ?)", [(eid, p) for p in people])

    # ------------------------------------------------------------------ reads
    def user(self, user_id: str) -> dict[str, Any] | None:
        row = self._conn().execute("SELECT * FROM users WHERE id = ?", (user_id,)).fetchone()
        return dict(row) if row else None

    def users(self, ids: Iterable[str]) -> list[dict[str, Any]]:
        return [u for i in ids if (u := self.user(i)) is not None]

    def find_teams(self, text: str) -> list[dict[str, Any]]:
        """Teams whose id equals ``text`` or whose name contains it (case-insensitive)."""
        rows = (
            self._conn()
            .execute(
                "SELECT * FROM teams WHERE id = ? OR lower(name) LIKE ? OR lower(name || ' team') LIKE ?"
                " ORDER BY id",
                (text, f"%{text.lower()}%", f"%{text.lower()}%"),
            )
            .fetchall()
        )
        return [dict(r) for r in rows]

    def members(self, team_id: str) -> list[dict[str, Any]]:
        rows = (
            self._conn().execute("SELECT * FROM users WHERE team_id = ? ORDER BY id", (team_id,)).fetchall()
        )
        return [dict(r) for r in rows]

    def busy(self, user_ids: Sequence[str], start: datetime, end: datetime) -> list[dict[str, Any]]:
        """Events of any of ``user_ids`` overlapping ``[start, end)``."""
        marks = ",".join("?" * len(user_ids))
        rows = (
            self._conn()
            .execute(
                f"SELECT DISTINCT e.id, e.title, e.start_utc, e.end_utc, a.user_id FROM events e"
                f" JOIN attendees a ON a.event_id = e.id WHERE a.user_id IN ({marks})"
                f" AND e.start_utc < ? AND e.end_utc > ? ORDER BY e.start_utc",
                (*user_ids, _utc(end), _utc(start)),
            )
            .fetchall()
        )
        return [dict(r) for r in rows]

    def free_slots(
        self, user_ids: Sequence[str], day_start: datetime, length: timedelta, *, count: int = 3
    ) -> list[Slot]:
        """The first ``count`` slots of ``length`` on the hour from ``day_start`` where all are free."""
        out: list[Slot] = []
        start = day_start
        for _ in range(48):
            if len(out) >= count:
                break
            end = start + length
            if not self.busy(user_ids, start, end):
                out.append(Slot(start, end))
            start += timedelta(minutes=30)
        return out

    def event(self, event_id: str) -> dict[str, Any] | None:
        conn = self._conn()
        row = conn.execute("SELECT * FROM events WHERE id = ?", (event_id,)).fetchone()
        if row is None:
            return None
        people = conn.execute(
            "SELECT user_id FROM attendees WHERE event_id = ? ORDER BY user_id", (event_id,)
        )
        return {**dict(row), "attendees": [r[0] for r in people]}

    def find_by_request_key(self, key: str) -> dict[str, Any] | None:
        row = self._conn().execute("SELECT id FROM events WHERE request_key = ?", (key,)).fetchone()
        return self.event(row[0]) if row else None

    def count_events(self) -> int:
        return int(self._conn().execute("SELECT count(*) FROM events").fetchone()[0])

    # ------------------------------------------------------------------ writes
    def create_event(
        self,
        *,
        owner: str,
        title: str,
        start: datetime,
        end: datetime,
        timezone: str,
        attendees: Sequence[str],
        request_key: str | None = None,
    ) -> dict[str, Any]:
        """Insert an event atomically; a repeated ``request_key`` returns the first event."""
        with self._tx() as db:
            if request_key is not None:
                row = db.execute("SELECT id FROM events WHERE request_key = ?", (request_key,)).fetchone()
                if row is not None:
                    existing = self.event(row[0])
                    assert existing is not None
                    return existing
            eid = f"evt-{uuid.uuid4().hex[:10]}"
            db.execute(
                "INSERT INTO events (id, owner, title, start_utc, end_utc, timezone, request_key)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (eid, owner, title, _utc(start), _utc(end), timezone, request_key),
            )
            db.executemany(
                "INSERT INTO attendees VALUES (?, ?)", [(eid, a) for a in dict.fromkeys(attendees)]
            )
        created = self.event(eid)
        assert created is not None
        return created

    def send_mail(self, event_id: str, message: str) -> dict[str, Any]:
        """Queue one email per attendee (the relay has no dedupe and no status query)."""
        event = self.event(event_id)
        if event is None:
            raise LookupError(f"no event {event_id}")
        with self._tx() as db:
            db.executemany(
                "INSERT INTO outbox (event_id, recipient, message) VALUES (?, ?, ?)",
                [(event_id, person, message) for person in event["attendees"]],
            )
        return {"event_id": event_id, "recipients": event["attendees"]}

    def mails(self, event_id: str) -> int:
        return int(
            self._conn().execute("SELECT count(*) FROM outbox WHERE event_id = ?", (event_id,)).fetchone()[0]
        )

    @staticmethod
    def parse_ts(ts: str) -> datetime:
        return _parse(ts)
