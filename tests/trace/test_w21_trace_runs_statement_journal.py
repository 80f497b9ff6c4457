"""The write of a run's row in the SQLite trace copies no page to a statement journal.

SQLite keeps a statement journal (the pages a statement changes, copied before it changes them) for
a statement that both runs a trigger and may abort partway. ``trace_runs`` has the tenant triggers
(``_sqlite_runs``) and ``NOT NULL`` columns, whose checks at their default ``ABORT`` made the run's
upsert (every flush of a run's records) such a statement, in its insert and in its update. It is
an ``UPDATE OR IGNORE`` and, for a new run, an ``INSERT OR IGNORE`` now: no check that aborts, no
journal; the triggers still run and still keep each run's tenant. Counted as the ledger's intent
is (tests/ledger/test_w20_intent_statement_journal.py): the statements the writer runs, compiled
against the file's schema, hold no op that ends the statement with ``ABORT``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace.trace.events import TraceEvent
from actionspace.trace.memory import MemoryTraceStore
from actionspace.trace.sqlite import SqliteTraceStore

_ABORT = 2
"""SQLite's ``OE_Abort``: the conflict action in ``P2`` of a ``Halt``/``HaltIfNull`` that ends the
statement with an error, undoing what it wrote (hence the journal)."""


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteTraceStore]:
    with SqliteTraceStore(tmp_path / "t.db") as opened:
        yield opened


def _traced(store: SqliteTraceStore) -> list[str]:
    """The statements the store's writer runs from now on, their parameters written in."""
    statements: list[str] = []
    store._group.run(lambda conn: conn.set_trace_callback(statements.append))
    return statements


def _program(store: SqliteTraceStore, statement: str) -> list[tuple[Any, ...]]:
    """The program of ``statement`` compiled against the file's schema as it is now."""
    conn = sqlite3.connect(store.path)
    try:
        return [tuple(row) for row in conn.execute(f"EXPLAIN {statement}")]
    finally:
        conn.close()


def _of_runs(statements: list[str]) -> list[str]:
    """The statements that write ``trace_runs`` (the trace reports one once more for each trigger
    program it runs: the same text)."""
    writes = ("INSERT", "UPDATE")
    return sorted({s for s in statements if s.lstrip().upper().startswith(writes) and "trace_runs" in s})


def _aborting(program: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return [row for row in program if row[1] in ("Halt", "HaltIfNull") and row[2] != 0 and row[3] == _ABORT]


def _started(run_id: str, tenant: str, seq: int = 0, ts: float = 1.0) -> TraceEvent:
    return TraceEvent(run_id=run_id, seq=seq, kind="run_started", ts=ts, data={"tenant": tenant})


@pytest.mark.parametrize("path", ["records", "events"])
def test_a_runs_row_is_written_by_statements_that_cannot_abort_partway(
    store: SqliteTraceStore, path: str
) -> None:
    statements = _traced(store)
    for run_id in ("new", "new", "other"):  # a new run's row, then the same run's row moved
        if path == "records":
            store.append_records(run_id, [(0, "run_started", 2.0, None, {"tenant": "t"})])
            store.sync()
        else:
            store.append_many([_started(run_id, "t", seq=store.next_seq(run_id))])
    written = _of_runs(statements)
    assert written
    for statement in written:
        program = _program(store, statement)
        assert "Program" in {row[1] for row in program}, statement  # a tenant trigger still runs
        assert _aborting(program) == [], statement  # so SQLite keeps no statement journal for it
    # the new run's row made, and the row moved (the same run again): each written by some statement
    rows = store._db.conn().execute("SELECT run_id, started_at FROM trace_runs ORDER BY run_id").fetchall()
    assert [r[0] for r in rows] == ["new", "other"]


def test_the_triggers_still_keep_each_runs_tenant_and_span(store: SqliteTraceStore) -> None:
    store.append_records("a", [(0, "observation", 5.0, "c1", {"status": "ok"})])
    store.append_records("a", [(1, "run_started", 3.0, None, {"tenant": "late"})])
    store.append_many([_started("b", "bee", ts=7.0)])
    store.append_many([TraceEvent(run_id="b", seq=1, kind="observation", ts=2.0, data={})])
    store.sync()
    rows = store._db.conn().execute(
        "SELECT run_id, tenant, started_at, last_at FROM trace_runs ORDER BY run_id"
    )
    assert rows.fetchall() == [("a", "late", 3.0, 5.0), ("b", "bee", 2.0, 7.0)]
    assert [r.run_id for r in store.tenant_runs("late")] == ["a"]


_STEPS = st.lists(
    st.tuples(
        st.sampled_from(["r1", "r2", "r3"]),
        st.sampled_from(["run_started", "observation", "run_finished"]),
        st.floats(-1e6, 1e6, allow_nan=False),
        st.sampled_from(["t1", "t2", None]),
        st.booleans(),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=_STEPS)
def test_the_runs_listed_and_their_tenants_are_the_memory_stores(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, str, float, str | None, bool]]
) -> None:
    memory = MemoryTraceStore()
    with SqliteTraceStore(tmp_path_factory.mktemp("j") / "t.db") as sqlite:
        for run_id, kind, ts, tenant, as_records in steps:
            data = {"tenant": tenant} if kind == "run_started" else {}
            seq = memory.next_seq(run_id)
            event = TraceEvent(run_id=run_id, seq=seq, kind=kind, ts=ts, data=data)
            memory.append_many([event])
            if as_records:
                sqlite.append_records(run_id, [(seq, kind, ts, None, data)])
            else:
                sqlite.append_many([event])
        assert sqlite.runs(limit=10) == memory.runs(limit=10)
        for tenant in ("t1", "t2", None):
            assert sqlite.tenant_runs(tenant, limit=10) == memory.tenant_runs(tenant, limit=10), tenant
