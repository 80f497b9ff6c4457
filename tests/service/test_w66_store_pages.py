"""Every trace store pages its run listing by a ``(last_at, run_id)`` cursor: the pages, one
after the other, are the whole listing in its order, ties and unusual run ids included."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from actionspace.trace.events import PagesRuns, TraceEvent, TraceStore
from actionspace.trace.memory import MemoryTraceStore
from actionspace.trace.sqlite import SqliteTraceStore

IDS = ["a", "B", "b", "é", "z", "日本", "a b", "Z", "ab", "\U0001f600", "a-1", "A"]


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def paged_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TraceStore]:
    if request.param == "memory":
        opened: TraceStore = MemoryTraceStore()
    elif request.param == "sqlite":
        opened = SqliteTraceStore(tmp_path / "t.db")
    else:
        from actionspace.trace.postgres import PostgresTraceStore
        from tests.pg import fresh_schema

        schema = fresh_schema(request.getfixturevalue("pg_url"))
        opened = PostgresTraceStore(next(schema))
        request.addfinalizer(lambda: [None for _ in schema])
    events = [
        TraceEvent(run_id=run_id, seq=0, kind="run_started", ts=100.0 + i // 4, data={})
        for i, run_id in enumerate(IDS)
    ]
    events.append(TraceEvent(run_id="b", seq=1, kind="run_finished", ts=101.0, data={"status": "ok"}))
    opened.append_many(events)
    yield opened
    opened.close()


@pytest.mark.parametrize("size", [1, 3, 5, 12, 50])
def test_pages_after_a_cursor_are_the_whole_listing_in_order(paged_store: TraceStore, size: int) -> None:
    assert isinstance(paged_store, PagesRuns)
    whole = paged_store.runs(limit=100)
    assert len(whole) == len(IDS)
    paged = []
    page = paged_store.runs(limit=size)
    while page:
        paged += page
        page = paged_store.runs_after((page[-1].last_at, page[-1].run_id), limit=size)
    assert paged == whole
    assert [s.finished for s in paged if s.run_id == "b"] == [True]


def test_a_cursor_with_since_lists_only_runs_active_since(paged_store: TraceStore) -> None:
    assert isinstance(paged_store, PagesRuns)
    assert paged_store.runs_after((1e9, ""), limit=100, since=101.0) == paged_store.runs(
        limit=100, since=101.0
    )
    assert paged_store.runs_after((101.0, "\U0010ffff"), limit=100, since=101.0) == []
    with pytest.raises(ValueError, match="limit must be a positive int"):
        paged_store.runs_after((101.0, ""), limit=0)
