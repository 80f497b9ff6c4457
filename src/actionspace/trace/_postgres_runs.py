"""The tenant each run of the PostgreSQL trace store is listed under, and one tenant's listing.

``trace_runs.tenant`` holds the tenant of a run's first ``run_started`` (by ``seq``; its ``seq`` in
``started_seq``): NULL for a run started without one, or with no ``run_started``. Triggers in the
database keep them, so every writer (this version's, or an earlier one's, which knows nothing of
the columns) keeps them right: one fires when a run's row is made, one when its row moves (each
write of its events) and its first ``run_started`` is not the one the row names (one written after
the row was made). An index on
``(tenant, last_at, run_id)`` makes one tenant's page cost what a page of every run costs, however
many runs other tenants have. A database made before the column had it is given it, filled in from
the events already stored, in one transaction when a store first opens it; its indexes are built
concurrently, outside it (see :func:`add_run_tenants`).

A tenant recorded as something other than text (a trace edited by hand) is kept as its JSON text,
``true``/``false`` as ``True``/``False`` (as Python writes them).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Final, LiteralString

import psycopg

from actionspace._unicode import text_for_postgres
from actionspace.ledger._postgres_tenants import build_concurrently, retried
from actionspace.ledger.postgres_pool import PostgresConnections
from actionspace.trace._runs_events import RunEvents, checked_page, grouped_runs
from actionspace.trace._stored_rows import stored_event

__all__ = [
    "CALL_EVENTS",
    "HEADS",
    "HEADS_MANY",
    "RUNS",
    "RUNS_AFTER",
    "add_run_tenants",
    "streamed_runs",
    "tenant_runs_query",
]

HEADS: Final = (
    "SELECT run_id, seq, kind, ts, call_id, data FROM trace_events"
    " WHERE run_id = %s AND kind IN ('run_started', 'run_finished') ORDER BY seq"
)
"""A run's head events (``store_encoding.HEAD_KINDS``, written out so the planner matches the
partial index ``trace_events_heads``, whose predicate names them as constants)."""
HEADS_MANY: Final = (
    "SELECT run_id, seq, kind, ts, call_id, data FROM trace_events"
    " WHERE run_id = ANY(%s) AND kind IN ('run_started', 'run_finished') ORDER BY run_id, seq"
)
CALL_EVENTS: Final = (
    "SELECT run_id, seq, kind, ts, call_id, data FROM trace_events"
    " WHERE run_id = %s AND call_id = ANY(%s) AND kind = ANY(%s) ORDER BY seq"
)
"""Some calls' events of some kinds (``_call_events.ReadsCallEvents``): a seek per call of the
partial index ``trace_events_calls`` (``call_id = ANY`` implies its ``call_id IS NOT NULL``)."""
EVENTS_OF_RUNS: Final = (
    "SELECT e.run_id, e.seq, e.kind, e.ts, e.call_id, e.data"
    " FROM unnest(%s::text[]) WITH ORDINALITY AS r(run_id, n) JOIN trace_events AS e ON e.run_id = r.run_id"
    " ORDER BY r.n, e.seq"
)
"""Many runs' events (``_runs_events.ReadsManyRuns``), a run's together, the runs in the array's order."""
RUNS: Final = """
SELECT r.run_id, r.started_at, r.last_at,
       count(*) AS events,
       count(*) FILTER (WHERE e.kind = 'observation'
                        AND NOT coalesce(e.call_id = e.run_id || ':' || (e.data ->> 'group'), false)
                        AND NOT (e.data ? 'rolled_back' AND e.data ? 'group')) AS calls,
       count(*) FILTER (WHERE e.kind = 'observation' AND e.data ->> 'status' = 'error'
                        AND NOT coalesce(e.call_id = e.run_id || ':' || (e.data ->> 'group'), false)
                       ) AS errors,
       bool_or(e.kind = 'run_finished') AS finished
FROM (SELECT run_id, started_at, last_at FROM trace_runs WHERE last_at >= %s
      ORDER BY last_at DESC, run_id COLLATE "C" LIMIT %s) AS r
JOIN trace_events AS e ON e.run_id = r.run_id
GROUP BY r.run_id, r.started_at, r.last_at
ORDER BY r.last_at DESC, r.run_id COLLATE "C"
"""
RUNS_AFTER: Final = RUNS.replace(
    "WHERE last_at >= %s",
    'WHERE last_at >= %s AND (last_at < %s OR (last_at = %s AND run_id COLLATE "C" > %s COLLATE "C"))',
    1,
)
"""The recent runs' summaries (``runs``; ``RUNS_AFTER``: those after a row, ``runs_after``)."""
_COLUMNS: Final = ("run_id", "seq", "kind", "ts", "call_id", "data")
_CHUNKS: Final = psycopg.pq.version() >= 170000
"""Whether libpq hands a streamed answer over in chunks of rows (17 on), not row by row."""

_FUNCTIONS: Final[tuple[LiteralString, ...]] = (
    """
    CREATE OR REPLACE FUNCTION trace_run_tenant(rid text) RETURNS text
    LANGUAGE sql STABLE SET search_path FROM CURRENT AS $$
        SELECT CASE jsonb_typeof(data -> 'tenant') WHEN 'boolean' THEN initcap(data ->> 'tenant')
                    ELSE data ->> 'tenant' END
        FROM trace_events WHERE run_id = rid AND kind = 'run_started' ORDER BY seq LIMIT 1
    $$
    """,
    """
    CREATE OR REPLACE FUNCTION trace_run_started_seq(rid text) RETURNS bigint
    LANGUAGE sql STABLE SET search_path FROM CURRENT AS $$
        SELECT min(seq) FROM trace_events WHERE run_id = rid AND kind = 'run_started'
    $$
    """,
    """
    CREATE OR REPLACE FUNCTION trace_runs_keep_tenant() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
    BEGIN
        UPDATE trace_runs SET tenant = trace_run_tenant(NEW.run_id),
                              started_seq = trace_run_started_seq(NEW.run_id)
        WHERE run_id = NEW.run_id;
        RETURN NULL;
    END
    $$
    """,
)
_TRIGGERS: Final[tuple[LiteralString, ...]] = (
    """
    CREATE OR REPLACE TRIGGER trace_runs_tenant_of_new_run AFTER INSERT ON trace_runs
    FOR EACH ROW EXECUTE FUNCTION trace_runs_keep_tenant()
    """,
    # every write of a run's events moves its row (once per run and transaction, not per event):
    # a run_started written after the row was made (or before its first one) is found by one seek
    """
    CREATE OR REPLACE TRIGGER trace_runs_tenant_of_start AFTER UPDATE OF started_at, last_at ON trace_runs
    FOR EACH ROW WHEN (NEW.started_seq IS DISTINCT FROM trace_run_started_seq(NEW.run_id))
    EXECUTE FUNCTION trace_runs_keep_tenant()
    """,
)
_INDEXES: Final[tuple[tuple[str, LiteralString], ...]] = (
    # the partial index makes a run's first run_started one seek; an event of another kind costs
    # a comparison, where a trigger on trace_events would be weighed for every row
    ("trace_events_started", "trace_events (run_id, seq) WHERE kind = 'run_started'"),
    ("trace_runs_tenant_recent", 'trace_runs (tenant, last_at DESC, run_id COLLATE "C")'),
    # a run's head events (``PostgresTraceStore.heads``) in one seek however long the run is: a
    # tenant check reads them, never the whole run
    ("trace_events_heads", "trace_events (run_id, seq) WHERE kind IN ('run_started', 'run_finished')"),
    # some calls of a run (``CALL_EVENTS``) in a seek per call, not a step over every row of the run
    ("trace_events_calls", "trace_events (run_id, call_id, seq) WHERE call_id IS NOT NULL"),
)
"""Built concurrently, each outside the transaction (``_postgres_tenants.build_concurrently``)."""
_COMPLETE: Final = """
SELECT (SELECT count(*) FROM pg_attribute WHERE attrelid = to_regclass('trace_runs')
          AND attname IN ('tenant', 'started_seq') AND NOT attisdropped) = 2 AS col,
       (SELECT count(*) FROM pg_trigger
         WHERE tgrelid = to_regclass('trace_runs')
           AND tgname IN ('trace_runs_tenant_of_new_run', 'trace_runs_tenant_of_start')) AS triggers,
       (SELECT count(*) FROM pg_index WHERE indisvalid AND indexrelid IN
          (to_regclass('trace_runs_tenant_recent'), to_regclass('trace_events_started'),
           to_regclass('trace_events_heads'), to_regclass('trace_events_calls'))) = 4 AS idx
"""
_LOCK: Final = "SELECT pg_advisory_xact_lock(hashtextextended('actionspace.trace_runs.tenant', 0))"


def add_run_tenants(db: PostgresConnections) -> None:
    """Give the database the tenant column, its triggers and its index when it lacks any of them.

    Read first, so a database that has them takes no lock; else in one transaction holding an
    advisory lock (one process migrates), in which a column added is filled in from the events
    stored (once: the column exists only filled in). The indexes are built outside it, with
    ``CREATE INDEX CONCURRENTLY`` (writers go on meanwhile), by one process at a time; the first one
    before the transaction, as the filling in seeks it.
    """
    with db.connection() as conn:
        if _complete(conn.execute(_COMPLETE).fetchone()):
            return
    build_concurrently(db, *_INDEXES[0])
    _columns_and_triggers(db)
    build_concurrently(db, *_INDEXES[1])
    build_concurrently(db, *_INDEXES[2])
    build_concurrently(db, *_INDEXES[3])


def _columns_and_triggers(db: PostgresConnections) -> None:
    retried(db, _migrate)


def _migrate(conn: psycopg.Connection[Any]) -> None:
    conn.execute(_LOCK)
    found = conn.execute(_COMPLETE).fetchone()
    if found is None or (found["col"] and found["triggers"] == 2):
        return
    for statement in _FUNCTIONS:
        conn.execute(statement)
    if not found["col"]:
        conn.execute("ALTER TABLE trace_runs ADD COLUMN IF NOT EXISTS tenant text")
        conn.execute("ALTER TABLE trace_runs ADD COLUMN IF NOT EXISTS started_seq bigint")
        conn.execute(
            "UPDATE trace_runs SET tenant = trace_run_tenant(run_id),"
            " started_seq = trace_run_started_seq(run_id)"
        )
    for statement in _TRIGGERS:
        conn.execute(statement)


def _complete(found: dict[str, Any] | None) -> bool:
    return found is not None and bool(found["col"] and found["triggers"] == 2 and found["idx"])


def tenant_runs_query(runs: LiteralString, tenant: str | None, after: bool) -> LiteralString:
    """``runs`` (the store's listing, its runs picked by ``WHERE last_at >= %s``) narrowed to one
    tenant's, through the tenant index: ``tenant = %s`` first, or ``tenant IS NULL`` (no parameter)
    for runs without one; with ``after``, bounded by the cursor's ``last_at`` (``%s``) and after its
    row (``%s, %s, %s``: ``last_at``, ``last_at``, ``run_id``)."""
    which: LiteralString = "tenant IS NULL" if tenant is None else "tenant = %s"
    bound: LiteralString = (
        ' AND last_at <= %s AND (last_at < %s OR (last_at = %s AND run_id COLLATE "C" > %s COLLATE "C"))'
        if after
        else ""
    )
    return runs.replace("WHERE last_at >= %s", "WHERE " + which + " AND last_at >= %s" + bound, 1)


def streamed_runs(
    db: PostgresConnections, run_ids: Sequence[str], page: int, *, read_only: bool = False
) -> Iterator[RunEvents]:
    """``PostgresTraceStore.events_of_runs`` (``_runs_events.ReadsManyRuns``) of the store ``db``;
    with ``read_only``, its statement in a ``READ ONLY`` transaction (``PostgresTraceReader``'s)."""
    ids = list(dict.fromkeys(run_ids))
    rows = _streamed(db, [r for r in ids if text_for_postgres(r) == r], checked_page(page), read_only)
    return grouped_runs(ids, (stored_event(*(row[k] for k in _COLUMNS), parsed=True) for row in rows))


def _streamed(
    db: PostgresConnections, run_ids: list[str], page: int, read_only: bool
) -> Iterator[dict[str, Any]]:
    """The rows of :data:`EVENTS_OF_RUNS` for ``run_ids``: one statement, its answer streamed from
    the server ``page`` rows at a time (row by row before libpq 17) on a connection held until the
    last row is read or the consumer stops (the query is then cancelled, the connection returned;
    a ``read_only`` transaction is rolled back)."""
    if not run_ids:
        return
    with db.transaction() if read_only else db.connection() as conn:
        if read_only:
            conn.execute("SET TRANSACTION READ ONLY")
        yield from conn.cursor().stream(EVENTS_OF_RUNS, (run_ids,), size=page if _CHUNKS else 1)
