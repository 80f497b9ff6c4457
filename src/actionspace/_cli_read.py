"""What the ledger and approvals commands read, opened so that reading writes nothing.

A command that only reads must leave a store as it found it: never create the file, its tables or
an artifacts folder beside it, nor switch its journal mode. SQLite: an existing file, opened
without creating it and with ``PRAGMA query_only`` (any write statement fails). PostgreSQL: every
query in a ``READ ONLY`` transaction, no DDL. A store without the tables a command reads is
refused with :class:`~actionspace.errors.StoreNotFoundError` (``no ledger in …``), and one written
by a newer actionspace with ConfigurationError, as opening it for writing would.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, Final, Literal

from actionspace.approval.requests import ApprovalRequest
from actionspace.errors import ConfigurationError, StoreNotFoundError
from actionspace.ledger.entries import LedgerEntry
from actionspace.trace.events import TraceEvent

__all__ = ["StoreReader", "Wanted"]

Wanted = Literal["ledger", "approvals"]
"""What a command reads: the ledger entries or the approval requests."""

_LEDGER: Final = (
    "key, run_id, node_id, tool, args_digest, arguments, state, attempts, created_at, updated_at,"
    " remote_id, observation, error, resolution"
)
_APPROVALS: Final = (
    "id, run_id, node_id, tool, args_digest, arguments, provenance, effects, reason, details, status,"
    " created_at, decided_at, decided_by, decision_reason, expires_at"
)
_JSON: Final = frozenset(
    {"arguments", "observation", "error", "resolution", "provenance", "effects", "details"}
)
_TABLES: Final = ("ledger_meta", "ledger_entries", "approval_requests", "trace_meta", "trace_events")
_NEEDS: Final = {"ledger": "ledger_entries", "approvals": "approval_requests"}

Query = Callable[[str, Sequence[Any]], list[dict[str, Any]]]
"""Run one SELECT (``?`` placeholders) and return its rows as column -> value."""


class StoreReader:
    """The ledger, approvals and trace events of the store ``url`` names, read without writing.

    Raises StoreNotFoundError when the file does not exist or holds no ``wanted`` table,
    ConfigurationError for a malformed URL, an unreachable server or a newer schema,
    ``sqlite3.DatabaseError`` for a file that is not a database.
    """

    def __init__(self, url: str, wanted: Wanted) -> None:
        from actionspace.ledger.open import scheme_of

        scheme = scheme_of(url)
        if scheme == "memory":
            raise StoreNotFoundError("no store at memory:// (a store in memory lives in its process only)")
        if scheme == "sqlite":
            self._query, self._close, where, self._decode = _sqlite(url)
            versions = _sqlite_versions()
        else:
            self._query, self._close, where, self._decode = _postgres(url)
            versions = _postgres_versions()
        try:
            self._tables = self._present(scheme)
            if _NEEDS[wanted] not in self._tables:
                what = "ledger" if wanted == "ledger" or "ledger_meta" not in self._tables else "approvals"
                raise StoreNotFoundError(f"no {what} in {where} (nothing has been recorded there yet)")
            self._check(where, versions)
        except BaseException:
            self._close()
            raise

    def ledger_list(self, *, state: str | None, limit: int) -> list[LedgerEntry]:
        """At most ``limit`` entries (only those in ``state`` if given), most recently updated first."""
        where, params = ("WHERE state = ?", [state]) if state is not None else ("", [])
        sql = f"SELECT {_LEDGER} FROM ledger_entries {where} ORDER BY updated_at DESC, key LIMIT ?"
        return [LedgerEntry.from_dict(self._row(r)) for r in self._query(sql, [*params, limit])]

    def ledger_get(self, key: str) -> LedgerEntry | None:
        if "ledger_entries" not in self._tables or not _storable(key):
            return None
        rows = self._query(f"SELECT {_LEDGER} FROM ledger_entries WHERE key = ?", [key])
        return LedgerEntry.from_dict(self._row(rows[0])) if rows else None

    def approvals_list(self, *, status: str | None, limit: int) -> list[ApprovalRequest]:
        """At most ``limit`` requests (only those in ``status`` if given), newest first."""
        where, params = ("WHERE status = ?", [status]) if status is not None else ("", [])
        sql = f"SELECT {_APPROVALS} FROM approval_requests {where} ORDER BY created_at DESC, id LIMIT ?"
        return [ApprovalRequest.from_dict(self._row(r)) for r in self._query(sql, [*params, limit])]

    def approval_get(self, request_id: str) -> ApprovalRequest | None:
        if "approval_requests" not in self._tables or not _storable(request_id):
            return None
        rows = self._query(f"SELECT {_APPROVALS} FROM approval_requests WHERE id = ?", [request_id])
        return ApprovalRequest.from_dict(self._row(rows[0])) if rows else None

    def events(self, run_id: str) -> list[TraceEvent]:
        """The run's trace events in order; none when the store keeps no trace."""
        if "trace_events" not in self._tables or not _storable(run_id):
            return []
        sql = "SELECT run_id, seq, kind, ts, call_id, data FROM trace_events WHERE run_id = ? ORDER BY seq"
        return [
            TraceEvent(
                run_id=r["run_id"],
                seq=r["seq"],
                kind=r["kind"],
                ts=r["ts"],
                call_id=r["call_id"],
                data=self._decode(r["data"]),
            )
            for r in self._query(sql, [run_id])
        ]

    def close(self) -> None:
        self._close()

    def _row(self, row: dict[str, Any]) -> dict[str, Any]:
        return {c: self._decode(v) if c in _JSON and v is not None else v for c, v in row.items()}

    def _present(self, scheme: str) -> set[str]:
        if scheme == "sqlite":
            rows = self._query("SELECT name FROM sqlite_master WHERE type = 'table'", [])
            return {r["name"] for r in rows} & set(_TABLES)
        checks = ", ".join(f"to_regclass(?) IS NOT NULL AS t{i}" for i in range(len(_TABLES)))
        row = self._query(f"SELECT {checks}", list(_TABLES))[0]
        return {name for i, name in enumerate(_TABLES) if row[f"t{i}"]}

    def _check(self, where: str, versions: dict[tuple[str, str], int]) -> None:
        """Refuse a store a newer actionspace wrote, as the stores do when they open it."""
        for (table, key), version in versions.items():
            if table not in self._tables:
                continue
            rows = self._query(f"SELECT value FROM {table} WHERE key = ?", [key])
            if rows and int(rows[0]["value"]) > version:
                raise ConfigurationError(
                    f"{where} has schema version {rows[0]['value']} ({key}); this actionspace reads up to "
                    f"{version}; upgrade actionspace"
                )


def _storable(text: str) -> bool:
    """No store holds an id with U+0000 (PostgreSQL text refuses it)."""
    return "\x00" not in text


def _sqlite(url: str) -> tuple[Query, Callable[[], None], str, Callable[[Any], Any]]:
    from actionspace._store_url import sqlite_path, sqlite_reading_uri

    path = sqlite_path(url)
    if not path.exists():
        raise StoreNotFoundError(f"no store at {path} (nothing has been recorded there yet)")
    conn = sqlite3.connect(sqlite_reading_uri(path), uri=True, isolation_level=None, check_same_thread=False)
    try:
        conn.execute("PRAGMA query_only = ON")
        conn.execute("PRAGMA busy_timeout = 10000")
    except BaseException:
        conn.close()
        raise

    def query(sql: str, params: Sequence[Any]) -> list[dict[str, Any]]:
        cursor = conn.execute(sql, tuple(params))
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    return query, conn.close, str(path), _from_text


def _from_text(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _postgres(url: str) -> tuple[Query, Callable[[], None], str, Callable[[Any], Any]]:
    from actionspace._extras import require

    pool = require("actionspace.ledger.postgres_pool", "postgres", "a postgresql:// store")
    db = pool.PostgresConnections(url, name="read", min_size=1, max_size=1)

    def query(sql: str, params: Sequence[Any]) -> list[dict[str, Any]]:
        with db.connection() as conn, conn.transaction():
            conn.execute("SET TRANSACTION READ ONLY")
            rows: list[dict[str, Any]] = conn.execute(sql.replace("?", "%s"), tuple(params)).fetchall()
            return rows

    return query, db.close, pool.redacted(url), lambda value: value  # jsonb comes back decoded


def _sqlite_versions() -> dict[tuple[str, str], int]:
    from actionspace.ledger import sqlite as ledger
    from actionspace.ledger import sqlite_approvals as approvals
    from actionspace.trace import sqlite as trace

    return {
        ("ledger_meta", "schema_version"): ledger.SCHEMA_VERSION,
        ("ledger_meta", "approval_schema_version"): approvals.SCHEMA_VERSION,
        ("trace_meta", "schema_version"): trace.SCHEMA_VERSION,
    }


def _postgres_versions() -> dict[tuple[str, str], int]:
    from actionspace.ledger import postgres as ledger
    from actionspace.trace import postgres as trace

    return {
        ("ledger_meta", "schema_version"): ledger.SCHEMA_VERSION,
        ("ledger_meta", "approval_schema_version"): ledger.APPROVAL_SCHEMA_VERSION,
        ("trace_meta", "schema_version"): trace.SCHEMA_VERSION,
    }
