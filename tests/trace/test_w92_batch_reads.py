"""PostgreSQL's read-only reader reads many runs' events in a batch (``events_of_runs``), as the store
does: it fell back to ``events`` run by run, a statement (and a transaction) each.

It runs the store's one statement in a ``READ ONLY`` transaction: the statements are counted
through a wrapper of psycopg's cursor, not timed; the answer is each run's ``events`` (a hypothesis
property over repeated, missing and unstorable ids and page sizes); a consumer that stops early
gives the reader's one connection back, and ``monitor`` reads what it read run by run.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace.evaluation.monitor import monitor
from actionspace.trace._runs_events import ReadsManyRuns, events_of_runs
from actionspace.trace.events import TraceEvent
from actionspace.trace.postgres import PostgresTraceReader, PostgresTraceStore
from tests.pg import fresh_schema


def _run(run_id: str, calls: int) -> list[TraceEvent]:
    """A run of ``calls`` calls, each three events, started and finished."""
    events = [TraceEvent(run_id=run_id, seq=0, kind="run_started", ts=1.0, data={"tenant": "a"})]
    for c in range(calls):
        seq, call = 1 + 3 * c, f"c{c}"
        events += [
            TraceEvent(run_id=run_id, seq=seq, kind="proposed", ts=2.0, call_id=call, data={"tool": "t"}),
            TraceEvent(run_id=run_id, seq=seq + 1, kind="dispatched", ts=2.0, call_id=call, data={}),
            TraceEvent(
                run_id=run_id,
                seq=seq + 2,
                kind="observation",
                ts=3.0,
                call_id=call,
                data={"status": "error" if c % 3 == 0 else "ok", "category": "transient"},
            ),
        ]
    events.append(TraceEvent(run_id=run_id, seq=1 + 3 * calls, kind="run_finished", ts=4.0, data={}))
    return events


def _whole(store: Any, ids: list[str]) -> list[tuple[str, list[TraceEvent]]]:
    return [(run_id, store.events(run_id)) for run_id in dict.fromkeys(ids)]


@pytest.fixture(scope="module")
def filled(pg_url: str) -> Iterator[str]:
    """A schema of the cluster holding runs m0..m39."""
    for url in fresh_schema(pg_url):
        with PostgresTraceStore(url) as store:
            for n in range(40):
                store.append_many(_run(f"m{n}", n % 5))
        yield url


class _Statements:
    """The statements run through psycopg's cursors (``execute``, ``stream``) while inside."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sql: list[str] = []
        for name in ("execute", "stream"):
            monkeypatch.setattr(psycopg.Cursor, name, self._counting(getattr(psycopg.Cursor, name)))

    def _counting(self, method: Any) -> Any:
        def counted(cursor: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            self.sql.append(str(query))
            return method(cursor, query, *args, **kwargs)

        return counted


def test_the_postgres_reader_reads_many_runs_in_one_statement(
    filled: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with PostgresTraceReader(filled) as reader:
        reads: list[list[str]] = []
        for ids in ([f"m{n}" for n in range(3)], [f"m{n}" for n in range(40)]):
            with monkeypatch.context() as patched:
                counted = _Statements(patched)
                got = list(events_of_runs(reader, ids, page=4))
            reads.append(counted.sql)
            assert got == _whole(reader, ids)
        of_events = [[sql for sql in read if "trace_events" in sql] for read in reads]
        assert [len(found) for found in of_events] == [1, 1], reads
        assert isinstance(reader, ReadsManyRuns)
        # in a read-only transaction, as every read of the reader
        assert reads[1][0] == "SET TRANSACTION READ ONLY" and "trace_events" in reads[1][1], reads[1]


def test_an_early_stop_gives_the_readers_one_connection_back(filled: str) -> None:
    with PostgresTraceReader(filled) as reader:
        read = reader.events_of_runs([f"m{n}" for n in range(40)], page=2)
        assert next(read)[0] == "m0"
        assert isinstance(read, Generator)
        read.close()  # the query cancelled, the transaction rolled back, the connection returned
        for _ in range(3):  # the reader's pool holds one connection
            assert len(reader.events("m4")) == 2 + 3 * 4
        assert monitor(reader).to_dict() == monitor(_OneByOne(reader)).to_dict()  # type: ignore[arg-type]


class _OneByOne:
    """A store read run by run: ``events`` and ``runs`` only."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def events(self, run_id: str) -> list[TraceEvent]:
        return list(self._store.events(run_id))

    def runs(self, *, limit: int = 50, since: float | None = None) -> Any:
        return self._store.runs(limit=limit, since=since)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    ids=st.lists(
        st.one_of(
            st.integers(0, 45).map(lambda n: f"m{n}"),  # m40..m45: no such run
            st.sampled_from(["", "m1\x00", "m\ud800", "m1 "]),
        ),
        max_size=16,
    ),
    page=st.integers(1, 9),
)
def test_the_postgres_reader_batch_read_gives_each_runs_events(
    filled: str, ids: list[str], page: int
) -> None:
    with PostgresTraceReader(filled) as reader:
        assert list(reader.events_of_runs(ids, page=page)) == _whole(reader, ids)
