"""The run listings of the SQLite trace store, and the tenant each run is listed under.

``trace_runs.tenant`` holds the tenant of a run's first ``run_started`` (by ``seq``; its ``seq`` in
``started_seq``): NULL for a run started without one, or with no ``run_started``. Triggers in the
file keep them, so every writer of the file (this version's, or an earlier one's, which knows
nothing of the columns) keeps them right: one fires when a run's row is made, one when its row
moves (each write of its events) and its first ``run_started`` is not the one the row names (one
written after the row was made). An index on
``(tenant, last_at, run_id)`` makes one tenant's page cost what a page of every run costs, however
many runs other tenants have. A file made before the column had it is given it, filled in from
the events already stored, in one write transaction when a store first opens it (and so is a file
made before the partial index on the runs' head events, :data:`HEADS`, or before the one on the
rows of calls, ``trace_events_calls``).

A run's row is written by :func:`touch_run` in two statements that cannot abort partway (``OR
IGNORE``), not one upsert: a statement that runs a trigger and may abort (the table's ``NOT NULL``
checks, at their default ``ABORT``) makes SQLite copy every page it is about to change to a
statement journal first, as the ledger's intent did (``ledger/sqlite.py``).

A tenant recorded as something other than text (a trace edited by hand) is kept as its text:
a number as SQLite writes it, ``true``/``false`` as ``True``/``False`` (as Python writes them). A
tenant holding U+0000 is kept up to it (SQLite's JSON functions read no further), and is asked for
so: a listing narrowed by tenant may hold such a run of another tenant, which the service, judging
each row by its events, does not show.
"""

from __future__ import annotations

import sqlite3
from typing import Final

from actionspace.ledger._connections import SqliteConnections

__all__ = [
    "HEADS",
    "RUNS",
    "RUNS_AFTER",
    "TENANT_RUNS",
    "TENANT_RUNS_AFTER",
    "add_run_tenants",
    "touch_run",
]

# Counts are aggregated over the events of the selected runs only, found through the
# (run_id, seq) index; the recency index picks the runs.
RUNS: Final = """
SELECT r.run_id, r.started_at, r.last_at,
       count(e.id),
       coalesce(sum(e.kind = 'observation' AND NOT coalesce(CASE WHEN json_valid(e.data) THEN
                     e.call_id = e.run_id || ':' || json_extract(e.data, '$.group')
                     OR (json_type(e.data, '$.rolled_back') IS NOT NULL
                         AND json_type(e.data, '$.group') IS NOT NULL) END, 0)), 0),
       coalesce(sum(e.kind = 'observation' AND CASE WHEN json_valid(e.data)
                     THEN json_extract(e.data, '$.status') = 'error' AND NOT coalesce(
                       e.call_id = e.run_id || ':' || json_extract(e.data, '$.group'), 0) END), 0),
       coalesce(max(e.kind = 'run_finished'), 0)
FROM (SELECT run_id, started_at, last_at FROM trace_runs WHERE last_at >= ?
      ORDER BY last_at DESC, run_id LIMIT ?) AS r
JOIN trace_events AS e ON e.run_id = r.run_id
GROUP BY r.run_id
ORDER BY r.last_at DESC, r.run_id
"""
_AFTER: Final = "WHERE last_at >= ? AND (last_at < ? OR (last_at = ? AND run_id > ?))"
RUNS_AFTER: Final = RUNS.replace("WHERE last_at >= ?", _AFTER, 1)
# ``tenant IS ?``: an equality the tenant index answers, NULL (no tenant) included.
TENANT_RUNS: Final = RUNS.replace("WHERE last_at >= ?", "WHERE tenant IS ? AND last_at >= ?", 1)
# ``last_at <= ?`` (the cursor's) bounds the index range read, so a later page starts where it is.
TENANT_RUNS_AFTER: Final = RUNS.replace(
    "WHERE last_at >= ?", f"WHERE tenant IS ? AND last_at <= ? AND {_AFTER[6:]}", 1
)

_TENANT_OF: Final = """(
    SELECT CASE WHEN NOT json_valid(e.data) THEN NULL
                WHEN json_type(e.data, '$.tenant') = 'true' THEN 'True'
                WHEN json_type(e.data, '$.tenant') = 'false' THEN 'False'
                ELSE CAST(json_extract(e.data, '$.tenant') AS TEXT) END
    FROM trace_events AS e WHERE e.run_id = {run} AND e.kind = 'run_started' ORDER BY e.seq LIMIT 1
)"""
"""The tenant of the run ``{run}`` names, as ``scoping`` reads it from its first ``run_started``."""
_STARTED_SEQ: Final = "(SELECT min(seq) FROM trace_events WHERE run_id = {run} AND kind = 'run_started')"
"""The ``seq`` of the run's first ``run_started``: one seek of the partial index."""
_SET: Final = (
    f"UPDATE trace_runs SET tenant = {_TENANT_OF.format(run='NEW.run_id')},"
    f" started_seq = {_STARTED_SEQ.format(run='NEW.run_id')} WHERE run_id = NEW.run_id;"
)

HEADS: Final = "kind IN ('run_started', 'run_finished')"
"""What a query of a run's head events (``store_encoding.HEAD_KINDS``) says of their kind: the
partial index's predicate written out, as SQLite uses that index only for a query stating it."""

_TRIGGERS: Final = (
    # the partial index makes a run's first run_started one seek; an event of another kind costs
    # a comparison (a trigger on trace_events would run for every row: half as slow again)
    "CREATE INDEX IF NOT EXISTS trace_events_started ON trace_events (run_id, seq)"
    " WHERE kind = 'run_started'",
    f"CREATE TRIGGER IF NOT EXISTS trace_runs_tenant_of_new_run AFTER INSERT ON trace_runs BEGIN {_SET} END",
    # every write of a run's events moves its row (once per run and transaction, not per event):
    # a run_started written after the row was made (or before its first one) is found by one seek
    f"""
    CREATE TRIGGER IF NOT EXISTS trace_runs_tenant_of_start AFTER UPDATE OF started_at, last_at ON trace_runs
    WHEN NEW.started_seq IS NOT {_STARTED_SEQ.format(run="NEW.run_id")}
    BEGIN {_SET} END
    """,
    "CREATE INDEX IF NOT EXISTS trace_runs_tenant_recent ON trace_runs (tenant, last_at DESC, run_id)",
    # a run's head events (its tenant, whether it finished) in one seek however long the run is
    f"CREATE INDEX IF NOT EXISTS trace_events_heads ON trace_events (run_id, seq) WHERE {HEADS}",
    # some calls of a run (``call_events``) in a seek per call, not a step over every row of the run
    "CREATE INDEX IF NOT EXISTS trace_events_calls ON trace_events (run_id, call_id, seq)"
    " WHERE call_id IS NOT NULL",
)
_NAMES: Final = (
    "trace_events_started",
    "trace_runs_tenant_of_new_run",
    "trace_runs_tenant_of_start",
    "trace_runs_tenant_recent",
    "trace_events_heads",
    "trace_events_calls",
)
_GROW: Final = (
    "UPDATE OR IGNORE trace_runs SET started_at = min(started_at, ?), last_at = max(last_at, ?)"
    " WHERE run_id = ?"
)
_ADD: Final = "INSERT OR IGNORE INTO trace_runs (run_id, started_at, last_at) VALUES (?, ?, ?)"


def touch_run(conn: sqlite3.Connection, run_id: str, first: float, last: float) -> None:
    """Make the run's row span ``first`` to ``last`` too: widen it, or make it. Neither statement
    aborts partway (a ``NOT NULL`` check skips the row instead), so SQLite keeps no statement
    journal for them though the triggers run; a row a check would refuse (a time that is None)
    is not written, where the events' own ``NOT NULL`` has refused the write already."""
    if conn.execute(_GROW, (first, last, run_id)).rowcount == 0:
        conn.execute(_ADD, (run_id, first, last))


def add_run_tenants(db: SqliteConnections) -> None:
    """Give the file the tenant column, its triggers and the indexes when it lacks any of them.

    Read first, so a file that has them is not written to; else in one write transaction, in which
    a column added is filled in from the events stored (once: the column exists only filled in).
    """
    if _complete(db.conn()):
        return
    with db.write() as conn:
        conn.execute(_TRIGGERS[0])  # the index first: the filling in below seeks it
        columns = _columns(conn)
        if not {"tenant", "started_seq"} <= columns:
            for column, kind in (("tenant", "TEXT"), ("started_seq", "INTEGER")):
                if column not in columns:
                    conn.execute(f"ALTER TABLE trace_runs ADD COLUMN {column} {kind}")
            run = "trace_runs.run_id"
            conn.execute(
                f"UPDATE trace_runs SET tenant = {_TENANT_OF.format(run=run)},"
                f" started_seq = {_STARTED_SEQ.format(run=run)}"
            )
        for statement in _TRIGGERS[1:]:
            conn.execute(statement)


def _complete(conn: sqlite3.Connection) -> bool:
    marks = ", ".join("?" * len(_NAMES))
    found = conn.execute(f"SELECT count(*) FROM sqlite_master WHERE name IN ({marks})", _NAMES).fetchone()
    return bool(found[0] == len(_NAMES) and {"tenant", "started_seq"} <= _columns(conn))


def _columns(conn: sqlite3.Connection) -> set[str]:
    return {str(info[1]) for info in conn.execute("PRAGMA table_info(trace_runs)")}
