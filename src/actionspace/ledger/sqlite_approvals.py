"""SQLite approval store: approval requests in the same file as the ledger and the trace.

It lives beside the ledger stores (as the memory and PostgreSQL approval stores do) because it
shares their connections and their file.

At most one request per ``pending_key`` (the binding ``(run_id, tool, args_digest)`` and the
``holder`` column: approval rule and proposer) is ``pending`` at a time: a partial unique index
enforces it, so two processes holding the same proposer's call share one request, and another
proposer of that call gets a request of its own.
A decision is a compare-and-set on ``status``, so a request is approved, denied or consumed once.
Connections run with ``synchronous=FULL``: a decision that returned has reached the disk.
"""

from __future__ import annotations

import builtins
import math
import os
import sqlite3
from collections.abc import Sequence
from typing import Any, Final

from actionspace._unicode import text_for_utf8
from actionspace.approval.requests import ApprovalRequest, holder
from actionspace.ledger._sqlite_tenants import add_listing_tenants, approvals_of_tenant
from actionspace.ledger.sqlite import SqliteConnections, from_json, to_json

__all__ = ["SCHEMA_VERSION", "SqliteApprovalStore"]

SCHEMA_VERSION: Final = 2
"""Version of the approval table; stored in ``ledger_meta`` under ``approval_schema_version``.

2: the ``holder`` column, and one pending request per binding and holder (a file of version 1 is
migrated when a store opens it; an actionspace that reads only version 1 refuses it then)."""

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS ledger_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS approval_requests (
    id              TEXT PRIMARY KEY,
    run_id          TEXT NOT NULL,
    node_id         TEXT NOT NULL,
    tool            TEXT NOT NULL,
    args_digest     TEXT NOT NULL,
    arguments       TEXT NOT NULL,
    provenance      TEXT NOT NULL,
    effects         TEXT NOT NULL,
    reason          TEXT NOT NULL,
    details         TEXT NOT NULL,
    status          TEXT NOT NULL,
    created_at      REAL NOT NULL,
    decided_at      REAL,
    decided_by      TEXT,
    decision_reason TEXT,
    expires_at      REAL,
    holder          TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS approval_requests_binding ON approval_requests (run_id, tool, args_digest);
CREATE INDEX IF NOT EXISTS approval_requests_status_created ON approval_requests (status, created_at)
"""
_ONE_PENDING: Final = (
    "CREATE UNIQUE INDEX IF NOT EXISTS approval_requests_one_pending"
    " ON approval_requests (run_id, tool, args_digest, holder) WHERE status = 'pending'"
)
"""Created after the migration: a file of version 1 has an index of this name without ``holder``."""

_COLUMNS: Final = (
    "id",
    "run_id",
    "node_id",
    "tool",
    "args_digest",
    "arguments",
    "provenance",
    "effects",
    "reason",
    "details",
    "status",
    "created_at",
    "decided_at",
    "decided_by",
    "decision_reason",
    "expires_at",
)
_JSON_COLUMNS: Final = frozenset({"arguments", "provenance", "effects", "details"})
_SELECT: Final = f"SELECT {', '.join(_COLUMNS)} FROM approval_requests"
_STORED: Final = (*_COLUMNS, "holder")
_INSERT: Final = (
    f"INSERT OR IGNORE INTO approval_requests ({', '.join(_STORED)}) VALUES ({', '.join('?' * len(_STORED))})"
)
"""A request's insert: nothing when its id or its pending binding and holder is stored. ``OR IGNORE``
rather than ``ON CONFLICT DO NOTHING``, for the reason the ledger's intent is one (``ledger/sqlite``):
the file's tenant trigger (``_sqlite_tenants``) and the ``NOT NULL`` checks at their default
``ABORT`` made SQLite copy every page the insert changes into a statement journal first. Under
``IGNORE`` a ``NOT NULL`` check would drop the row instead of raising, so :func:`_row` refuses a
request with such a value before (:data:`_NOT_NULL`)."""
_NOT_NULL: Final = tuple(
    i for i, c in enumerate(_STORED) if c not in ("decided_at", "decided_by", "decision_reason", "expires_at")
)
"""The positions in :func:`_row` of the columns declared ``NOT NULL``."""
_UPDATE: Final = f"UPDATE approval_requests SET {', '.join(f'{c} = ?' for c in _STORED[1:])} WHERE id = ?"
_BINDING: Final = "WHERE run_id = ? AND tool = ? AND args_digest = ?"
_PENDING: Final = f"{_BINDING} AND holder = ? AND status = 'pending'"
_EXPIRED: Final = "WHERE status = 'approved' AND expires_at <= ?"
_VALID: Final = "WHERE status = 'approved' AND (expires_at IS NULL OR expires_at > ?)"
_IDS_PER_QUERY: Final = 500
"""Run ids bound in one query: under SQLite's bound on query parameters."""


class SqliteApprovalStore:
    """An :class:`~actionspace.approval.requests.ApprovalStore` in one SQLite file.

    ``path`` is created (with its table) if missing; its parent directory must exist. It may be the
    same file as the ledger and trace stores. ``busy_timeout_s`` (seconds, default 10) bounds how
    long a call waits for another writer. Raises :class:`~actionspace.errors.ConfigurationError`
    for ``":memory:"`` and for a file written by a newer schema version.
    """

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout_s: float = 10.0) -> None:
        self._db = SqliteConnections(path, synchronous="FULL", busy_timeout_s=busy_timeout_s)
        self.path = self._db.path
        try:
            self._db.init_schema(_SCHEMA, "ledger_meta", "approval_schema_version", SCHEMA_VERSION)
            with self._db.write() as conn:
                _migrate(conn)
            add_listing_tenants(self._db)  # the file's stores are opened: its tables are all there
        except BaseException:
            self._db.close()
            raise

    def create(self, request: ApprovalRequest) -> ApprovalRequest:
        """Store ``request``, or return the pending request with its binding (or its id) instead."""
        with self._db.write() as conn:
            inserted = conn.execute(_INSERT, _row(request)).rowcount == 1
            stored = None if inserted else self._first(conn, _PENDING, request.pending_key)
            if stored is None:
                stored = self._first(conn, "WHERE id = ?", (request.id,))
        if stored is None:
            raise RuntimeError(f"approval request {request.id} vanished inside its own transaction")
        return stored

    def get(self, request_id: str) -> ApprovalRequest | None:
        return self._first(self._db.conn(), "WHERE id = ?", (request_id,))

    def find(self, run_id: str, tool: str, args_digest: str) -> list[ApprovalRequest]:
        """Requests with this binding, newest first."""
        rows = self._db.conn().execute(
            f"{_SELECT} {_BINDING} ORDER BY created_at DESC, id", (run_id, tool, args_digest)
        )
        return [_request(row) for row in rows]

    def list_approved(self, *, expired: bool, now: float, limit: int = 100) -> list[ApprovalRequest]:
        """See :class:`~actionspace.approval.requests.ListsApproved`: the expiry is compared in the query."""
        rows = self._db.conn().execute(
            f"{_SELECT} {_EXPIRED if expired else _VALID} ORDER BY created_at DESC, id LIMIT ?", (now, limit)
        )
        return [_request(row) for row in rows]

    def list_of_runs(self, run_ids: Sequence[str], *, status: str | None = None) -> list[ApprovalRequest]:
        """See :class:`~actionspace.approval.requests.ListsOfRuns`: read through the binding index,
        one query per :data:`_IDS_PER_QUERY` runs."""
        ids = [r for r in dict.fromkeys(run_ids) if text_for_utf8(r) == r]  # else no run holds it
        found: list[ApprovalRequest] = []
        for start in range(0, len(ids), _IDS_PER_QUERY):
            chunk = ids[start : start + _IDS_PER_QUERY]
            where = f"WHERE run_id IN ({', '.join('?' * len(chunk))})"
            params: tuple[str, ...] = tuple(chunk)
            if status is not None:
                where, params = f"{where} AND status = ?", (*params, status)
            found += [_request(row) for row in self._db.conn().execute(f"{_SELECT} {where}", params)]
        found.sort(key=lambda r: (-r.created_at, r.id))
        return found

    def list(self, *, status: str | None = None, limit: int = 100) -> list[ApprovalRequest]:
        """At most ``limit`` requests (all of them in ``status`` if given), newest first."""
        where, params = ("WHERE status = ?", (status,)) if status is not None else ("", ())
        rows = self._db.conn().execute(
            f"{_SELECT} {where} ORDER BY created_at DESC, id LIMIT ?", (*params, limit)
        )
        return [_request(row) for row in rows]

    def tenant_requests(
        self,
        tenant: str | None,
        *,
        status: str | None = None,
        limit: int = 100,
        expired: bool | None = None,
        now: float = 0.0,
    ) -> builtins.list[ApprovalRequest] | None:
        """See :class:`~actionspace.approval.requests.ListsTenantRequests`: read through the tenant
        indexes (``_sqlite_tenants``); None for a file that does not hold its runs' trace."""
        if not add_listing_tenants(self._db):
            return None
        if tenant is not None:
            if text_for_utf8(tenant) != tenant:
                return []  # an unpaired surrogate: no stored tenant holds one
            tenant = tenant.partition("\x00")[0]  # SQLite's JSON functions read a text up to U+0000
        params: tuple[Any, ...] = (tenant,)
        if status == "approved" and expired is not None:
            where, params = approvals_of_tenant(None, _EXPIRED if expired else _VALID), (tenant, now)
        else:
            where = approvals_of_tenant(status, None)
            params = (tenant,) if status is None else (tenant, status)
        rows = self._db.conn().execute(
            f"{_SELECT} {where} ORDER BY created_at DESC, id LIMIT ?", (*params, limit)
        )
        return [_request(row) for row in rows]

    def update(
        self, request_id: str, expected: Sequence[str], request: ApprovalRequest
    ) -> ApprovalRequest | None:
        """Store ``request`` only if the status of ``request_id`` is in ``expected``; None when not.

        Raises ``ValueError`` when ``request.id`` is not ``request_id``.
        """
        if request.id != request_id:
            raise ValueError(f"update of {request_id} was given the request {request.id}")
        statuses = list(dict.fromkeys(expected))
        if not statuses:
            return None
        sql = f"{_UPDATE} AND status IN ({', '.join('?' * len(statuses))}) RETURNING {', '.join(_COLUMNS)}"
        with self._db.write() as conn:
            rows = conn.execute(sql, (*_row(request)[1:], request_id, *statuses)).fetchall()
        return _request(rows[0]) if rows else None

    def close(self) -> None:
        """Close every connection this store opened; later calls raise ``ValueError``."""
        self._db.close()

    def __enter__(self) -> SqliteApprovalStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SqliteApprovalStore({str(self.path)!r})"

    @staticmethod
    def _first(conn: sqlite3.Connection, where: str, params: Sequence[str]) -> ApprovalRequest | None:
        row = conn.execute(f"{_SELECT} {where}", tuple(params)).fetchone()
        return _request(row) if row is not None else None


def _row(request: ApprovalRequest) -> tuple[Any, ...]:
    for name in ("created_at", "decided_at", "expires_at"):
        if (value := getattr(request, name)) is not None and math.isnan(value):
            # SQLite binds NaN as NULL, and a NULL expires_at reads back as "never expires"
            raise ValueError(f"approval request {request.id}: {name} is NaN, not a time")
    row = (
        request.id,
        request.run_id,
        request.node_id,
        request.tool,
        request.args_digest,
        to_json(request.arguments),
        to_json(request.provenance),
        to_json(request.effects),
        request.reason,
        to_json(request.details),
        request.status,
        request.created_at,
        request.decided_at,
        request.decided_by,
        request.decision_reason,
        request.expires_at,
        holder(request.details),
    )
    missing = [_STORED[i] for i in _NOT_NULL if row[i] is None]
    if missing:  # the insert would ignore the row rather than refuse it
        raise ValueError(f"approval request {request.id}: {', '.join(missing)} must not be None")
    return row


def _migrate(conn: sqlite3.Connection) -> None:
    """Bring a file of version 1 to :data:`SCHEMA_VERSION` (in the caller's write transaction), then
    make sure the pending index exists.

    Version 1 had no ``holder``: each request's is computed from its details; its index of one
    pending request per binding is replaced by one per binding and holder.
    """
    row = conn.execute("SELECT value FROM ledger_meta WHERE key = 'approval_schema_version'").fetchone()
    if int(row[0]) < 2:
        columns = {info[1] for info in conn.execute("PRAGMA table_info(approval_requests)")}
        if "holder" not in columns:
            conn.execute("ALTER TABLE approval_requests ADD COLUMN holder TEXT NOT NULL DEFAULT ''")
        rows = conn.execute("SELECT id, details FROM approval_requests").fetchall()
        conn.executemany(
            "UPDATE approval_requests SET holder = ? WHERE id = ?",
            [(holder(from_json(details)), request_id) for request_id, details in rows],
        )
        conn.execute("DROP INDEX IF EXISTS approval_requests_one_pending")
        conn.execute(
            "UPDATE ledger_meta SET value = ? WHERE key = 'approval_schema_version'", (str(SCHEMA_VERSION),)
        )
    conn.execute(_ONE_PENDING)


def _request(row: Sequence[Any]) -> ApprovalRequest:
    data = {c: from_json(v) if c in _JSON_COLUMNS else v for c, v in zip(_COLUMNS, row, strict=True)}
    return ApprovalRequest.from_dict(data)
