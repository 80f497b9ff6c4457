"""The tenant of each ledger entry and approval request of a PostgreSQL database, for listings by tenant.

As ``_sqlite_tenants`` for a SQLite file: ``ledger_entries.tenant`` holds the tenant of the entry's
run, ``approval_requests.tenant`` its proposer's (``details.proposed_by.tenant``, when recorded),
else its run's; a run's tenant is ``trace_runs.tenant`` (``trace/_postgres_runs.py``). Triggers set
them as a row is written (``BEFORE INSERT``: in the row itself, no second write) and when a run's
tenant becomes known after its rows were written; an index per listing makes one tenant's page cost
a page.

The migration, when a store first opens a database holding the three tables, runs in two steps:

1. one transaction under an advisory lock (one process at a time; the others find it done): the
   columns (nullable, no default: no table rewrite), the functions and triggers, and the columns
   filled in from the rows stored (only the rows of runs with a tenant are written);
2. the indexes, each built with ``CREATE INDEX CONCURRENTLY`` (writers are not blocked while it
   reads the table), outside a transaction, by one process: the one that takes a session advisory
   lock without waiting for it (waiting for a lock, a process would hold a snapshot the concurrent
   build waits for). An index a killed build left invalid is dropped and built again by the next
   opener. Until an index is valid the listings are right, only read more rows.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, Final, LiteralString

import psycopg
from psycopg import sql

from actionspace.ledger._postgres_lost import unbounded
from actionspace.ledger.postgres_pool import PostgresConnections, deadlock_retried

__all__ = ["INDEXES", "add_listing_tenants", "build_concurrently", "retried"]

_FUNCTIONS: Final[tuple[LiteralString, ...]] = (
    """
    CREATE OR REPLACE FUNCTION listing_request_tenant(details jsonb, rid text) RETURNS text
    LANGUAGE sql STABLE SET search_path FROM CURRENT AS $$
        SELECT CASE WHEN jsonb_typeof(details -> 'proposed_by') = 'object'
                         AND (details -> 'proposed_by') ? 'tenant'
                    THEN CASE jsonb_typeof(details -> 'proposed_by' -> 'tenant')
                         WHEN 'boolean' THEN initcap(details -> 'proposed_by' ->> 'tenant')
                         ELSE details -> 'proposed_by' ->> 'tenant' END
                    ELSE (SELECT tenant FROM trace_runs WHERE run_id = rid) END
    $$
    """,
    """
    CREATE OR REPLACE FUNCTION ledger_entries_set_tenant() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
    BEGIN
        NEW.tenant := (SELECT tenant FROM trace_runs WHERE run_id = NEW.run_id);
        RETURN NEW;
    END
    $$
    """,
    """
    CREATE OR REPLACE FUNCTION approval_requests_set_tenant() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
    BEGIN
        NEW.tenant := listing_request_tenant(NEW.details, NEW.run_id);
        RETURN NEW;
    END
    $$
    """,
    """
    CREATE OR REPLACE FUNCTION trace_runs_tenant_to_listings() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
    BEGIN
        UPDATE ledger_entries SET tenant = NEW.tenant
        WHERE run_id = NEW.run_id AND tenant IS DISTINCT FROM NEW.tenant;
        UPDATE approval_requests SET tenant = listing_request_tenant(details, run_id)
        WHERE run_id = NEW.run_id AND tenant IS DISTINCT FROM listing_request_tenant(details, run_id);
        RETURN NULL;
    END
    $$
    """,
)
_TRIGGERS: Final[tuple[LiteralString, ...]] = (
    """
    CREATE OR REPLACE TRIGGER ledger_entries_tenant_of_new BEFORE INSERT ON ledger_entries
    FOR EACH ROW EXECUTE FUNCTION ledger_entries_set_tenant()
    """,
    """
    CREATE OR REPLACE TRIGGER approval_requests_tenant_of_new
    BEFORE INSERT OR UPDATE OF details, run_id ON approval_requests
    FOR EACH ROW EXECUTE FUNCTION approval_requests_set_tenant()
    """,
    """
    CREATE OR REPLACE TRIGGER trace_runs_tenant_to_listings_new AFTER INSERT ON trace_runs
    FOR EACH ROW WHEN (NEW.tenant IS NOT NULL) EXECUTE FUNCTION trace_runs_tenant_to_listings()
    """,
    """
    CREATE OR REPLACE TRIGGER trace_runs_tenant_to_listings_moved AFTER UPDATE OF tenant ON trace_runs
    FOR EACH ROW WHEN (NEW.tenant IS DISTINCT FROM OLD.tenant)
    EXECUTE FUNCTION trace_runs_tenant_to_listings()
    """,
)
_TRIGGER_NAMES: Final = (
    "ledger_entries_tenant_of_new",
    "approval_requests_tenant_of_new",
    "trace_runs_tenant_to_listings_new",
    "trace_runs_tenant_to_listings_moved",
)
INDEXES: Final[tuple[tuple[str, LiteralString], ...]] = (
    (
        "ledger_entries_tenant_updated",
        "ledger_entries (tenant, updated_at DESC, key)",
    ),
    (
        "approval_requests_tenant_created",
        "approval_requests (tenant, created_at DESC, id)",
    ),
    (
        "approval_requests_tenant_status",
        "approval_requests (tenant, status, created_at DESC, id)",
    ),
)
_STATE: Final = """
SELECT to_regclass('trace_runs') IS NOT NULL AND to_regclass('ledger_entries') IS NOT NULL
       AND to_regclass('approval_requests') IS NOT NULL
       AND EXISTS (SELECT FROM pg_attribute WHERE attrelid = to_regclass('trace_runs')
                   AND attname = 'tenant' AND NOT attisdropped) AS ready,
       (SELECT count(*) FROM pg_attribute
         WHERE attrelid IN (to_regclass('ledger_entries'), to_regclass('approval_requests'))
           AND attname = 'tenant' AND NOT attisdropped) = 2 AS col,
       (SELECT count(*) FROM pg_trigger WHERE tgname = ANY(%(triggers)s)
           AND tgrelid IN (to_regclass('ledger_entries'), to_regclass('approval_requests'),
                           to_regclass('trace_runs'))) AS triggers,
       (SELECT count(*) FROM pg_index WHERE indisvalid
           AND indexrelid IN (SELECT to_regclass(n) FROM unnest(%(indexes)s::text[]) AS n)) AS indexes
"""
_LOCK: Final = "SELECT pg_advisory_xact_lock(hashtextextended('actionspace.listing_tenants', 0))"
_BUILD_LOCK: Final = "SELECT pg_try_advisory_lock(hashtextextended(%s, 0)) AS got"
_BUILD_UNLOCK: Final = "SELECT pg_advisory_unlock(hashtextextended(%s, 0))"


_KNOWN: weakref.WeakSet[PostgresConnections] = weakref.WeakSet()
"""Pools whose database was found with its columns and triggers (they are never taken away)."""


def add_listing_tenants(db: PostgresConnections, *, indexes: bool = True) -> bool:
    """Give the database the tenant columns, triggers and (with ``indexes``) indexes when it lacks
    any; True when the listings may use the columns (an index may still be being built elsewhere).

    False, nothing changed, when one of ``ledger_entries``, ``approval_requests`` and ``trace_runs``
    (with its tenant) is missing. A listing passes ``indexes=False``: it never waits for a build.
    """
    if db in _KNOWN and not indexes:
        return True
    found = _state(db)
    if not found["ready"]:
        return False
    if not (found["col"] and found["triggers"] == len(_TRIGGER_NAMES)):
        _columns_and_triggers(db)
        found = _state(db)
    _KNOWN.add(db)
    if indexes and found["indexes"] < len(INDEXES):
        for name, on in INDEXES:
            build_concurrently(db, name, on)
    return True


def _state(db: PostgresConnections) -> dict[str, Any]:
    params = {"triggers": list(_TRIGGER_NAMES), "indexes": [name for name, _ in INDEXES]}
    with db.connection() as conn:
        row = conn.execute(_STATE, params).fetchone()
    assert row is not None  # one row, always
    return row


def _columns_and_triggers(db: PostgresConnections) -> None:
    retried(db, _migrate)


def _migrate(conn: psycopg.Connection[Any]) -> None:
    conn.execute(_LOCK)
    params = {"triggers": list(_TRIGGER_NAMES), "indexes": []}
    found = conn.execute(_STATE, params).fetchone()
    if found is None or (found["col"] and found["triggers"] == len(_TRIGGER_NAMES)):
        return
    conn.execute("ALTER TABLE ledger_entries ADD COLUMN IF NOT EXISTS tenant text")
    conn.execute("ALTER TABLE approval_requests ADD COLUMN IF NOT EXISTS tenant text")
    for statement in _FUNCTIONS:
        conn.execute(statement)
    # filled in before the triggers exist, in the same transaction: no row is written between
    conn.execute(
        "UPDATE ledger_entries AS e SET tenant = r.tenant FROM trace_runs AS r"
        " WHERE r.run_id = e.run_id AND e.tenant IS DISTINCT FROM r.tenant"
    )
    conn.execute(
        "UPDATE approval_requests SET tenant = listing_request_tenant(details, run_id)"
        " WHERE tenant IS DISTINCT FROM listing_request_tenant(details, run_id)"
    )
    for statement in _TRIGGERS:
        conn.execute(statement)


def build_concurrently(db: PostgresConnections, name: str, on: LiteralString) -> bool:
    """``CREATE INDEX CONCURRENTLY name ON on`` unless a valid index ``name`` exists, by the one
    process that takes the index's session advisory lock without waiting (the others go on: the
    index is only for speed, and the process holding the lock builds it). An invalid index (a build
    that was killed) is dropped first, concurrently too. True when the index is valid after.

    A concurrent build waits for every transaction older than it: one of those waiting for the
    build's table lock (another process creating its schema) makes a deadlock PostgreSQL ends by
    choosing one; when it is the build, it is tried again a few times, then left to the next opener.
    """
    lock = f"actionspace.index.{name}"
    with db.connection() as conn, unbounded(conn):
        got = conn.execute(_BUILD_LOCK, (lock,)).fetchone()
        if got is None or not got["got"]:
            return False
        try:
            return deadlock_retried(lambda: _build(conn, name, on))
        except psycopg.errors.DeadlockDetected:
            return False  # left to the next opener
        finally:
            conn.execute(_BUILD_UNLOCK, (lock,))


def _build(conn: psycopg.Connection[Any], name: str, on: LiteralString) -> bool:
    row = conn.execute(
        "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)", (name,)
    ).fetchone()
    if row is not None and row["indisvalid"]:
        return True
    if row is not None:
        conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(sql.Identifier(name)))
    build = sql.SQL("CREATE INDEX CONCURRENTLY IF NOT EXISTS {} ON {}")
    conn.execute(build.format(sql.Identifier(name), sql.SQL(on)))
    return True


def retried(db: PostgresConnections, migrate: Callable[[psycopg.Connection[Any]], None]) -> None:
    """Run ``migrate(conn)`` in a transaction, again when PostgreSQL's deadlock detector chose it: a
    concurrent index build waits for every older transaction, and one waiting for that index's
    table lock (``CREATE INDEX IF NOT EXISTS`` takes it) closes a circle."""

    def step() -> None:
        with db.transaction() as conn, unbounded(conn):
            migrate(conn)

    deadlock_retried(step)
