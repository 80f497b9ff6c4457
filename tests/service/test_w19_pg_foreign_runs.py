"""On PostgreSQL too, another tenant's run is refused on its head events alone, never read whole.

A 404 for another tenant's long run must cost what a 404 for no run costs: the rows the trace
store hands back are counted (the run has 20,002 events; its head is two of them).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from actionspace import Principal
from actionspace.trace.events import TraceEvent
from tests.pg import fresh_schema
from tests.service.apptools import TOKENS, bearer, served

LONG = 20_000
_TOKENS = {
    **TOKENS,
    "tenant-a": Principal(id="ann", tenant="a", scopes=("runs:*", "approvals:read", "read:*")),
    "tenant-b": Principal(id="bob", tenant="b", scopes=("runs:*", "approvals:read", "read:*")),
}


@pytest.fixture
def schema(pg_url: str) -> Iterator[str]:
    yield from fresh_schema(pg_url)


def _long_run(run_id: str) -> list[TraceEvent]:
    events = [
        TraceEvent(run_id=run_id, seq=0, kind="run_started", ts=1.0, data={"tenant": "a", "principal": "ann"})
    ]
    events += [
        TraceEvent(run_id=run_id, seq=i, kind="observation", ts=1.0 + i, call_id=f"{run_id}:c{i}", data={})
        for i in range(1, LONG + 1)
    ]
    events.append(TraceEvent(run_id=run_id, seq=LONG + 1, kind="run_finished", ts=LONG + 2.0, data={}))
    return events


@pytest.mark.parametrize("route", ["/api/runs/{run}", "/api/runs/{run}/events"])
def test_another_tenants_long_run_is_refused_reading_its_head_only(route: str, schema: str) -> None:
    with served(schema, tokens=_TOKENS) as (_client, rt, _world, _signalling, app):
        client = TestClient(app, raise_server_exceptions=False)
        rt.trace.append_many(_long_run("a_long"))
        rows: Counter[str] = Counter()
        reads: Counter[str] = Counter()
        store: Any = rt.trace
        real_events, real_heads = store.events, getattr(store, "heads", None)

        def events(run_id: str) -> Any:
            reads["events"] += 1
            found = real_events(run_id)
            rows[run_id] += len(found)
            return found

        def heads(run_id: str) -> Any:
            reads["heads"] += 1
            assert real_heads is not None
            found = real_heads(run_id)
            rows[run_id] += len(found)
            return found

        store.events = events
        if real_heads is not None:
            store.heads = heads
        try:
            foreign = client.get(route.format(run="a_long"), headers=bearer("tenant-b"))
            missing = client.get(route.format(run="no_such_run"), headers=bearer("tenant-b"))
            foreign_rows, foreign_reads = rows["a_long"], dict(reads)
            own = client.get(route.format(run="a_long"), headers=bearer("tenant-a"))
        finally:
            store.events = real_events
            if real_heads is not None:
                store.heads = real_heads
        assert foreign.status_code == missing.status_code == 404
        assert foreign.json()["error"]["message"].replace("a_long", "X") == missing.json()["error"][
            "message"
        ].replace("no_such_run", "X")
        assert foreign_rows <= 2, foreign_rows  # the head: run_started and run_finished
        assert "events" not in foreign_reads, foreign_reads
        assert own.status_code == 200
        assert rows["a_long"] >= LONG  # the owner's read is the whole run


def test_a_listing_of_runs_reads_each_runs_head_in_one_query(schema: str) -> None:
    """``GET /api/runs`` reads the heads of a page in one query, never a run's events."""
    with served(schema, tokens=_TOKENS) as (_client, rt, _world, _signalling, app):
        client = TestClient(app, raise_server_exceptions=False)
        rt.trace.append_many(_long_run("a_long"))
        store: Any = rt.trace
        called: Counter[str] = Counter()
        real_events = store.events

        def events(run_id: str) -> Any:
            called[run_id] += 1
            return real_events(run_id)

        store.events = events
        try:
            mine = client.get("/api/runs", headers=bearer("tenant-a"))
            theirs = client.get("/api/runs", headers=bearer("tenant-b"))
        finally:
            store.events = real_events
        assert mine.status_code == theirs.status_code == 200
        assert [(r["run_id"], r["events"], r["status"]) for r in mine.json()] == [("a_long", LONG + 2, "ok")]
        assert theirs.json() == []
        assert called == Counter(), called
