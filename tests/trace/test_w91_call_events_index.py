"""A run's calls are read through an index naming them, not by stepping over the run's rows.

``call_events`` (the framework marks rebuilt from the trace) asks for a few calls of a run; the
stores filtered the run's rows in the query, stepping over all of them in ``(run_id, seq)`` order.
The partial index ``trace_events_calls`` on ``(run_id, call_id, seq)`` (rows with a call id only)
makes it a seek per call: the query plan names the index, and a store made before the index gains
it when it is opened. Plans are read, not times.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from actionspace.trace._sqlite_reads import _CALLS
from actionspace.trace.events import TraceEvent
from actionspace.trace.postgres import PostgresTraceStore
from actionspace.trace.sqlite import SqliteTraceReader, SqliteTraceStore
from tests.pg import fresh_schema

_INDEXED = "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'trace_events_calls'"


def _run(run_id: str, calls: int) -> list[TraceEvent]:
    events = [TraceEvent(run_id=run_id, seq=0, kind="run_started", ts=1.0, data={})]
    for n in range(calls):
        events += [
            TraceEvent(run_id=run_id, seq=1 + 2 * n, kind="proposed", ts=2.0, call_id=f"c{n}", data={"n": n}),
            TraceEvent(
                run_id=run_id,
                seq=2 + 2 * n,
                kind="observation",
                ts=3.0,
                call_id=f"c{n}",
                data={"status": "ok"},
            ),
        ]
    return events


def _sqlite_plan(conn: sqlite3.Connection) -> str:
    sql = _CALLS.format(kinds="?, ?", marks="?, ?")
    rows = conn.execute("EXPLAIN QUERY PLAN " + sql, ("r", "proposed", "observation", "c1", "c7")).fetchall()
    return " | ".join(str(row[-1]) for row in rows)


def test_sqlite_call_events_plan_seeks_the_calls_index(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with SqliteTraceStore(path) as store:
        store.append_many(_run("r", 300))
        got = store.call_events("r", ["c7", "c1"], ["observation", "proposed"])
        assert [(e.seq, e.kind, e.call_id) for e in got] == [
            (3, "proposed", "c1"),
            (4, "observation", "c1"),
            (15, "proposed", "c7"),
            (16, "observation", "c7"),
        ]
    with sqlite3.connect(path) as plain:
        plan = _sqlite_plan(plain)
    assert "trace_events_calls" in plan, plan


def test_a_sqlite_file_made_before_the_index_gains_it_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with SqliteTraceStore(path) as store:
        store.append_many(_run("r", 50))
    with sqlite3.connect(path) as plain:  # the file as the earlier version left it
        plain.execute("DROP INDEX IF EXISTS trace_events_calls")
    reader = SqliteTraceReader(path)  # a read-only open writes nothing, and answers alike
    try:
        assert [e.seq for e in reader.call_events("r", ["c3"], ["observation"])] == [8]
    finally:
        reader.close()
    with sqlite3.connect(path) as plain:
        assert plain.execute(_INDEXED).fetchone() == (0,)
    with SqliteTraceStore(path) as store:
        assert [e.seq for e in store.call_events("r", ["c3"], ["observation"])] == [8]
    with sqlite3.connect(path) as plain:
        assert plain.execute(_INDEXED).fetchone() == (1,)
        assert "trace_events_calls" in _sqlite_plan(plain)


@pytest.fixture
def schema(pg_url: str) -> Iterator[str]:
    yield from fresh_schema(pg_url)


def _pg_plan(url: str) -> dict[str, Any]:
    from actionspace.trace._postgres_runs import CALL_EVENTS

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE trace_events")
        row = conn.execute(
            "EXPLAIN (FORMAT JSON) " + CALL_EVENTS, ("long", ["c5", "c9"], ["proposed", "observation"])
        ).fetchone()
    assert row is not None
    plan: dict[str, Any] = row[0][0]["Plan"]
    return plan


def _indexes(plan: dict[str, Any]) -> set[str]:
    found = {str(plan["Index Name"])} if "Index Name" in plan else set()
    for child in plan.get("Plans", []):
        found |= _indexes(child)
    return found


def test_postgres_call_events_plan_uses_the_calls_index(schema: str) -> None:
    with PostgresTraceStore(schema) as store:
        store.append_many(_run("long", 5_000))
        store.append_many(_run("short", 3))
        got = store.call_events("long", ["c9", "c5"], ["observation", "proposed"])
        assert [(e.seq, e.call_id) for e in got] == [(11, "c5"), (12, "c5"), (19, "c9"), (20, "c9")]
    assert _indexes(_pg_plan(schema)) == {"trace_events_calls"}


def test_a_postgres_database_made_before_the_index_gains_it_when_opened(schema: str) -> None:
    with PostgresTraceStore(schema) as store:
        store.append_many(_run("long", 5_000))
    with psycopg.connect(schema, autocommit=True) as conn:  # as the earlier version left it
        conn.execute("DROP INDEX IF EXISTS trace_events_calls")
    with PostgresTraceStore(schema) as store:
        assert [e.seq for e in store.call_events("long", ["c3"], ["observation"])] == [8]
    with psycopg.connect(schema, autocommit=True) as conn:
        row = conn.execute(
            "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass('trace_events_calls')"
        ).fetchone()
    assert row == (True,)
    assert _indexes(_pg_plan(schema)) == {"trace_events_calls"}
