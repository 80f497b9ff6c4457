"""Many runs' events read in one statement, a page of rows at a time (``_runs_events``).

The per-tool metrics read every run's events with ``events(run_id)``: a statement per run. The
stores' ``events_of_runs`` reads them in one, grouped a run at a time as the rows arrive. Held here:
the answer is exactly ``events`` of each run (any page size, repeated, missing and unstorable ids),
the statements a read issues do not grow with the runs read (counted, not timed), rows are taken a
page at a time and a consumer that stops early leaves the store usable, and the monitor's report is
that of the run-by-run read.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace.evaluation.monitor import monitor
from actionspace.trace._runs_events import ReadsManyRuns, events_of_runs
from actionspace.trace.events import TraceEvent
from actionspace.trace.memory import MemoryTraceStore
from actionspace.trace.postgres import PostgresTraceStore
from actionspace.trace.sqlite import SqliteTraceReader, SqliteTraceStore
from tests.pg import fresh_schema

_RUNS = 12


def _run(n: int) -> list[TraceEvent]:
    """Run ``r<n>``: ``n % 5`` calls of tool t<n % 3>, every third one rejected on a field."""
    run_id = f"r{n}"
    events = [TraceEvent(run_id=run_id, seq=0, kind="run_started", ts=1.0 + n, data={"tenant": "a"})]
    for c in range(n % 5):
        call = f"c{c}"
        seq = 1 + 3 * c
        rejected = (n + c) % 3 == 0
        events += [
            TraceEvent(
                run_id=run_id, seq=seq, kind="proposed", ts=2.0 + n, call_id=call, data={"tool": f"t{n % 3}"}
            ),
            TraceEvent(run_id=run_id, seq=seq + 1, kind="dispatched", ts=2.0 + n, call_id=call, data={}),
            TraceEvent(
                run_id=run_id,
                seq=seq + 2,
                kind="observation",
                ts=3.0 + n,
                call_id=call,
                data={"status": "error", "category": "validation_error", "field_errors": [{"path": "/x"}]}
                if rejected
                else {"status": "ok", "result": {"n": n, "c": c}},
            ),
        ]
    return events


def _fill(store: Any) -> None:
    for n in range(_RUNS):
        store.append_many(_run(n))


@pytest.fixture(scope="module")
def sqlite_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("w91") / "t.db"
    with SqliteTraceStore(path) as store:
        _fill(store)
    return path


_IDS = st.lists(
    st.one_of(
        st.integers(0, _RUNS + 2).map(lambda n: f"r{n}"),  # r12, r13, r14: no such run
        st.sampled_from(["", "r1\x00", "r\ud800", "r1 "]),
    ),
    max_size=20,
)


def _whole(store: Any, ids: list[str]) -> list[tuple[str, list[TraceEvent]]]:
    return [(run_id, _events(store, run_id)) for run_id in dict.fromkeys(ids)]


def _events(store: Any, run_id: str) -> list[TraceEvent]:
    """``store.events(run_id)``; ``[]`` for an id no text column holds (an unpaired surrogate, or
    U+0000 in PostgreSQL), as the read-only readers and ``call_events`` answer it (the stores'
    ``events`` raise)."""
    try:
        events: list[TraceEvent] = store.events(run_id)
    except (UnicodeEncodeError, psycopg.DataError):
        return []
    return events


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ids=_IDS, page=st.integers(1, 7))
def test_sqlite_events_of_runs_are_each_runs_events(sqlite_file: Path, ids: list[str], page: int) -> None:
    store = SqliteTraceStore(sqlite_file)
    reader = SqliteTraceReader(sqlite_file)
    try:
        for opened in (store, reader):
            assert isinstance(opened, ReadsManyRuns)
            assert list(opened.events_of_runs(ids, page=page)) == _whole(opened, ids)
    finally:
        store.close()
        reader.close()


@settings(max_examples=30, deadline=None)
@given(ids=_IDS, page=st.integers(1, 7))
def test_memory_events_of_runs_are_each_runs_events(ids: list[str], page: int) -> None:
    store = MemoryTraceStore()
    _fill(store)
    assert list(events_of_runs(store, ids, page=page)) == _whole(store, ids)


def test_a_page_below_one_is_refused(sqlite_file: Path) -> None:
    with SqliteTraceStore(sqlite_file) as store:
        for bad in (0, -1, 1.5):
            with pytest.raises(ValueError, match="page"):
                store.events_of_runs(["r1"], page=bad)  # type: ignore[arg-type]


class _Statements:
    """SQL statements naming ``trace_events`` run on every SQLite connection opened meanwhile."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        opened = sqlite3.connect

        def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
            conn: sqlite3.Connection = opened(*args, **kwargs)
            conn.set_trace_callback(self._traced)
            return conn

        monkeypatch.setattr(sqlite3, "connect", connect)

    def _traced(self, sql: str) -> None:
        if "trace_events" in sql and sql.lstrip().upper().startswith("SELECT"):
            self.count += 1


def _statements_of(
    read: Callable[[Any, list[str]], object], ids: list[str], path: Path, monkeypatch: pytest.MonkeyPatch
) -> int:
    with monkeypatch.context() as patched:
        counted = _Statements(patched)
        with SqliteTraceStore(path) as store:
            read(store, ids)
        return counted.count


def test_sqlite_statements_do_not_grow_with_the_runs_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "many.db"
    with SqliteTraceStore(path) as store:
        for n in range(60):
            store.append_many(_renamed(_run(n % 10), n))
    few = [f"m{n}" for n in range(3)]
    many = [f"m{n}" for n in range(60)]
    reads: list[Callable[[Any, list[str]], object]] = [
        lambda s, ids: list(s.events_of_runs(ids)),
        lambda s, ids: monitor(s, run_ids=ids),
    ]
    for read in reads:
        counts = [_statements_of(read, ids, path, monkeypatch) for ids in (few, many)]
        assert counts[0] >= 1
        assert counts[1] == counts[0], counts


def _renamed(events: list[TraceEvent], n: int) -> list[TraceEvent]:
    return [
        TraceEvent(run_id=f"m{n}", seq=e.seq, kind=e.kind, ts=e.ts, call_id=e.call_id, data=e.data)
        for e in events
    ]


class _OneByOne:
    """A store read run by run: ``events`` and ``runs`` only."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def events(self, run_id: str) -> list[TraceEvent]:
        return list(self._store.events(run_id))

    def runs(self, *, limit: int = 50, since: float | None = None) -> Any:
        return self._store.runs(limit=limit, since=since)


@pytest.mark.parametrize("since", [None, 6.5])
def test_the_monitor_reads_what_it_read_run_by_run(sqlite_file: Path, since: float | None) -> None:
    with SqliteTraceStore(sqlite_file) as store:
        batch = monitor(store, since=since).to_dict()
        assert batch == monitor(_OneByOne(store), since=since).to_dict()  # type: ignore[arg-type]
        assert batch["calls"] > 10


def test_rows_are_taken_a_page_at_a_time_and_an_early_stop_frees_the_reader(sqlite_file: Path) -> None:
    reader = SqliteTraceReader(sqlite_file)
    taken: list[int] = []
    pages = reader._pages

    def counted(sql: str, params: tuple[object, ...], size: int) -> Iterator[list[tuple[Any, ...]]]:
        for rows in pages(sql, params, size):
            taken.append(len(rows))
            yield rows

    reader._pages = counted  # type: ignore[method-assign]
    try:
        read = reader.events_of_runs([f"r{n}" for n in range(_RUNS)], page=2)
        run_id, first = next(read)
        assert (run_id, len(first)) == ("r0", 1)
        assert sum(taken) <= 2 and max(taken) <= 2  # the first run and what its page held, no more
        assert isinstance(read, Generator)
        read.close()
        done: list[list[TraceEvent]] = []
        other = threading.Thread(target=lambda: done.append(reader.events("r4")))
        other.start()
        other.join(10)
        assert done == [reader.events("r4")] and len(done[0]) == 13
    finally:
        reader.close()


def test_an_early_stop_on_the_store_leaves_it_writable(sqlite_file: Path, tmp_path: Path) -> None:
    path = tmp_path / "copy.db"
    with sqlite3.connect(sqlite_file) as src, sqlite3.connect(path) as dst:
        src.backup(dst)
    with SqliteTraceStore(path) as store:
        read = store.events_of_runs([f"r{n}" for n in range(_RUNS)], page=1)
        assert next(read)[0] == "r0"
        assert isinstance(read, Generator)
        read.close()
        store.append_many(_renamed(_run(3), 99))
        store.sync()
        assert [e.seq for e in store.events("m99")] == list(range(10))


@pytest.fixture
def schema(pg_url: str) -> Iterator[str]:
    yield from fresh_schema(pg_url)


def test_postgres_events_of_runs_one_statement_streamed(schema: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with PostgresTraceStore(schema) as store:
        _fill(store)
        for n in range(40):
            store.append_many(_renamed(_run(n % 10), n))
        cases = [
            [f"r{n}" for n in range(_RUNS + 2)],
            ["r3", "r1", "r3", "", "r\ud800", "r1\x00", "r99", "r4"],
        ]
        for ids in cases:
            for page in (1, 3, 1000):
                assert list(store.events_of_runs(ids, page=page)) == _whole(store, ids)
        assert monitor(store).to_dict() == monitor(_OneByOne(store)).to_dict()  # type: ignore[arg-type]

        counts: list[int] = []
        for ids in ([f"m{n}" for n in range(3)], [f"m{n}" for n in range(40)]):
            calls = [0]
            for name in ("execute", "stream"):
                method = getattr(psycopg.Cursor, name)
                monkeypatch.setattr(psycopg.Cursor, name, _counting(method, calls))
            monitor(store, run_ids=ids)
            monkeypatch.undo()
            counts.append(calls[0])
        assert counts[0] >= 1 and counts[1] == counts[0], counts

        read = store.events_of_runs([f"m{n}" for n in range(40)], page=2)
        assert next(read)[0] == "m0"
        assert isinstance(read, Generator)
        read.close()  # the query cancelled, its connection back in the pool, usable
        for _ in range(5):  # more reads than the pool holds connections
            assert [e.seq for e in store.events("m4")] == list(range(13))


def _counting(method: Any, calls: list[int]) -> Any:
    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return method(self, *args, **kwargs)

    return counted
