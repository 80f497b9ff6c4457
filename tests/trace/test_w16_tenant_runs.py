"""Trace stores list one tenant's runs in their query: exactly the runs the service reads as that
tenant's, at the cost of a page however many runs another tenant has, on files and databases made
before the stores knew tenants too.

The work is counted, never timed: SQLite's virtual-machine steps (a progress handler), the memory
store's reads of a run's events, and PostgreSQL's rows of ``trace_runs`` in the executed plan.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace.service.scoping import NOBODY, RunTenants
from actionspace.trace.events import TraceEvent
from actionspace.trace.memory import MemoryTraceStore
from actionspace.trace.sqlite import SqliteTraceStore
from actionspace.trace.store import ListsTenantRuns, open_trace_store
from tests.pg import STORES, fresh_schema, store_url
from tests.proc import WAIT_FOR, at_once


@pytest.fixture(params=STORES)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from store_url(request, tmp_path)


def _started(run_id: str, at: float, tenant: Any = None, seq: int = 0, **more: Any) -> TraceEvent:
    data = {"principal": "p", **more} | ({} if tenant is None else {"tenant": tenant})
    return TraceEvent(run_id=run_id, seq=seq, kind="run_started", ts=at, data=data)


def _note(run_id: str, seq: int, at: float) -> TraceEvent:
    return TraceEvent(run_id=run_id, seq=seq, kind="note", ts=at, data={})


def _ids(store: Any, tenant: str | None, **kw: Any) -> list[str]:
    return [s.run_id for s in store.tenant_runs(tenant, **kw)]


def _expected(store: Any, tenant: str | None) -> list[str]:
    """Every run the service reads as ``tenant``'s (scoping's reading of its heads), newest first."""
    tenants = RunTenants(store)
    return [s.run_id for s in store.runs(limit=10_000) if tenants(s.run_id) == tenant]


def _seed_shapes(store: Any) -> None:
    store.append_many(
        [
            _started("a1", 1.0, "a"),
            _started("b1", 2.0, "b"),
            _started("n1", 3.0),
            _note("bare", 0, 4.0),  # no run_started: a run without a tenant
            _note("late", 0, 5.0),
            _started("a2", 6.0, "a"),
            _started("twice", 7.0, "b"),
        ]
    )
    store.append_many([_started("late", 8.0, "a", seq=1)])  # its run_started after its row
    store.append_many([_started("twice", 9.0, "a", seq=1)])  # the first one names the tenant
    store.append_records("rec", [(0, "run_started", 10.0, None, {"principal": "p", "tenant": "b"})])
    store.append_records("rec", [(1, "note", 11.0, None, {})])


def test_a_tenants_runs_are_the_runs_the_service_reads_as_its_own(url: str) -> None:
    store: Any = open_trace_store(url)
    try:
        opened: object = store
        assert isinstance(opened, ListsTenantRuns)
        _seed_shapes(store)
        assert _ids(store, "a") == ["late", "a2", "a1"] == _expected(store, "a")
        assert _ids(store, "b") == ["rec", "twice", "b1"] == _expected(store, "b")
        assert _ids(store, None) == ["bare", "n1"] == _expected(store, None)
        assert _ids(store, "nobody") == []
        assert _ids(store, "a\ud800") == []
        # pages: after a row, at most limit, ties on last_at by run id
        store.append_many([_started("a3", 6.0, "a"), _started("a0", 6.0, "a")])
        assert _ids(store, "a", limit=2) == ["late", "a0"]
        assert _ids(store, "a", limit=2, after=(6.0, "a0")) == ["a2", "a3"]
        assert _ids(store, "a", limit=5, after=(6.0, "a3")) == ["a1"]
    finally:
        store.close()


def _strip_tenants_sqlite(path: Path) -> None:
    """The file as an actionspace that knew no tenants left it: no column, trigger nor index."""
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("DROP TRIGGER trace_runs_tenant_of_new_run")
        conn.execute("DROP TRIGGER trace_runs_tenant_of_start")
        conn.execute("DROP INDEX trace_runs_tenant_recent")
        conn.execute("DROP INDEX trace_events_started")
        conn.execute("ALTER TABLE trace_runs DROP COLUMN tenant")
        conn.execute("ALTER TABLE trace_runs DROP COLUMN started_seq")
    conn.close()


def _strip_tenants_postgres(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP TRIGGER trace_runs_tenant_of_new_run ON trace_runs")
        conn.execute("DROP TRIGGER trace_runs_tenant_of_start ON trace_runs")
        conn.execute("DROP INDEX trace_runs_tenant_recent")
        conn.execute("DROP INDEX trace_events_started")
        conn.execute("ALTER TABLE trace_runs DROP COLUMN tenant")
        conn.execute("ALTER TABLE trace_runs DROP COLUMN started_seq")
        conn.execute("DROP FUNCTION trace_runs_keep_tenant()")
        conn.execute("DROP FUNCTION trace_run_tenant(text)")
        conn.execute("DROP FUNCTION trace_run_started_seq(text)")


def _old_writer_appends(url: str, path: Path) -> None:
    """What an earlier version writes: events and the run's row, naming no tenant."""
    rows = [("old2", 0, "run_started", 20.0, json.dumps({"principal": "p", "tenant": "a"}))]
    if url.startswith("sqlite"):
        conn = sqlite3.connect(path)
        with conn:
            conn.executemany(
                "INSERT INTO trace_events (run_id, seq, kind, ts, data) VALUES (?, ?, ?, ?, ?)", rows
            )
            conn.execute("INSERT INTO trace_runs (run_id, started_at, last_at) VALUES ('old2', 20.0, 20.0)")
        conn.close()
        return
    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute(
            "INSERT INTO trace_events (run_id, seq, kind, ts, data) VALUES (%s, %s, %s, %s, %s::jsonb)",
            rows[0],
        )
        pg.execute("INSERT INTO trace_runs (run_id, started_at, last_at) VALUES ('old2', 20.0, 20.0)")


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from store_url(request, tmp_path)


@pytest.fixture
def pg(pg_url: str) -> Iterator[str]:
    yield from fresh_schema(pg_url)


def test_a_store_made_before_tenants_were_listed_lists_its_old_runs_by_tenant(
    db_url: str, tmp_path: Path
) -> None:
    path = tmp_path / "a.db"  # the file of a sqlite store_url
    store: Any = open_trace_store(db_url)
    _seed_shapes(store)
    store.close()
    if db_url.startswith("sqlite"):
        _strip_tenants_sqlite(path)
    else:
        _strip_tenants_postgres(db_url)
    reopened: Any = open_trace_store(db_url)  # given the column, filled in from the stored events
    try:
        assert _ids(reopened, "a") == ["late", "a2", "a1"]
        assert _ids(reopened, "b") == ["rec", "twice", "b1"]
        assert _ids(reopened, None) == ["bare", "n1"]
    finally:
        reopened.close()
    # an earlier version writing to the migrated store keeps the column right (the triggers do)
    _old_writer_appends(db_url, path)
    again: Any = open_trace_store(db_url)
    try:
        assert _ids(again, "a") == ["old2", "late", "a2", "a1"] == _expected(again, "a")
    finally:
        again.close()


BUSY = 2_000


def _flood(store: Any) -> None:
    store.append_many([_started(f"q{i}", 1.0 + i, "quiet") for i in range(5)])
    store.append_many([_started(f"b{i:05d}", 100.0 + i, "busy") for i in range(BUSY)])


def test_a_quiet_tenants_sqlite_page_costs_what_an_unfiltered_page_costs(tmp_path: Path) -> None:
    store = SqliteTraceStore(tmp_path / "t.db")
    try:
        _flood(store)
        steps = [0]

        def step() -> int:
            steps[0] += 1
            return 0

        def work(read: Any) -> int:
            store.runs(limit=1)  # settles this thread's connection first
            conn = store._db.conn()
            steps[0] = 0
            conn.set_progress_handler(step, 10)
            try:
                read()
            finally:
                conn.set_progress_handler(None, 10)
            return steps[0]

        unfiltered = work(lambda: store.runs(limit=5))
        quiet = work(lambda: store.tenant_runs("quiet", limit=5))
        busy = work(lambda: store.tenant_runs("busy", limit=5))
        paged = work(lambda: store.tenant_runs("busy", limit=5, after=(1000.0, "")))
        # a filter over the listing reads 2,000 busy runs (thousands of steps) for the quiet page
        assert max(quiet, busy, paged) <= 2 * unfiltered + 50, (quiet, busy, paged, unfiltered)
        assert _ids(store, "quiet", limit=5) == [f"q{i}" for i in reversed(range(5))]
    finally:
        store.close()


def test_a_quiet_tenants_memory_page_summarizes_only_its_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    store = MemoryTraceStore()
    _flood(store)
    read = [0]
    events = store.events

    def counted(run_id: str) -> list[TraceEvent]:
        read[0] += 1
        return events(run_id)

    monkeypatch.setattr(store, "events", counted)
    store.tenant_runs("quiet", limit=5)  # each run's tenant read once
    read[0] = 0
    store.runs(limit=5)
    unfiltered = read[0]
    read[0] = 0
    assert _ids(store, "quiet", limit=5) == [f"q{i}" for i in reversed(range(5))]
    assert read[0] <= 5 < unfiltered == BUSY + 5


def test_a_quiet_tenants_postgres_page_reads_its_rows_of_the_index(pg: str) -> None:
    from actionspace.trace._postgres_runs import tenant_runs_query
    from actionspace.trace.postgres import _RUNS

    url = pg
    store: Any = open_trace_store(url)
    try:
        _flood(store)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ANALYZE trace_runs")
            for tenant, after, params in (
                ("quiet", False, ("quiet", float("-inf"), 5)),
                ("busy", False, ("busy", float("-inf"), 5)),
                ("busy", True, ("busy", float("-inf"), 1000.0, 1000.0, 1000.0, "", 5)),
            ):
                sql = "EXPLAIN (ANALYZE, FORMAT JSON) " + tenant_runs_query(_RUNS, tenant, after)
                plan = conn.execute(sql, params).fetchone()
                assert plan is not None
                rows = _rows_of(plan[0][0]["Plan"], "trace_runs")
                assert rows <= 10, (tenant, after, rows)
        assert _ids(store, "quiet", limit=5) == [f"q{i}" for i in reversed(range(5))]
    finally:
        store.close()


def _rows_of(node: dict[str, Any], table: str) -> int:
    """Rows the plan read of ``table``: kept and filtered out, over its loops."""
    own = 0
    if node.get("Relation Name") == table:
        own = (node.get("Actual Rows", 0) + node.get("Rows Removed by Filter", 0)) * node.get(
            "Actual Loops", 1
        )
    return own + sum(_rows_of(child, table) for child in node.get("Plans", ()))


_TENANTS = st.one_of(st.none(), st.text(max_size=8), st.integers(-(2**40), 2**40), st.booleans())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(recorded=st.lists(_TENANTS, min_size=1, max_size=6))
def test_whatever_a_run_started_names_as_its_tenant_the_store_lists_it_under_what_the_service_reads(
    recorded: list[Any], tmp_path_factory: pytest.TempPathFactory
) -> None:
    path = tmp_path_factory.mktemp("t") / "t.db"
    for store in (MemoryTraceStore(), SqliteTraceStore(path)):
        try:
            store.append_many([_started(f"r{i}", 1.0 + i, tenant) for i, tenant in enumerate(recorded)])
            tenants = RunTenants(store)
            for i in range(len(recorded)):
                read = tenants(f"r{i}")
                if read == NOBODY:  # not a string: no principal's tenant, listed for no tenant's
                    continue
                assert f"r{i}" in _ids(store, read, limit=100), (recorded[i], read)
                if not any(isinstance(t, str) and "\x00" in t for t in recorded):  # SQLite: read up to it
                    assert _ids(store, read, limit=100) == _expected(store, read)
        finally:
            store.close()


_OPENER = (
    WAIT_FOR
    + """
import json, sys
from actionspace.trace.events import TraceEvent
from actionspace.trace.store import open_trace_store

url, tenant, go = sys.argv[1:4]
print("ready", flush=True)
wait_for(go)
store = open_trace_store(url)  # three processes give the old store the column at once
started = {"principal": "p", "tenant": tenant}
runs = [f"{tenant}-{i}" for i in range(20)]
store.append_many(
    [TraceEvent(run_id=r, seq=0, kind="run_started", ts=100.0 + i, data=started) for i, r in enumerate(runs)]
)
print(json.dumps({"mine": [s.run_id for s in store.tenant_runs(tenant, limit=100)]}), flush=True)
store.close()
"""
)


def test_processes_opening_an_old_store_at_once_each_list_their_tenants_runs(
    db_url: str, tmp_path: Path
) -> None:
    store: Any = open_trace_store(db_url)
    _seed_shapes(store)
    store.close()
    if db_url.startswith("sqlite"):
        _strip_tenants_sqlite(tmp_path / "a.db")
    else:
        _strip_tenants_postgres(db_url)
    tenants = ["t0", "t1", "t2"]
    said = at_once(_OPENER, [[db_url, t, str(tmp_path / "go")] for t in tenants], tmp_path / "go")
    for tenant, answer in zip(tenants, said, strict=True):
        assert answer["mine"] == [f"{tenant}-{i}" for i in reversed(range(20))]
    reopened: Any = open_trace_store(db_url)
    try:
        assert _ids(reopened, "a") == ["late", "a2", "a1"] == _expected(reopened, "a")
        assert _ids(reopened, None) == ["bare", "n1"] == _expected(reopened, None)
    finally:
        reopened.close()
