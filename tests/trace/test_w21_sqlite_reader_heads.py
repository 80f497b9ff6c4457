"""The read-only SQLite trace reader reads a run's head events alone, as the store does.

A tenant check or a listing's row (``service.scoping.heads`` / ``heads_of``, ``RunTenants``) asks a
store for a run's ``run_started`` and ``run_finished``; a store without ``heads`` is read whole
instead, and the reader the commands open (``open_trace_store(url, read_only=True)``) had none.
Both now read them through the partial index on the head rows (``_sqlite_runs``): the plan names
the index, and the virtual machine's steps (a progress handler called on every one) stay those of
a short run's however long the run is, not counted in time.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.service.scoping import RunTenants, heads, heads_of
from actionspace.trace.events import TraceEvent
from actionspace.trace.memory import MemoryTraceStore
from actionspace.trace.sqlite import SqliteTraceReader, SqliteTraceStore
from actionspace.trace.store import open_trace_store

LONG = 5_000
_INDEXED = "SELECT count(*) FROM sqlite_master WHERE name = 'trace_events_heads'"


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


@pytest.fixture
def path(tmp_path: Path) -> Iterator[Path]:
    file = tmp_path / "t.db"
    with SqliteTraceStore(file) as store:
        store.append_many(_run("long", LONG))
        store.append_many(_run("short", 3, tenant="b", finished=False))
    yield file


class _Steps:
    """The virtual machine's steps on a connection (a progress handler called on every one)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.count = 0
        conn.set_progress_handler(self._step, 1)

    def _step(self) -> int:
        self.count += 1
        return 0


def _reader(path: Path) -> SqliteTraceReader:
    reader = open_trace_store(f"sqlite:///{path}", read_only=True)
    assert isinstance(reader, SqliteTraceReader)
    return reader


def test_the_reader_answers_heads_from_the_head_rows_alone(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reader = _reader(path)
    try:

        def whole(run_id: str) -> list[TraceEvent]:
            raise AssertionError(f"the whole run {run_id!r} was read")

        monkeypatch.setattr(reader, "events", whole)
        steps = _Steps(reader._conn)
        assert [(e.seq, e.kind) for e in heads(reader, "long")] == [
            (0, "run_started"),
            (LONG + 1, "run_finished"),
        ]
        long_steps, steps.count = steps.count, 0
        assert [(e.seq, e.kind) for e in heads(reader, "short")] == [(0, "run_started")]
        short_steps = steps.count
        # a run of 5,002 rows costs what a run of 4 does (a scan of it: tens of thousands of steps)
        assert long_steps <= 2 * short_steps + 50, (long_steps, short_steps)
        tenants = RunTenants(reader)
        assert (tenants("long"), tenants("short"), tenants("missing")) == ("a", "b", None)
        steps.count = 0
        many = heads_of(reader, ["long", "short", "missing"])
        assert {k: [e.seq for e in v] for k, v in many.items()} == {
            "long": [0, LONG + 1],
            "short": [0],
            "missing": [],
        }
        assert steps.count <= 4 * short_steps + 100, steps.count
    finally:
        reader.close()


@pytest.mark.parametrize("many", [False, True])
def test_the_head_queries_of_the_reader_and_the_store_seek_the_partial_index(path: Path, many: bool) -> None:
    seen: list[str] = []
    with SqliteTraceStore(path) as store:
        conn = store._db.conn()
        conn.set_trace_callback(seen.append)
        store.heads_many(["long", "short"]) if many else store.heads("long")
        conn.set_trace_callback(None)
    reader = _reader(path)
    try:
        reader._conn.set_trace_callback(seen.append)
        reader.heads_many(["long", "short"]) if many else reader.heads("long")
    finally:
        reader.close()
    queries = [s for s in seen if s.startswith("SELECT") and "FROM trace_events" in s]
    assert len(queries) == 2, seen
    with sqlite3.connect(path) as plain:
        for query in queries:
            plan = " ".join(str(row[3]) for row in plain.execute(f"EXPLAIN QUERY PLAN {query}"))
            assert "USING INDEX trace_events_heads" in plan, (query, plan)


def test_a_file_without_the_index_is_answered_alike_and_its_writer_adds_the_index(path: Path) -> None:
    with sqlite3.connect(path) as plain:
        plain.execute("DROP INDEX trace_events_heads")
    reader = _reader(path)  # an earlier version's file, opened read-only: nothing is written
    try:
        assert [e.seq for e in reader.heads("long")] == [0, LONG + 1]
    finally:
        reader.close()
    with sqlite3.connect(path) as plain:
        assert plain.execute(_INDEXED).fetchone() == (0,)
    with SqliteTraceStore(path) as store:
        assert [e.seq for e in store.heads("long")] == [0, LONG + 1]
    with sqlite3.connect(path) as plain:
        assert plain.execute(_INDEXED).fetchone() == (1,)


_KINDS = st.sampled_from(["run_started", "run_finished", "observation", "model_output"])
_IDS = st.sampled_from(["r", "s", "t", "\ud800", "a\x00b", "missing"])


@settings(max_examples=40, deadline=None)
@given(
    rows=st.lists(
        st.tuples(st.sampled_from(["r", "s", "t", "a\x00b"]), _KINDS, st.integers(0, 3)), max_size=20
    ),
    asked=st.lists(_IDS, max_size=5),
)
def test_the_reader_heads_agree_with_the_store_and_the_memory_store(
    tmp_path_factory: pytest.TempPathFactory, rows: list[tuple[str, str, int]], asked: list[str]
) -> None:
    events = [
        TraceEvent(run_id=run, seq=seq, kind=kind, ts=float(tenant), data={"tenant": tenant})
        for seq, (run, kind, tenant) in enumerate(rows)
    ]
    memory = MemoryTraceStore()
    memory.append_many(events)
    file = tmp_path_factory.mktemp("h") / "t.db"
    with SqliteTraceStore(file) as store:
        store.append_many(events)
        with SqliteTraceReader(file) as reader:
            for run_id in [*asked, "r"]:
                assert reader.heads(run_id) == store.heads(run_id) == memory.heads(run_id), run_id
            expected = {run_id: memory.heads(run_id) for run_id in asked}
            assert reader.heads_many(asked) == store.heads_many(asked) == expected
