"""The PostgreSQL trace store reads a run's head events alone, as SQLite's does.

A tenant check (``GET /api/runs/{id}`` of another tenant's run) and a listing's rows read a run's
``run_started`` and ``run_finished``; reading them must cost the same however long the run is, so
the rows PostgreSQL examines are counted (``EXPLAIN ANALYZE``), not the time taken.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from actionspace.trace.events import TraceEvent
from actionspace.trace.memory import MemoryTraceStore
from actionspace.trace.postgres import PostgresTraceStore
from tests.pg import fresh_schema

LONG = 20_000


@pytest.fixture
def schema(pg_url: str) -> Iterator[str]:
    yield from fresh_schema(pg_url)


def _run(run_id: str, n: int, *, tenant: str = "a", finished: bool = True) -> list[TraceEvent]:
    events = [TraceEvent(run_id=run_id, seq=0, kind="run_started", ts=1.0, data={"tenant": tenant})]
    events += [
        TraceEvent(
            run_id=run_id, seq=i, kind="observation", ts=1.0 + i, call_id=f"c{i}", data={"status": "ok"}
        )
        for i in range(1, n + 1)
    ]
    if finished:
        events.append(TraceEvent(run_id=run_id, seq=n + 1, kind="run_finished", ts=n + 2.0, data={}))
    return events


def _examined(plan: dict[str, Any]) -> int:
    """Rows every node of ``plan`` produced or threw away: what the query read of the table."""
    own = int(plan.get("Actual Rows", 0)) + int(plan.get("Rows Removed by Filter", 0))
    return own + sum(_examined(child) for child in plan.get("Plans", []))


def test_heads_of_a_long_run_examine_its_head_rows_only(schema: str) -> None:
    with PostgresTraceStore(schema) as store:
        store.append_many(_run("long", LONG))
        store.append_many(_run("short", 3, tenant="b", finished=False))
        heads = store.heads("long")
        assert [(e.seq, e.kind) for e in heads] == [(0, "run_started"), (LONG + 1, "run_finished")]
        assert heads[0].data == {"tenant": "a"}
        many = store.heads_many(["long", "short", "missing"])
        assert {k: [e.seq for e in v] for k, v in many.items()} == {
            "long": [0, LONG + 1],
            "short": [0],
            "missing": [],
        }
        with psycopg.connect(schema, autocommit=True) as conn:
            from actionspace.trace import _postgres_runs

            for sql, params in ((_postgres_runs.HEADS, ("long",)), (_postgres_runs.HEADS_MANY, (["long"],))):
                row = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params).fetchone()
                assert row is not None
                plan = row[0] if not isinstance(row[0], str) else json.loads(row[0])
                examined = _examined(plan[0]["Plan"])
                assert 2 <= examined <= 8, (examined, plan)  # not the run's 20,002 rows


def test_heads_agree_with_the_memory_store(schema: str) -> None:
    events = [
        *_run("r", 5),
        TraceEvent(run_id="r", seq=7, kind="run_started", ts=9.0, data={"tenant": "late"}),
        TraceEvent(run_id="x", seq=0, kind="observation", ts=1.0, data={}),
    ]
    memory = MemoryTraceStore()
    memory.append_many(events)
    with PostgresTraceStore(schema) as store:
        store.append_many(events)
        for run_id in ("r", "x", "none", "bad\x00id", "\ud800"):
            assert store.heads(run_id) == memory.heads(run_id), run_id
        got = store.heads_many(["r", "x", "none", "bad\x00id"])
        assert got == {k: memory.heads(k) for k in ("r", "x", "none", "bad\x00id")}
