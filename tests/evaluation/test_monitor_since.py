"""``monitor --since`` reads the runs active since then, not a summary of every run first.

The monitor listed the store's runs (up to 100,000) with their event counts, then kept those
active since the cutoff: a count over every event of every run, 0.3 s for 3,000 small runs on
SQLite, at each look at the last minutes. Stores list runs active since a time themselves.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from actionspace.evaluation.monitor import monitor
from actionspace.trace.events import RunSummary, TraceEvent, TraceStore
from actionspace.trace.memory import MemoryTraceStore
from actionspace.trace.sqlite import SqliteTraceStore

NOW = time.time()
OK = {"status": "ok"}


def _call(run_id: str, ts: float) -> list[TraceEvent]:
    return [
        TraceEvent(run_id=run_id, seq=0, kind="run_started", ts=ts, data={}),
        TraceEvent(run_id=run_id, seq=1, kind="proposed", ts=ts, call_id="c1", data={"tool": "add"}),
        TraceEvent(
            run_id=run_id,
            seq=2,
            kind="observation",
            ts=ts,
            call_id="c1",
            data={"tool": "add", "status": "ok"},
        ),
    ]


def _store(kind: str, tmp_path: Path) -> TraceStore:
    if kind == "memory":
        return MemoryTraceStore()
    return SqliteTraceStore(tmp_path / "trace.db")


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_runs_since_lists_only_the_runs_active_since_then(kind: str, tmp_path: Path) -> None:
    store = _store(kind, tmp_path)
    for i in range(30):
        store.append_many(_call(f"old-{i:02d}", NOW - 3600 - i))
    for i in range(3):
        store.append_many(_call(f"new-{i}", NOW - i))
    recent = store.runs(limit=100, since=NOW - 60)
    assert [s.run_id for s in recent] == ["new-0", "new-1", "new-2"]
    assert all(s.events == 3 and s.calls == 1 for s in recent)
    assert len(store.runs(limit=100)) == 33
    store.close()


def test_monitor_since_reads_the_events_of_recent_runs_only(tmp_path: Path) -> None:
    store = SqliteTraceStore(tmp_path / "trace.db")
    listed: list[float | None] = []
    runs = store.runs

    def listing(*, limit: int = 50, since: float | None = None) -> list[RunSummary]:
        listed.append(since)
        return runs(limit=limit, since=since)

    store.runs = listing  # type: ignore[method-assign]
    for i in range(40):
        store.append_many(_call(f"old-{i:02d}", NOW - 3600 - i))
    store.append_many(_call("new", NOW))
    read: list[str] = []
    events = store.events

    def counted(run_id: str) -> list[TraceEvent]:
        read.append(run_id)
        return events(run_id)

    store.events = counted  # type: ignore[method-assign]
    many = store.events_of_runs

    def counted_many(run_ids: Sequence[str], **kwargs: Any) -> Iterator[tuple[str, list[TraceEvent]]]:
        for run_id, run in many(run_ids, **kwargs):  # the runs' events read in one statement
            read.append(run_id)
            yield run_id, run

    store.events_of_runs = counted_many  # type: ignore[method-assign]
    report = monitor(store, since=NOW - 60)
    assert report.runs == 1 and report.calls == 1
    assert read == ["new"]
    assert listed == [NOW - 60]  # before: every run listed with its counts (all events read), then kept
    store.close()
