"""The read-only PostgreSQL trace reader reads a run's head events alone, as the store does.

A tenant check or a listing's row (``service.scoping.heads`` / ``heads_of``, ``RunTenants``) asks a
store for a run's ``run_started`` and ``run_finished``; a store without ``heads`` is read whole
instead. The reader the commands open (``open_trace_store(url, read_only=True)``) must answer them
through the partial index, in its read-only transaction: the statements it runs are counted and
explained (the rows PostgreSQL examines), not timed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import psycopg
import pytest

from actionspace.service.scoping import RunTenants, heads, heads_of
from actionspace.trace.events import TraceEvent
from actionspace.trace.memory import MemoryTraceStore
from actionspace.trace.postgres import PostgresTraceReader, PostgresTraceStore
from actionspace.trace.store import open_trace_store
from tests.pg import fresh_schema

LONG = 5_000


@pytest.fixture
def schema(pg_url: str) -> Iterator[str]:
    yield from fresh_schema(pg_url)


def _run(run_id: str, n: int, *, tenant: object = "a", finished: bool = True) -> list[TraceEvent]:
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


class _Counted:
    """The statements a reader ran, and no whole-run read allowed."""

    def __init__(self, reader: PostgresTraceReader, monkeypatch: pytest.MonkeyPatch) -> None:
        self.statements: list[tuple[str, Sequence[Any]]] = []
        read = reader._read

        def counted(sql: Any, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
            self.statements.append((str(sql), params))
            return read(sql, params)

        def whole(run_id: str) -> list[TraceEvent]:
            raise AssertionError(f"the whole run {run_id!r} was read")

        monkeypatch.setattr(reader, "_read", counted)
        monkeypatch.setattr(reader, "events", whole)


def test_the_reader_answers_heads_from_the_head_rows_alone(
    schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with PostgresTraceStore(schema) as store:
        store.append_many(_run("long", LONG))
        store.append_many(_run("short", 3, tenant="b", finished=False))
    reader = open_trace_store(schema, read_only=True)
    assert isinstance(reader, PostgresTraceReader)
    try:
        counted = _Counted(reader, monkeypatch)
        assert [(e.seq, e.kind) for e in heads(reader, "long")] == [
            (0, "run_started"),
            (LONG + 1, "run_finished"),
        ]
        tenants = RunTenants(reader)
        assert (tenants("long"), tenants("short"), tenants("missing")) == ("a", "b", None)
        many = heads_of(reader, ["long", "short", "missing"])
        assert {k: [e.seq for e in v] for k, v in many.items()} == {
            "long": [0, LONG + 1],
            "short": [0],
            "missing": [],
        }
        # one statement a lookup (the listing's page in one), each examining the head rows only
        assert len(counted.statements) == 5
        with psycopg.connect(schema, autocommit=True) as conn:
            for sql, params in counted.statements:
                row = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params).fetchone()
                assert row is not None
                plan = row[0] if not isinstance(row[0], str) else json.loads(row[0])
                examined = _examined(plan[0]["Plan"])
                assert examined <= 8, (sql, examined, plan)  # not the run's 5,002 rows
    finally:
        reader.close()


def test_the_reader_heads_agree_with_the_store_and_the_memory_store(schema: str) -> None:
    events = [
        *_run("r", 5),
        TraceEvent(run_id="r", seq=7, kind="run_started", ts=9.0, data={"tenant": "late"}),
        TraceEvent(run_id="x", seq=0, kind="observation", ts=1.0, data={}),
        *_run("odd", 1, tenant=7),
    ]
    memory = MemoryTraceStore()
    memory.append_many(events)
    ids = ["r", "x", "odd", "none", "bad\x00id", "\ud800", "r"]
    with PostgresTraceStore(schema) as store:
        store.append_many(events)
        with PostgresTraceReader(schema) as reader:
            for run_id in ids:
                assert reader.heads(run_id) == store.heads(run_id) == memory.heads(run_id), run_id
            assert reader.heads_many(ids) == store.heads_many(ids) == {k: memory.heads(k) for k in ids}
            assert reader.heads_many([]) == {}
