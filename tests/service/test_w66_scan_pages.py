"""The scan for runs whose driver is gone finds every such run within its horizon, however many
newer runs were active since: it pages through the run listing with a cursor kept from scan to
scan, never reading more than two pages per scan."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.service.leases import SCAN_RUNS, LapsedRuns
from actionspace.trace.events import PagesRuns, RunSummary, TraceEvent
from actionspace.trace.memory import MemoryTraceStore
from tests.service.test_w27_run_continuation import Tally, _finished, _runtime
from tests.service.test_w52_scan import _orphan, _server

LEASE_S = 0.4


def _finished_runs(rt: Runtime, count: int, *, at: float) -> None:
    """``count`` runs that started and finished at ``at`` and after (one event batch)."""
    events = []
    for i in range(count):
        run_id = f"done-{i:04d}"
        ts = at + i * 0.001
        events.append(TraceEvent(run_id=run_id, seq=0, kind="run_started", ts=ts, data={"principal": "x"}))
        events.append(TraceEvent(run_id=run_id, seq=1, kind="run_finished", ts=ts, data={"status": "ok"}))
    rt.trace.append_many(events)


def _until(condition: Any, what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, what
        threading.Event().wait(0.02)


def test_a_run_pushed_out_of_the_first_page_by_250_newer_finished_runs_is_still_continued(
    tmp_path: Path,
) -> None:
    store, tally = f"sqlite:///{tmp_path / 'store.db'}", Tally()
    writer = _runtime(store, Tally())
    now = time.time()
    _orphan(writer, "orphan", until=now - 120, at=now - 120)
    _finished_runs(writer, 250, at=time.time() + 1)
    assert "orphan" not in {s.run_id for s in writer.trace.runs(limit=SCAN_RUNS)}
    writer.close()
    with _server(store, tally) as (rt, _app):
        _until(lambda: _finished(rt.trace.events("orphan")), "the orphan was never continued")
        assert tally.counts == {"a": 1, "b": 1}
        assert [f["status"] for f in _finished(rt.trace.events("orphan"))] == ["ok"]


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_one_scan_finds_the_orphan_behind_250_newer_runs_reading_two_pages(kind: str, tmp_path: Path) -> None:
    url = "memory://" if kind == "memory" else f"sqlite:///{tmp_path / 'store.db'}"
    rt = Runtime(url, recover_on_start=False)
    try:
        now = time.time()
        _orphan(rt, "orphan", until=now - 120, at=now - 120)
        _finished_runs(rt, 250, at=time.time() + 1)
        assert isinstance(rt.trace, PagesRuns)
        listed: list[int] = []
        real_runs, real_after = rt.trace.runs, rt.trace.runs_after

        def runs(**kw: Any) -> list[RunSummary]:
            got = real_runs(**kw)
            listed.append(len(got))
            return got

        def runs_after(after: tuple[float, str], **kw: Any) -> list[RunSummary]:
            got = real_after(after, **kw)
            listed.append(len(got))
            return got

        rt.trace.runs, rt.trace.runs_after = runs, runs_after  # type: ignore[method-assign]
        assert LapsedRuns(rt, LEASE_S)(lambda _run: False, now + 10) == ["orphan"]
        assert listed == [200, 51]
    finally:
        rt.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    stamps=st.lists(st.integers(min_value=0, max_value=30), min_size=1, max_size=60),
    orphans=st.sets(st.integers(min_value=0, max_value=59), min_size=1, max_size=5),
    limit=st.integers(min_value=1, max_value=7),
)
def test_every_lapsed_run_is_found_within_one_scan_per_page_whatever_the_ties(
    stamps: list[int], orphans: set[int], limit: int
) -> None:
    rt = Runtime("memory://", recover_on_start=False)
    try:
        assert isinstance(rt.trace, MemoryTraceStore)
        now = time.time()
        wanted = set()
        for i, stamp in enumerate(stamps):
            at = now - 1000 + stamp  # many runs share a last activity: ties are ordered by id
            run_id = f"r{i:03d}"
            if i in orphans:
                _orphan(rt, run_id, until=at, at=at)
                wanted.add(run_id)
            else:
                rt.trace.append_many(
                    [
                        TraceEvent(run_id=run_id, seq=0, kind="run_started", ts=at, data={}),
                        TraceEvent(run_id=run_id, seq=1, kind="run_finished", ts=at, data={}),
                    ]
                )
        scan = LapsedRuns(rt, LEASE_S, limit=limit)
        found: set[str] = set()
        for _ in range(len(stamps) // limit + 2):
            found.update(scan(lambda _run: False, now + 10))
        assert found == wanted
    finally:
        rt.close()
