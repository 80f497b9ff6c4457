"""The tenant of each ledger entry and approval request of an SQLite file, for listings by tenant.

``ledger_entries.tenant`` holds the tenant of the entry's run; ``approval_requests.tenant`` the
tenant of the request as the service reads it: its proposer's (``details.proposed_by.tenant``,
when recorded), else its run's. A run's tenant is the one the trace store keeps in
``trace_runs.tenant`` (``trace/_sqlite_runs.py``), in the same file. Triggers in the file set them
when a row is written and when a run's tenant becomes known after its rows were written (its
``run_started`` recorded later), so every writer of the file, of this version or an earlier one
that knows nothing of the columns, keeps them right. An index per listing (``(tenant, updated_at,
key)`` for the ledger; ``(tenant, created_at, id)`` and ``(tenant, status, created_at, id)`` for
the approvals) makes one tenant's page cost what a page of every row costs, however many rows
other tenants have. The ledger's index holds only entries with a tenant, so a durable call of a
run without one writes no more B-trees than before (the entries of no tenant are listed by the
caller's filter, the store answering None).

The columns, indexes and triggers are added when a store opens a file holding all three tables
(the trace's ``trace_runs`` with its tenant), filled in from the rows stored, in one write
transaction (read first, so a file that has them is not written to). The change is additive: the
schema versions stay. A file lacking one of the tables (a ledger kept apart from its trace) is not
changed, and its stores answer a listing by tenant with None: the caller filters.

A tenant recorded as something other than text (a trace edited by hand) is kept as its text, as
``trace/_sqlite_runs.py`` keeps a run's; the service judges each row again and shows such a row to
no tenant's principal (see ``service/scoping.py``).
"""

from __future__ import annotations

import sqlite3
import weakref
from typing import Final

from actionspace.ledger._connections import SqliteConnections

__all__ = ["LEDGER_TENANT", "add_listing_tenants", "approvals_of_tenant", "has_listing_tenants"]

_PROPOSED: Final = (
    "(json_valid({d}) AND json_type({d}, '$.proposed_by') = 'object'"
    " AND json_type({d}, '$.proposed_by.tenant') IS NOT NULL)"
)
"""True when the request's details record its proposer's tenant (JSON null included: no tenant)."""
_PROPOSER_TENANT: Final = (
    "CASE json_type({d}, '$.proposed_by.tenant') WHEN 'true' THEN 'True' WHEN 'false' THEN 'False'"
    " ELSE CAST(json_extract({d}, '$.proposed_by.tenant') AS TEXT) END"
)
_RUN_TENANT: Final = "(SELECT tenant FROM trace_runs WHERE run_id = {r})"


def _request_tenant(details: str, run: str) -> str:
    proposed, of_proposer = _PROPOSED.format(d=details), _PROPOSER_TENANT.format(d=details)
    return f"CASE WHEN {proposed} THEN {of_proposer} ELSE {_RUN_TENANT.format(r=run)} END"


_INDEXES: Final = (
    # partial: an entry of a run without a tenant (every entry of a single-tenant deployment) is
    # written to no more B-trees than before; a listing of no tenant's entries is filtered instead
    "CREATE INDEX IF NOT EXISTS ledger_entries_tenant_updated"
    " ON ledger_entries (tenant, updated_at DESC, key) WHERE tenant IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS approval_requests_tenant_created"
    " ON approval_requests (tenant, created_at DESC, id)",
    "CREATE INDEX IF NOT EXISTS approval_requests_tenant_status"
    " ON approval_requests (tenant, status, created_at DESC, id)",
)
_TRIGGERS: Final = (
    # an entry of a run whose tenant is known: set in the insert's own transaction (a run without
    # one, the single-tenant case, costs the lookup only)
    f"""
    CREATE TRIGGER IF NOT EXISTS ledger_entries_tenant_of_new AFTER INSERT ON ledger_entries
    WHEN {_RUN_TENANT.format(r="NEW.run_id")} IS NOT NULL
    BEGIN UPDATE ledger_entries SET tenant = {_RUN_TENANT.format(r="NEW.run_id")} WHERE key = NEW.key; END
    """,
    f"""
    CREATE TRIGGER IF NOT EXISTS approval_requests_tenant_of_new AFTER INSERT ON approval_requests
    BEGIN UPDATE approval_requests SET tenant = {_request_tenant("NEW.details", "NEW.run_id")}
          WHERE id = NEW.id; END
    """,
    f"""
    CREATE TRIGGER IF NOT EXISTS approval_requests_tenant_of_change
    AFTER UPDATE OF details, run_id ON approval_requests
    WHEN NEW.details IS NOT OLD.details OR NEW.run_id IS NOT OLD.run_id
    BEGIN UPDATE approval_requests SET tenant = {_request_tenant("NEW.details", "NEW.run_id")}
          WHERE id = NEW.id; END
    """,
    # a run's tenant known after its rows were written (its run_started recorded later)
    *(
        f"""
        CREATE TRIGGER IF NOT EXISTS trace_runs_tenant_to_listings_{name} {event} ON trace_runs
        WHEN {when}
        BEGIN
            UPDATE ledger_entries SET tenant = NEW.tenant
            WHERE run_id = NEW.run_id AND tenant IS NOT NEW.tenant;
            UPDATE approval_requests SET tenant = NEW.tenant
            WHERE run_id = NEW.run_id AND tenant IS NOT NEW.tenant AND NOT {_PROPOSED.format(d="details")};
        END
        """
        for name, event, when in (
            ("new", "AFTER INSERT", "NEW.tenant IS NOT NULL"),
            ("moved", "AFTER UPDATE OF tenant", "NEW.tenant IS NOT OLD.tenant"),
        )
    ),
)
_NAMES: Final = (
    "ledger_entries_tenant_updated",
    "approval_requests_tenant_created",
    "approval_requests_tenant_status",
    "ledger_entries_tenant_of_new",
    "approval_requests_tenant_of_new",
    "approval_requests_tenant_of_change",
    "trace_runs_tenant_to_listings_new",
    "trace_runs_tenant_to_listings_moved",
)

LEDGER_TENANT: Final = "WHERE tenant = ?"
"""The ledger listing's narrowing to one tenant (``=``, which the partial index answers: the
entries of runs without a tenant are not in it, and are not listed so)."""


def has_listing_tenants(conn: sqlite3.Connection) -> bool:
    """True when the file has the columns, indexes and triggers (the listings may use them)."""
    marks = ", ".join("?" * len(_NAMES))
    found = conn.execute(f"SELECT count(*) FROM sqlite_master WHERE name IN ({marks})", _NAMES).fetchone()
    return bool(
        found[0] == len(_NAMES)
        and "tenant" in _columns(conn, "ledger_entries")
        and "tenant" in _columns(conn, "approval_requests")
    )


_KNOWN: weakref.WeakSet[SqliteConnections] = weakref.WeakSet()
"""Connections whose file was found with the columns, indexes and triggers (never taken away)."""


def add_listing_tenants(db: SqliteConnections) -> bool:
    """Give the file the tenant columns, indexes and triggers when it lacks any; True when it has them.

    False, the file unchanged, when it lacks one of ``ledger_entries``, ``approval_requests`` and
    ``trace_runs`` (with its tenant). Safe against processes opening the file at once: the check is
    made again inside the write transaction, and a column is added only where missing.
    """
    if db in _KNOWN:
        return True
    if has_listing_tenants(db.conn()):
        _KNOWN.add(db)
        return True
    if not _ready(db.conn()):
        return False
    with db.write() as conn:
        if has_listing_tenants(conn):
            _KNOWN.add(db)
            return True
        for table in ("ledger_entries", "approval_requests"):
            if "tenant" not in _columns(conn, table):
                conn.execute(f"ALTER TABLE {table} ADD COLUMN tenant TEXT")
        # filled in before the triggers exist, in the same transaction: no row is written between
        conn.execute(
            f"UPDATE ledger_entries SET tenant = {_RUN_TENANT.format(r='ledger_entries.run_id')}"
            " WHERE tenant IS NOT " + _RUN_TENANT.format(r="ledger_entries.run_id")
        )
        conn.execute(
            "UPDATE approval_requests SET tenant = "
            + _request_tenant("approval_requests.details", "approval_requests.run_id")
        )
        for statement in (*_INDEXES, *_TRIGGERS):
            conn.execute(statement)
    _KNOWN.add(db)
    return True


def approvals_of_tenant(status: str | None, approved: str | None) -> str:
    """The ``WHERE`` of one tenant's requests (its first parameter the tenant): with ``status`` (a
    parameter follows), or ``approved`` (the expiry test of approved requests, its time following)."""
    if approved is not None:
        return f"WHERE tenant IS ? AND {approved.removeprefix('WHERE ')}"
    return "WHERE tenant IS ? AND status = ?" if status is not None else "WHERE tenant IS ?"


def _ready(conn: sqlite3.Connection) -> bool:
    return "tenant" in _columns(conn, "trace_runs") and all(
        _columns(conn, table) for table in ("ledger_entries", "approval_requests")
    )


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {str(info[1]) for info in conn.execute(f"PRAGMA table_info({table})")}
