"""Behaviour every trace store shares, run against the memory and the SQLite store."""

from __future__ import annotations

from actionspace.trace.events import FindsRunIds, TraceEvent, TraceStore, summarize
from tests.trace.factories import batch, calendar_run


def event(run_id: str, seq: int, ts: float, kind: str = "parsed", **data: object) -> TraceEvent:
    return TraceEvent(run_id=run_id, seq=seq, kind=kind, ts=ts, data=data)


def test_every_store_satisfies_the_protocol(store: TraceStore) -> None:
    assert isinstance(store, TraceStore)
    assert isinstance(store, FindsRunIds)


def test_appended_events_come_back_with_every_field(store: TraceStore) -> None:
    events = calendar_run("r1")
    store.append_many(events)
    assert store.events("r1") == events


def test_events_come_back_ordered_by_seq_whatever_the_append_order(store: TraceStore) -> None:
    store.append_many([event("r", 2, 3.0)])
    store.append_many([event("r", 0, 1.0), event("r", 1, 2.0)])
    assert [e.seq for e in store.events("r")] == [0, 1, 2]


def test_events_of_an_unknown_run_are_an_empty_list(store: TraceStore) -> None:
    store.append_many([event("r", 0, 1.0)])
    assert store.events("other") == []


def test_an_empty_batch_changes_nothing(store: TraceStore) -> None:
    store.append_many([])
    assert store.runs() == []


def test_data_round_trips_nested_values_and_unicode(store: TraceStore) -> None:
    data = {"raw": "café ✓ 日本", "nested": {"list": [1, 2.5, None, True], "empty": {}}}
    store.append_many([TraceEvent(run_id="r", seq=0, kind="model_output", ts=1.0, call_id="c", data=data)])
    assert store.events("r")[0].data == data


def test_next_seq_is_zero_for_a_new_run(store: TraceStore) -> None:
    assert store.next_seq("new") == 0


def test_next_seq_is_one_past_the_last_event_of_the_run(store: TraceStore) -> None:
    store.append_many(batch("r", 0, 6))
    store.append_many(batch("r", 6, 6))
    store.append_many(batch("other", 0, 3))
    assert store.next_seq("r") == 12
    assert store.next_seq("other") == 3


def test_runs_lists_the_most_recent_first(store: TraceStore) -> None:
    store.append_many([event("old", 0, 10.0), event("old", 1, 11.0)])
    store.append_many([event("new", 0, 30.0)])
    store.append_many([event("middle", 0, 20.0)])
    assert [s.run_id for s in store.runs()] == ["new", "middle", "old"]


def test_a_run_that_gets_a_new_event_moves_to_the_top(store: TraceStore) -> None:
    store.append_many([event("a", 0, 10.0)])
    store.append_many([event("b", 0, 20.0)])
    store.append_many([event("a", 1, 30.0)])
    assert [s.run_id for s in store.runs()] == ["a", "b"]


def test_runs_returns_at_most_limit_runs(store: TraceStore) -> None:
    for i in range(7):
        store.append_many([event(f"run-{i}", 0, float(i))])
    assert [s.run_id for s in store.runs(limit=3)] == ["run-6", "run-5", "run-4"]
    assert len(store.runs()) == 7


def test_run_summary_counts_events_calls_errors_and_finish(store: TraceStore) -> None:
    events = calendar_run("r1")
    store.append_many(events)
    [summary] = store.runs()
    assert summary == summarize("r1", events)
    assert (summary.events, summary.calls, summary.errors, summary.finished) == (22, 3, 1, True)
    assert (summary.started_at, summary.last_at) == (events[0].ts, events[-1].ts)


def test_a_run_without_run_finished_is_reported_unfinished(store: TraceStore) -> None:
    store.append_many(calendar_run("r1", finished=False))
    assert not store.runs()[0].finished


def test_run_ids_finds_runs_by_prefix(store: TraceStore) -> None:
    assert isinstance(store, FindsRunIds)
    for rid in ("abc-1", "abc-2", "abd", "x%_"):
        store.append_many([event(rid, 0, 1.0)])
    assert store.run_ids("abc") == ["abc-1", "abc-2"]
    assert store.run_ids("ab", limit=2) == ["abc-1", "abc-2"]
    assert store.run_ids("x%") == ["x%_"]
    assert store.run_ids("%") == []
    assert store.run_ids("ABC") == []
    assert store.run_ids() == ["abc-1", "abc-2", "abd", "x%_"]
