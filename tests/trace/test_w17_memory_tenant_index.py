"""The memory trace store keeps a tenant index as runs start: its first tenant listing reads the
listed tenant's runs only, not every run's events to learn its tenant.

Counted as the runs whose events the store reads (``events``), not timed. A run whose first event
is not its ``run_started`` (numbered later, or written after other events) is still listed under
its tenant, and is read at each listing (its tenant may still change).
"""

from __future__ import annotations

from typing import Any

import pytest

from actionspace.trace.events import TraceEvent
from actionspace.trace.memory import MemoryTraceStore

BUSY = 3_000
QUIET = 6


def _started(run_id: str, tenant: Any, at: float, seq: int = 0) -> TraceEvent:
    return TraceEvent(run_id=run_id, seq=seq, kind="run_started", ts=at, data={"tenant": tenant})


def _counting(store: MemoryTraceStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    read: list[str] = []
    events = store.events

    def counted(run_id: str) -> list[TraceEvent]:
        read.append(run_id)
        return events(run_id)

    monkeypatch.setattr(store, "events", counted)
    return read


def test_the_first_tenant_listing_reads_that_tenants_runs_only(monkeypatch: pytest.MonkeyPatch) -> None:
    store = MemoryTraceStore()
    store.append_many([_started(f"bz-{i:05d}", "busy", 5_000.0 + i) for i in range(BUSY)])
    for i in range(QUIET):  # started one at a time, as runs start
        store.append_records(f"qt-{i}", [(0, "run_started", 1_000.0 + i, None, {"tenant": "quiet"})])
    read = _counting(store, monkeypatch)
    listed = store.tenant_runs("quiet", limit=3)
    assert [s.run_id for s in listed] == ["qt-5", "qt-4", "qt-3"]
    assert sorted(set(read)) == [f"qt-{i}" for i in range(QUIET)], len(read)  # not 3,000 busy runs


def test_a_run_whose_first_event_is_not_its_run_started_is_listed_under_its_tenant(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = MemoryTraceStore()
    store.append_many([_started("bz", "busy", 10.0)])
    # an event before the run_started: the tenant is read from the events, at each listing
    store.append_records("odd", [(0, "note", 1.0, None, {})])
    assert [s.run_id for s in store.tenant_runs(None)] == ["odd"]
    store.append_records("odd", [(1, "run_started", 2.0, None, {"tenant": "quiet"})])
    assert [s.run_id for s in store.tenant_runs("quiet")] == ["odd"]
    assert store.tenant_runs(None) == []
    # a run_started numbered after 0 (a hand-made trace), its seq 0 written later
    store.append_many([_started("late", "quiet", 3.0, seq=1)])
    read = _counting(store, monkeypatch)
    assert [s.run_id for s in store.tenant_runs("quiet")] == ["late", "odd"]
    assert "bz" not in read
    assert store.run_tenant("bz") == "busy" and store.run_tenant("late") == "quiet"
