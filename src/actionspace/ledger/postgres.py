"""PostgreSQL ledger and approval stores: shared by many runtime processes and hosts (DESIGN §6, §10).

Every guarantee of the store interfaces is enforced by the database: ``(run_id, node_id)`` and
``key`` are unique constraints, one pending request per binding and holder (approval rule and
proposer) is a partial unique index, and a
compare-and-set is a single ``UPDATE … WHERE state = ANY(expected)`` whose row count says who won.
No Python lock is involved, so processes on different hosts race safely.

Each store holds a small connection pool (1 to 8 connections, opened on construction). Tables are
created if missing; the DDL runs under a transaction-scoped advisory lock so that many processes
starting at once against an empty database do not trip over each other.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Final, LiteralString

from psycopg.types.json import Jsonb

from actionspace._unicode import json_for_postgres, text_for_postgres
from actionspace.approval.requests import ApprovalRequest, holder
from actionspace.ledger._postgres_lost import statement_bound
from actionspace.ledger._postgres_moves import add_intent_nonce, begun, moved
from actionspace.ledger._postgres_tenants import add_listing_tenants, retried
from actionspace.ledger.entries import TERMINAL, Begun, LedgerEntry, with_identity
from actionspace.ledger.postgres_pool import READ_TIMEOUT_S, PostgresConnections, redacted

__all__ = [
    "ADMIN_TIMEOUT_S",
    "APPROVAL_SCHEMA_VERSION",
    "SCHEMA_VERSION",
    "PostgresApprovalStore",
    "PostgresConnections",
    "PostgresLedgerStore",
    "redacted",
]

SCHEMA_VERSION: Final = 1
"""Version of the ledger table; stored in ``ledger_meta`` under ``schema_version``."""
APPROVAL_SCHEMA_VERSION: Final = 2
"""Version of the approval table; stored in ``ledger_meta`` under ``approval_schema_version``.

2: the ``holder`` column, and one pending request per binding and holder (a database of version 1
is migrated when an approval store opens it)."""

ADMIN_TIMEOUT_S: Final = 900.0
"""How long, by default, an administration statement (``purge``) may run (seconds)."""
_MAX_RACE_RETRIES: Final = 8
"""How often ``create`` retries when the row it collided with vanished before being read."""

_META: Final = """
CREATE TABLE IF NOT EXISTS ledger_meta (
    key   text PRIMARY KEY,
    value text NOT NULL
)
"""

_LEDGER_SCHEMA: Final[tuple[LiteralString, ...]] = (
    _META,
    """
    CREATE TABLE IF NOT EXISTS ledger_entries (
        key         text             PRIMARY KEY,
        run_id      text             NOT NULL,
        node_id     text             NOT NULL,
        tool        text             NOT NULL,
        args_digest text             NOT NULL,
        arguments   jsonb            NOT NULL,
        state       text             NOT NULL,
        attempts    integer          NOT NULL,
        created_at  double precision NOT NULL,
        updated_at  double precision NOT NULL,
        remote_id   text,
        observation jsonb,
        error       jsonb,
        resolution  jsonb,
        UNIQUE (run_id, node_id)
    )
    """,
    "CREATE INDEX IF NOT EXISTS ledger_entries_state_updated ON ledger_entries (state, updated_at)",
    "CREATE INDEX IF NOT EXISTS ledger_entries_updated ON ledger_entries (updated_at)",
    "CREATE INDEX IF NOT EXISTS ledger_entries_action ON ledger_entries (run_id, tool, args_digest)",
)

_APPROVAL_SCHEMA: Final[tuple[LiteralString, ...]] = (
    _META,
    """
    CREATE TABLE IF NOT EXISTS approval_requests (
        id              text             PRIMARY KEY,
        run_id          text             NOT NULL,
        node_id         text             NOT NULL,
        tool            text             NOT NULL,
        args_digest     text             NOT NULL,
        arguments       jsonb            NOT NULL,
        provenance      jsonb            NOT NULL,
        effects         jsonb            NOT NULL,
        reason          text             NOT NULL,
        details         jsonb            NOT NULL,
        status          text             NOT NULL,
        created_at      double precision NOT NULL,
        decided_at      double precision,
        decided_by      text,
        decision_reason text,
        expires_at      double precision,
        holder          text             NOT NULL DEFAULT ''
    )
    """,
    "CREATE INDEX IF NOT EXISTS approval_requests_binding"
    " ON approval_requests (run_id, tool, args_digest, created_at)",
    "CREATE INDEX IF NOT EXISTS approval_requests_status_created ON approval_requests (status, created_at)",
)
_ONE_PENDING: Final = (
    "CREATE UNIQUE INDEX IF NOT EXISTS approval_requests_one_pending"
    " ON approval_requests (run_id, tool, args_digest, holder) WHERE status = 'pending'"
)
"""Created after the migration: a database of version 1 has an index of this name without ``holder``."""

_LEDGER_COLUMNS: Final = (
    "key, run_id, node_id, tool, args_digest, arguments, state, attempts, created_at, updated_at,"
    " remote_id, observation, error, resolution"
)
_LEDGER_SELECT: Final = "SELECT " + _LEDGER_COLUMNS + " FROM ledger_entries"
_LEDGER_OF_NODES: Final = _LEDGER_SELECT + " WHERE run_id = %s AND node_id = ANY(%s)"
_LEDGER_UPDATE: Final = (
    "UPDATE ledger_entries SET arguments = %(arguments)s, state = %(state)s,"
    " attempts = %(attempts)s, created_at = %(created_at)s, updated_at = %(updated_at)s,"
    " remote_id = %(remote_id)s, observation = %(observation)s, error = %(error)s,"
    " resolution = %(resolution)s"
    " WHERE key = %(where_key)s AND state = ANY(%(expected)s)"
    " RETURNING run_id, node_id, tool, args_digest"
)
"""A transition: the identity (run, node, tool, digest) stays the one begun, and is read back."""
_LEDGER_UPDATE_AT: Final = _LEDGER_UPDATE.replace(
    "state = ANY(%(expected)s)", "state = %(state_at)s AND attempts = %(attempts_at)s"
)

_APPROVAL_COLUMNS: Final = (
    "id, run_id, node_id, tool, args_digest, arguments, provenance, effects, reason, details, status,"
    " created_at, decided_at, decided_by, decision_reason, expires_at"
)
_APPROVAL_SELECT: Final = "SELECT " + _APPROVAL_COLUMNS + " FROM approval_requests"
_APPROVAL_INSERT: Final = (
    "INSERT INTO approval_requests (" + _APPROVAL_COLUMNS + ", holder) VALUES"
    " (%(id)s, %(run_id)s, %(node_id)s, %(tool)s, %(args_digest)s, %(arguments)s, %(provenance)s,"
    " %(effects)s, %(reason)s, %(details)s, %(status)s, %(created_at)s, %(decided_at)s,"
    " %(decided_by)s, %(decision_reason)s, %(expires_at)s, %(holder)s)"
    " ON CONFLICT DO NOTHING"
)
_APPROVAL_UPDATE: Final = (
    "UPDATE approval_requests SET run_id = %(run_id)s, node_id = %(node_id)s, tool = %(tool)s,"
    " args_digest = %(args_digest)s, arguments = %(arguments)s, provenance = %(provenance)s,"
    " effects = %(effects)s, reason = %(reason)s, details = %(details)s, status = %(status)s,"
    " created_at = %(created_at)s, decided_at = %(decided_at)s, decided_by = %(decided_by)s,"
    " decision_reason = %(decision_reason)s, expires_at = %(expires_at)s, holder = %(holder)s"
    " WHERE id = %(where_id)s AND status = ANY(%(expected)s)"
)
_BINDING: Final = "WHERE run_id = %s AND tool = %s AND args_digest = %s"
_PENDING: Final = _BINDING + " AND holder = %s AND status = 'pending'"
_EXPIRED: Final = "WHERE status = 'approved' AND expires_at <= %s"
_VALID: Final = "WHERE status = 'approved' AND (expires_at IS NULL OR expires_at > %s)"


class PostgresLedgerStore:
    """A :class:`~actionspace.ledger.entries.LedgerStore` in a PostgreSQL database.

    ``url`` is a libpq URL (``postgresql://user@host/db``); the tables are created if missing.
    Raises :class:`~actionspace.errors.ConfigurationError` when the database cannot be reached or
    was written by a newer schema version. ``read_timeout_s``: how long a statement waits for the
    server's answer before its connection is taken as cut (see ``PostgresConnections``).
    ``admin_timeout_s`` (default :data:`ADMIN_TIMEOUT_S`; None: no bound): how long :meth:`purge`
    may run, instead: past it the server cancels it (``QueryCanceled``; nothing deleted).
    """

    def __init__(
        self,
        url: str,
        *,
        connect_timeout_s: float = 10.0,
        read_timeout_s: float | None = READ_TIMEOUT_S,
        admin_timeout_s: float | None = ADMIN_TIMEOUT_S,
    ) -> None:
        self._admin_timeout_s = admin_timeout_s
        self._db = PostgresConnections(
            url, name="ledger", connect_timeout_s=connect_timeout_s, read_timeout_s=read_timeout_s
        )
        try:
            self._db.init_schema(
                _LEDGER_SCHEMA,
                meta_table="ledger_meta",
                meta_key="schema_version",
                version=SCHEMA_VERSION,
                what="the ledger",
            )
            add_intent_nonce(self._db)
        except BaseException:
            self._db.close()
            raise

    def begin(self, entry: LedgerEntry) -> Begun:
        """Insert ``entry`` unless its node (or key) is stored; return the stored entry."""
        return begun(self._db, entry, _ledger_params(entry))

    def transition(self, key: str, expected: Sequence[str], entry: LedgerEntry) -> LedgerEntry | None:
        """Store ``entry`` only if the state of ``key`` is in ``expected``; None when it is not.

        Raises ``ValueError`` when ``entry.key`` is not ``key``.
        """
        return self._update(key, entry, _LEDGER_UPDATE, {"expected": list(expected)})

    def transition_at(self, key: str, state: str, attempts: int, entry: LedgerEntry) -> LedgerEntry | None:
        """:meth:`transition` from ``state`` only while the entry still counts ``attempts`` sends."""
        return self._update(key, entry, _LEDGER_UPDATE_AT, {"state_at": state, "attempts_at": attempts})

    def _update(
        self, key: str, entry: LedgerEntry, sql: LiteralString, guard: dict[str, Any]
    ) -> LedgerEntry | None:
        if entry.key != key:
            raise ValueError(f"transition of {key} was given the entry of {entry.key}")
        params = {**_ledger_params(entry), "where_key": key, **guard}
        row = moved(self._db, sql, params, (entry.state, entry.attempts, entry.updated_at, entry.remote_id))
        if row is None:
            return None
        return with_identity(entry, (row["run_id"], row["node_id"], row["tool"], row["args_digest"]))

    def get(self, key: str) -> LedgerEntry | None:
        return self._one(_LEDGER_SELECT + " WHERE key = %s", (key,))

    def get_node(self, run_id: str, node_id: str) -> LedgerEntry | None:
        return self._one(_LEDGER_SELECT + " WHERE run_id = %s AND node_id = %s", (run_id, node_id))

    def entries_of(self, run_id: str, node_ids: Collection[str]) -> dict[str, LedgerEntry]:
        nodes = list(dict.fromkeys(node_ids))
        if not nodes:
            return {}
        with self._db.connection() as conn:
            cur = conn.execute(_LEDGER_OF_NODES, (run_id, nodes))
            entries = [LedgerEntry.from_dict(row) for row in cur]
        return {e.node_id: e for e in entries}

    def pending_action(self, run_id: str, tool: str, args_digest: str) -> LedgerEntry | None:
        return self._one(
            _LEDGER_SELECT + " WHERE run_id = %s AND tool = %s AND args_digest = %s"
            " AND state IN ('dispatched', 'unknown', 'unknown_commit') ORDER BY created_at LIMIT 1",
            (run_id, tool, args_digest),
        )

    def list(self, *, state: str | None = None, limit: int = 100) -> list[LedgerEntry]:
        """At most ``limit`` entries (those in ``state`` if given), most recently updated first."""
        with self._db.connection() as conn:
            if state is None:
                cur = conn.execute(_LEDGER_SELECT + " ORDER BY updated_at DESC, key LIMIT %s", (limit,))
            else:
                cur = conn.execute(
                    _LEDGER_SELECT + " WHERE state = %s ORDER BY updated_at DESC, key LIMIT %s",
                    (state, limit),
                )
            return [LedgerEntry.from_dict(row) for row in cur]

    def tenant_entries(
        self, tenant: str | None, *, state: str | None = None, limit: int = 100
    ) -> builtins.list[LedgerEntry] | None:
        """:meth:`list` of the entries of ``tenant``'s runs only, through the tenant index
        (``_postgres_tenants``; see ``ListsTenantEntries``); None for a database without its runs' trace."""
        if not add_listing_tenants(self._db, indexes=False):
            return None
        if tenant is not None and text_for_postgres(tenant) != tenant:
            return []  # U+0000 or an unpaired surrogate: no stored tenant holds one
        which: LiteralString = "tenant IS NULL" if tenant is None else "tenant = %(tenant)s"
        if state is not None:
            which += " AND state = %(state)s"
        query = _LEDGER_SELECT + " WHERE " + which + " ORDER BY updated_at DESC, key LIMIT %(limit)s"
        with self._db.connection() as conn:
            cur = conn.execute(query, {"tenant": tenant, "state": state, "limit": limit})
            return [LedgerEntry.from_dict(row) for row in cur]

    def purge(self, *, older_than: float) -> int:
        """Delete committed and failed entries last updated before ``older_than`` (unix s), in one
        statement bounded by ``admin_timeout_s``, not by the read timeout (``statement_bound``)."""
        with self._db.transaction() as conn, statement_bound(conn, self._admin_timeout_s):
            cur = conn.execute(
                "DELETE FROM ledger_entries WHERE state = ANY(%s) AND updated_at < %s",
                (sorted(TERMINAL), older_than),
            )
            return cur.rowcount

    def close(self) -> None:
        """Close the connection pool; later calls raise ``ValueError``."""
        self._db.close()

    def __enter__(self) -> PostgresLedgerStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PostgresLedgerStore({redacted(self._db.url)!r})"

    def _one(self, sql: LiteralString, params: Sequence[str]) -> LedgerEntry | None:
        with self._db.connection() as conn:
            row = conn.execute(sql, params).fetchone()
        return LedgerEntry.from_dict(row) if row is not None else None


class PostgresApprovalStore:
    """An :class:`~actionspace.approval.requests.ApprovalStore` in a PostgreSQL database.

    Same URL, pool and errors as :class:`PostgresLedgerStore`; the two may share one database.
    """

    def __init__(
        self, url: str, *, connect_timeout_s: float = 10.0, read_timeout_s: float | None = READ_TIMEOUT_S
    ) -> None:
        self._db = PostgresConnections(
            url, name="approvals", connect_timeout_s=connect_timeout_s, read_timeout_s=read_timeout_s
        )
        try:
            self._db.init_schema(
                _APPROVAL_SCHEMA,
                meta_table="ledger_meta",
                meta_key="approval_schema_version",
                version=APPROVAL_SCHEMA_VERSION,
                what="the approval store",
            )
            retried(self._db, _migrate_approvals)  # a concurrent index build may choose it
            add_listing_tenants(self._db)  # the database's stores are opened: its tables are all there
        except BaseException:
            self._db.close()
            raise

    def create(self, request: ApprovalRequest) -> ApprovalRequest:
        """Store ``request``, or return the pending request with its binding (or its id) instead."""
        with self._db.connection() as conn:
            for _ in range(_MAX_RACE_RETRIES):
                if conn.execute(_APPROVAL_INSERT, _approval_params(request)).rowcount == 1:
                    return request
                row = conn.execute(_APPROVAL_SELECT + " " + _PENDING, request.pending_key).fetchone()
                if row is None:
                    row = conn.execute(_APPROVAL_SELECT + " WHERE id = %s", (request.id,)).fetchone()
                if row is not None:
                    return ApprovalRequest.from_dict(row)
        raise RuntimeError(f"approval request {request.id} kept being decided while it was created")

    def get(self, request_id: str) -> ApprovalRequest | None:
        with self._db.connection() as conn:
            row = conn.execute(_APPROVAL_SELECT + " WHERE id = %s", (request_id,)).fetchone()
        return ApprovalRequest.from_dict(row) if row is not None else None

    def find(self, run_id: str, tool: str, args_digest: str) -> list[ApprovalRequest]:
        """Requests with this binding, newest first."""
        with self._db.connection() as conn:
            cur = conn.execute(
                _APPROVAL_SELECT + " " + _BINDING + " ORDER BY created_at DESC, id",
                (run_id, tool, args_digest),
            )
            return [ApprovalRequest.from_dict(row) for row in cur]

    def list_approved(self, *, expired: bool, now: float, limit: int = 100) -> list[ApprovalRequest]:
        """See :class:`~actionspace.approval.requests.ListsApproved`: the expiry is compared in the query."""
        where = _EXPIRED if expired else _VALID
        with self._db.connection() as conn:
            cur = conn.execute(
                _APPROVAL_SELECT + " " + where + " ORDER BY created_at DESC, id LIMIT %s", (now, limit)
            )
            return [ApprovalRequest.from_dict(row) for row in cur]

    def list_of_runs(self, run_ids: Sequence[str], *, status: str | None = None) -> list[ApprovalRequest]:
        """See :class:`~actionspace.approval.requests.ListsOfRuns`: one query, through the binding index."""
        ids = [r for r in dict.fromkeys(run_ids) if text_for_postgres(r) == r]  # else no run holds it
        with self._db.connection() as conn:
            cur = conn.execute(
                _APPROVAL_SELECT + " WHERE run_id = ANY(%s) AND (%s::text IS NULL OR status = %s)"
                " ORDER BY created_at DESC, id",
                (ids, status, status),
            )
            return [ApprovalRequest.from_dict(row) for row in cur]

    def list(self, *, status: str | None = None, limit: int = 100) -> list[ApprovalRequest]:
        """At most ``limit`` requests (those in ``status`` if given), newest first."""
        with self._db.connection() as conn:
            if status is None:
                cur = conn.execute(_APPROVAL_SELECT + " ORDER BY created_at DESC, id LIMIT %s", (limit,))
            else:
                cur = conn.execute(
                    _APPROVAL_SELECT + " WHERE status = %s ORDER BY created_at DESC, id LIMIT %s",
                    (status, limit),
                )
            return [ApprovalRequest.from_dict(row) for row in cur]

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
        indexes (``_postgres_tenants``); None for a database without its runs' trace."""
        if not add_listing_tenants(self._db, indexes=False):
            return None
        if tenant is not None and text_for_postgres(tenant) != tenant:
            return []  # U+0000 or an unpaired surrogate: no stored tenant holds one
        which: LiteralString = "tenant IS NULL" if tenant is None else "tenant = %(tenant)s"
        if status == "approved" and expired is not None:
            which += (
                " AND status = 'approved' AND expires_at <= %(now)s"
                if expired
                else " AND status = 'approved' AND (expires_at IS NULL OR expires_at > %(now)s)"
            )
        elif status is not None:
            which += " AND status = %(status)s"
        query = _APPROVAL_SELECT + " WHERE " + which + " ORDER BY created_at DESC, id LIMIT %(limit)s"
        params = {"tenant": tenant, "status": status, "now": now, "limit": limit}
        with self._db.connection() as conn:
            return [ApprovalRequest.from_dict(row) for row in conn.execute(query, params)]

    def update(
        self, request_id: str, expected: Sequence[str], request: ApprovalRequest
    ) -> ApprovalRequest | None:
        """Store ``request`` only if the status of ``request_id`` is in ``expected``; None when not.

        Raises ``ValueError`` when ``request.id`` is not ``request_id``.
        """
        if request.id != request_id:
            raise ValueError(f"update of {request_id} was given the request {request.id}")
        params = {**_approval_params(request), "where_id": request_id, "expected": list(expected)}
        with self._db.connection() as conn:
            updated = conn.execute(_APPROVAL_UPDATE, params).rowcount
        return request if updated == 1 else None

    def close(self) -> None:
        """Close the connection pool; later calls raise ``ValueError``."""
        self._db.close()

    def __enter__(self) -> PostgresApprovalStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PostgresApprovalStore({redacted(self._db.url)!r})"


def _ledger_params(entry: LedgerEntry) -> dict[str, Any]:
    data = entry.to_dict()
    for column in ("arguments", "observation", "error", "resolution"):
        data[column] = _jsonb(data[column])
    return data


def _approval_params(request: ApprovalRequest) -> dict[str, Any]:
    data = request.to_dict()
    for column in ("arguments", "provenance", "effects", "details"):
        data[column] = _jsonb(data[column])
    data["holder"] = holder(request.details)
    return data


def _migrate_approvals(conn: Any) -> None:
    """Bring a database of version 1 to :data:`APPROVAL_SCHEMA_VERSION` (in the caller's transaction,
    the version's row locked, so one process migrates), then make sure the pending index exists.

    Version 1 had no ``holder``: each request's is computed from its details; its index of one
    pending request per binding is replaced by one per binding and holder.
    """
    row = conn.execute(
        "SELECT value FROM ledger_meta WHERE key = 'approval_schema_version' FOR UPDATE"
    ).fetchone()
    if int(row["value"]) < 2:
        conn.execute("ALTER TABLE approval_requests ADD COLUMN IF NOT EXISTS holder text NOT NULL DEFAULT ''")
        rows = conn.execute("SELECT id, details FROM approval_requests").fetchall()
        conn.cursor().executemany(
            "UPDATE approval_requests SET holder = %s WHERE id = %s",
            [(holder(r["details"]), r["id"]) for r in rows],
        )
        conn.execute("DROP INDEX IF EXISTS approval_requests_one_pending")
        conn.execute(
            "UPDATE ledger_meta SET value = %s WHERE key = 'approval_schema_version'",
            (str(APPROVAL_SCHEMA_VERSION),),
        )
    conn.execute(_ONE_PENDING)


def _jsonb(value: Mapping[str, Any] | Sequence[Any] | None) -> Jsonb | None:
    return None if value is None else Jsonb(value, dumps=_strict_dumps)


def _strict_dumps(value: Any) -> str:
    # NaN is not JSON: never stored; jsonb holds no U+0000 and no unpaired surrogate
    return json_for_postgres(json.dumps(value, ensure_ascii=False, allow_nan=False))
