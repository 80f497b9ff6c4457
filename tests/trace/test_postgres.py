"""The PostgreSQL trace store against a real cluster (see tests/pg.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from actionspace.trace.events import (
    AppendsNew,
    AppendsRecords,
    FindsRunIds,
    TraceEvent,
    TraceStore,
    summarize,
)
from actionspace.trace.postgres import PostgresTraceStore
from actionspace.trace.store import open_trace_store
from tests.pg import fresh_schema
from tests.trace.factories import batch, calendar_run


@pytest.fixture
def url(pg_url: str) -> Iterator[str]:
    yield from fresh_schema(pg_url)


@pytest.fixture
def store(url: str) -> Iterator[PostgresTraceStore]:
    opened = PostgresTraceStore(url)
    yield opened
    opened.close()


def event(run_id: str, seq: int, ts: float, kind: str = "parsed", **data: object) -> TraceEvent:
    return TraceEvent(run_id=run_id, seq=seq, kind=kind, ts=ts, data=data)


def test_the_store_satisfies_the_protocol_and_its_capabilities(store: PostgresTraceStore) -> None:
    for protocol in (TraceStore, FindsRunIds, AppendsNew, AppendsRecords):
        assert isinstance(store, protocol)


def test_a_postgresql_url_opens_the_postgres_store(url: str) -> None:
    opened = open_trace_store(url)
    try:
        assert isinstance(opened, PostgresTraceStore)
    finally:
        opened.close()


def test_appended_events_come_back_with_every_field(store: PostgresTraceStore) -> None:
    events = calendar_run("r1")
    store.append_many(events)
    assert store.events("r1") == events
    assert store.events("other") == []


def test_data_round_trips_nested_values_and_unicode(store: PostgresTraceStore) -> None:
    data = {"raw": "café ✓ 日本", "nested": {"list": [1, 2.5, None, True], "empty": {}}}
    store.append_many([TraceEvent(run_id="r", seq=0, kind="model_output", ts=1.25, call_id="c", data=data)])
    assert store.events("r") == [
        TraceEvent(run_id="r", seq=0, kind="model_output", ts=1.25, call_id="c", data=data)
    ]


def test_events_come_back_ordered_by_seq_whatever_the_append_order(store: PostgresTraceStore) -> None:
    store.append_many([event("r", 2, 3.0), event("r", 10, 4.0)])
    store.append_many([event("r", 1, 2.0), event("r", 0, 1.0)])
    assert [e.seq for e in store.events("r")] == [0, 1, 2, 10]


def test_a_batch_repeating_a_stored_event_is_refused_whole(store: PostgresTraceStore) -> None:
    store.append_many([event("r", 0, 1.0)])
    with pytest.raises(ValueError, match="nothing of the batch was written"):
        store.append_many([event("r", 1, 2.0), event("r", 0, 9.0), event("s", 0, 9.0)])
    assert store.events("r") == [event("r", 0, 1.0)]
    assert store.events("s") == []
    assert [s.run_id for s in store.runs()] == ["r"]


def test_append_new_skips_stored_events_and_counts_the_rest(store: PostgresTraceStore) -> None:
    events = calendar_run("r1")
    assert store.append_new(events[:5]) == 5
    assert store.append_new(events) == len(events) - 5
    assert store.append_new(events) == 0
    assert store.events("r1") == events


def test_records_append_like_events(store: PostgresTraceStore) -> None:
    store.append_records("r", [(0, "parsed", 1.0, None, {"a": 1}), (1, "observation", 2.0, "c1", {})])
    assert store.events("r") == [
        event("r", 0, 1.0, a=1),
        TraceEvent(run_id="r", seq=1, kind="observation", ts=2.0, call_id="c1"),
    ]


def test_next_seq_is_one_past_the_last_event_of_the_run(store: PostgresTraceStore) -> None:
    assert store.next_seq("r") == 0
    store.append_many(batch("r", 0, 6))
    store.append_many(batch("r", 6, 6))
    store.append_many(batch("other", 0, 3))
    assert store.next_seq("r") == 12
    assert store.next_seq("other") == 3


def test_runs_lists_the_most_recently_active_first(store: PostgresTraceStore) -> None:
    store.append_many([event("old", 0, 10.0), event("old", 1, 11.0)])
    store.append_many([event("new", 0, 30.0)])
    store.append_many([event("middle", 0, 20.0)])
    assert [s.run_id for s in store.runs()] == ["new", "middle", "old"]
    store.append_many([event("old", 2, 40.0)])
    assert [s.run_id for s in store.runs(limit=2)] == ["old", "new"]


def test_run_summary_counts_events_calls_errors_and_finish(store: PostgresTraceStore) -> None:
    finished, unfinished = calendar_run("r1"), calendar_run("r2", start=1_800_000_000.0, finished=False)
    store.append_many(finished)
    store.append_many(unfinished)
    assert store.runs() == [summarize("r2", unfinished), summarize("r1", finished)]
    assert not store.runs()[0].finished and store.runs()[1].finished


def test_run_ids_finds_runs_by_prefix(store: PostgresTraceStore) -> None:
    for rid in ("abc-1", "abc-2", "abd", "x%_", "Z"):
        store.append_many([event(rid, 0, 1.0)])
    assert store.run_ids("abc") == ["abc-1", "abc-2"]
    assert store.run_ids("ab", limit=2) == ["abc-1", "abc-2"]
    assert store.run_ids("x%") == ["x%_"]
    assert store.run_ids("%") == []
    assert store.run_ids() == ["Z", "abc-1", "abc-2", "abd", "x%_"]


def test_two_stores_on_one_database_share_the_trace(store: PostgresTraceStore, url: str) -> None:
    with PostgresTraceStore(url) as other:
        other.append_many(batch("r", 0, 3))
    assert store.next_seq("r") == 3
    assert len(store.events("r")) == 3
