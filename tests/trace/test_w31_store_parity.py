"""The three trace stores answer alike whatever order the clocks of the writers put on the events.

A run's events are numbered by ``seq``; their ``ts`` comes from whichever host wrote them, and a
clock stepped back (NTP, another host) makes ``ts`` go down while ``seq`` goes up. Memory, SQLite
and PostgreSQL must then list the same runs for ``runs(since, limit)``, in the same order, with the
same span, and answer ``events``, ``heads`` and ``next_seq`` alike.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace.service.scoping import heads
from actionspace.trace.events import TraceEvent, TraceStore
from actionspace.trace.memory import MemoryTraceStore
from actionspace.trace.sqlite import SqliteTraceStore

RUNS = st.sampled_from(["ra", "rb", "rc", "rd"])
STAMPS = st.sampled_from([10.0, 20.0, 20.0, 30.0, 40.0, 15.5])
KINDS = st.sampled_from(["run_started", "parsed", "observation", "run_finished"])

BATCH = st.tuples(
    RUNS,
    st.lists(st.tuples(st.integers(0, 6), KINDS, STAMPS, st.booleans()), min_size=1, max_size=4),
)
RECORDS = st.tuples(RUNS, st.lists(st.tuples(KINDS, STAMPS), min_size=1, max_size=4))
OPS = st.lists(
    st.one_of(st.tuples(st.just("many"), BATCH), st.tuples(st.just("records"), RECORDS)), max_size=8
)
QUERIES = st.lists(st.tuples(st.none() | STAMPS, st.integers(0, 5)), min_size=1, max_size=4)


def _data(kind: str, error: bool) -> dict[str, Any]:
    return {"status": "error" if error else "ok"} if kind == "observation" else {"n": 1}


def _apply(store: TraceStore, op: tuple[str, Any]) -> str:
    """Do ``op`` on ``store``; what it answered (``ok`` or the error it raised)."""
    what, (run_id, items) = op
    try:
        if what == "many":
            store.append_many(
                [
                    TraceEvent(run_id=run_id, seq=seq, kind=kind, ts=ts, data=_data(kind, error))
                    for seq, kind, ts, error in items
                ]
            )
        else:
            start = store.next_seq(run_id)
            records = [(start + i, kind, ts, None, _data(kind, False)) for i, (kind, ts) in enumerate(items)]
            store.append_records(run_id, records)  # type: ignore[attr-defined]
    except ValueError:
        return "ValueError"
    return "ok"


def _answers(store: TraceStore, queries: list[tuple[float | None, int]]) -> dict[str, Any]:
    per_run = {
        rid: (store.events(rid), heads(store, rid), store.next_seq(rid)) for rid in ("ra", "rb", "rc", "rd")
    }
    listed = {str(q): _listed(store, q[0], q[1]) for q in queries}
    return {"runs": per_run, "listed": listed}


def _listed(store: TraceStore, since: float | None, limit: int) -> Any:
    try:
        return store.runs(since=since, limit=limit)
    except ValueError as exc:  # a limit below 1: refused alike by every store
        return str(exc)


def _compare(stores: list[TraceStore], ops: list[tuple[str, Any]], queries: list[Any]) -> None:
    for op in ops:
        done = [_apply(s, op) for s in stores]
        assert len(set(done)) == 1, f"{op}: {[type(s).__name__ for s in stores]} answered {done}"
    first = _answers(stores[0], queries)
    for other in stores[1:]:
        assert _answers(other, queries) == first, type(other).__name__


@pytest.fixture
def folder() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="w31-parity-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


PARITY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _check(folder: Path, extra: Callable[[], list[TraceStore]]) -> None:
    @PARITY
    @given(ops=OPS, queries=QUERIES)
    def run(ops: list[tuple[str, Any]], queries: list[Any]) -> None:
        stores: list[TraceStore] = [
            MemoryTraceStore(),
            SqliteTraceStore(Path(tempfile.mkdtemp(dir=folder)) / "t.db"),
            *extra(),
        ]
        try:
            _compare(stores, ops, queries)
        finally:
            for store in stores:
                store.close()

    run()


def test_memory_and_sqlite_list_runs_alike_whatever_the_clocks_said(folder: Path) -> None:
    _check(folder, list)


def test_memory_sqlite_and_postgres_list_runs_alike_whatever_the_clocks_said(
    folder: Path, pg_url: str
) -> None:
    import psycopg

    from actionspace.trace.postgres import PostgresTraceStore
    from tests.pg import fresh_schema

    schema = fresh_schema(pg_url)
    url = next(schema)
    try:

        def postgres() -> list[TraceStore]:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("DROP TABLE IF EXISTS trace_events, trace_runs, trace_claims, trace_meta")
            return [PostgresTraceStore(url)]

        _check(folder, postgres)
    finally:
        for _ in schema:
            pass


def test_a_run_whose_last_event_was_stamped_by_a_clock_stepped_back_is_still_listed_since(
    folder: Path,
) -> None:
    store = MemoryTraceStore()
    store.append_many(
        [
            TraceEvent(run_id="r", seq=0, kind="run_started", ts=100.0),
            TraceEvent(run_id="r", seq=1, kind="parsed", ts=50.0),  # written after a step back
        ]
    )
    store.append_many([TraceEvent(run_id="s", seq=0, kind="run_started", ts=70.0)])
    listed = store.runs(since=80.0)
    assert [(s.run_id, s.started_at, s.last_at) for s in listed] == [("r", 50.0, 100.0)]
    assert [s.run_id for s in store.runs()] == ["r", "s"]


def test_runs_active_at_one_moment_are_listed_by_id_in_every_store(folder: Path) -> None:
    memory, sqlite = MemoryTraceStore(), SqliteTraceStore(folder / "t.db")
    for store in (memory, sqlite):
        for run_id in ("rc", "ra", "rb"):
            store.append_many([TraceEvent(run_id=run_id, seq=0, kind="run_started", ts=5.0)])
    assert [s.run_id for s in memory.runs()] == [s.run_id for s in sqlite.runs()] == ["ra", "rb", "rc"]
    sqlite.close()


def test_a_batch_repeating_a_stored_seq_is_refused_whole_by_the_memory_store() -> None:
    store = MemoryTraceStore()
    store.append_many([TraceEvent(run_id="r", seq=0, kind="run_started", ts=1.0)])
    again = [
        TraceEvent(run_id="s", seq=0, kind="run_started", ts=1.0),
        TraceEvent(run_id="r", seq=0, kind="run_started", ts=2.0),
    ]
    with pytest.raises(ValueError, match="repeats"):
        store.append_many(again)
    with pytest.raises(ValueError, match="repeats"):
        store.append_many([TraceEvent(run_id="t", seq=3, kind="a", ts=1.0)] * 2)
    assert [e.ts for e in store.events("r")] == [1.0]
    assert store.events("s") == [] and store.events("t") == []


def test_records_a_process_appended_are_numbered_before_a_batch_it_appends_later(folder: Path) -> None:
    store = SqliteTraceStore(folder / "t.db")
    try:
        store.append_records("r", [(0, "run_started", 1.0, None, {})])
        with pytest.raises(ValueError, match="repeats"):
            store.append_many([TraceEvent(run_id="r", seq=0, kind="parsed", ts=2.0)])
        assert [(e.seq, e.kind) for e in store.events("r")] == [(0, "run_started")]
    finally:
        store.close()


def test_an_observation_without_a_call_id_counts_as_a_call_in_postgres(pg_url: str) -> None:
    from actionspace.trace.postgres import PostgresTraceStore
    from tests.pg import fresh_schema

    schema = fresh_schema(pg_url)
    store = PostgresTraceStore(next(schema))
    try:
        store.append_many(
            [TraceEvent(run_id="r", seq=0, kind="observation", ts=1.0, data={"status": "error"})]
        )
        (summary,) = store.runs()
        assert (summary.calls, summary.errors) == (1, 1)
    finally:
        store.close()
        for _ in schema:
            pass
