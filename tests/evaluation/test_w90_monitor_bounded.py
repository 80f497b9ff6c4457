"""The monitor keeps per-tool counts, not the calls of the runs it has read: its memory stays flat
however many calls it reads, and its figures are those of every run summed."""

from __future__ import annotations

import tracemalloc
from collections import Counter
from collections.abc import Collection
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace.evaluation.monitor import MonitorReport, monitor
from actionspace.trace.events import RunSummary, TraceEvent
from actionspace.trace.memory import MemoryTraceStore

_TOOLS = ("search", "fetch", "write")


class _Generated:
    """A trace store whose runs are made when read: ``calls`` calls each, none kept, so that what
    the monitor holds is all that tracemalloc sees grow."""

    def __init__(self, calls: int) -> None:
        self.calls = calls

    def events(self, run_id: str) -> list[TraceEvent]:
        out: list[TraceEvent] = []

        def add(kind: str, call_id: str | None, data: dict[str, Any]) -> None:
            out.append(TraceEvent(run_id=run_id, seq=len(out), kind=kind, ts=1.0, call_id=call_id, data=data))

        add("run_started", None, {})
        for n in range(self.calls):
            call_id, tool = f"c{n}", _TOOLS[n % 3]
            if n % 5 == 4:
                error = {"path": "/q", "message": "bad"}
                add("validated", call_id, {"tool": tool, "verdict": "rejected", "field_errors": [error]})
                continue
            mark = {"q": f"tool_result:c{n - 1}"} if n else {}
            add("dispatched", call_id, {"tool": tool, "provenance": mark})
            status = "error" if n % 7 == 3 else "ok"
            add("observation", call_id, {"tool": tool, "status": status, "category": "transient"})
        add("run_finished", None, {})
        return out

    def append_many(self, events: Collection[TraceEvent]) -> None:
        raise NotImplementedError

    def runs(self, *, limit: int = 50, since: float | None = None) -> list[RunSummary]:
        raise NotImplementedError

    def next_seq(self, run_id: str) -> int:
        raise NotImplementedError

    def close(self) -> None:
        pass


def _peak(store: _Generated, runs: int) -> tuple[int, MonitorReport]:
    tracemalloc.start()
    try:
        report = monitor(store, run_ids=(f"r{i}" for i in range(runs)))
        return tracemalloc.get_traced_memory()[1], report
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(
    "per_run",
    [pytest.param(200, id="10,000 calls"), pytest.param(1_000, id="100,000 calls", marks=pytest.mark.slow)],
)
def test_the_monitors_memory_stays_flat_over_ten_times_the_calls(per_run: int) -> None:
    store = _Generated(calls=per_run)
    small, few = _peak(store, 10)
    large, many = _peak(store, 100)
    assert (few.calls, many.calls) == (10 * per_run, 100 * per_run)
    assert many.tool("search").calls == 10 * few.tool("search").calls
    assert many.tool("fetch").used_results == 10 * few.tool("fetch").used_results > 0
    # ten times the calls: the peak is that of one run read, plus counts (the calls kept: 10x)
    assert large < 1.5 * small, (small, large)


_CALL_IDS = ("a", "b", "c", "r:g")
_KINDS = ("proposed", "validated", "dispatched", "observation", "verified", "ledger", "plan_started")


@st.composite
def _event(draw: st.DrawFn) -> tuple[str, str | None, dict[str, Any], float]:
    kind = draw(st.sampled_from(_KINDS))
    call_id = draw(st.sampled_from(_CALL_IDS) | st.none()) if kind != "plan_started" else None
    data: dict[str, Any] = {"tool": draw(st.sampled_from((*_TOOLS, 3)))}
    if draw(st.booleans()):
        data["provenance"] = {"x": "tool_result:" + draw(st.sampled_from(_CALL_IDS))}
    if kind == "validated":
        data |= {"verdict": "rejected", "field_errors": [{"path": draw(st.sampled_from(("/a", "/b")))}]}
    elif kind == "observation":
        data["status"] = draw(st.sampled_from(("ok", "error")))
        data["category"] = draw(st.sampled_from(("transient", "unknown_commit", "parse_error", None)))
        data["replayed"] = draw(st.booleans())
        data["content_hash"] = draw(st.sampled_from(("h1", "h2")))
    elif kind == "verified":
        data["verdict"] = "rejected"
    elif kind == "ledger":
        data |= {"key": draw(st.sampled_from(("k1", "k2"))), "from": "unknown_commit"}
        data["to"] = draw(st.sampled_from(("unknown_commit", "committed")))
        data["group"] = draw(st.sampled_from(("g", None)))
    elif kind == "plan_started":
        data = {"nodes": [{"id": "a"}, {"id": "b"}], "edges": [["a", "b"]]}
    return kind, call_id, data, draw(st.sampled_from((1.0, 2.0, 3.0)))


def _summed(reports: list[MonitorReport]) -> dict[str, dict[str, Any]]:
    """Each tool's counts summed over ``reports`` (the ratios left out: they are not sums)."""
    out: dict[str, dict[str, Any]] = {}
    for report in reports:
        for health in report.tools:
            kept = out.setdefault(health.tool, {})
            for name, value in health.to_dict().items():
                if isinstance(value, dict):
                    kept[name] = kept.get(name, Counter()) + Counter(value)
                elif isinstance(value, int) and name != "tool":
                    kept[name] = kept.get(name, 0) + value
    return {t: {k: dict(v) if isinstance(v, Counter) else v for k, v in f.items()} for t, f in out.items()}


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    runs=st.lists(st.lists(_event(), max_size=14), min_size=1, max_size=5),
    since=st.sampled_from((None, 2.0)),
)
def test_the_report_over_many_runs_is_the_sum_of_the_reports_of_each(
    runs: list[list[tuple[str, str | None, dict[str, Any], float]]], since: float | None
) -> None:
    store = MemoryTraceStore()
    for r, events in enumerate(runs):
        store.append_many(
            [
                TraceEvent(run_id=f"r{r}", seq=seq, kind=kind, ts=ts, call_id=call_id, data=data)
                for seq, (kind, call_id, data, ts) in enumerate(events)
            ]
        )
    ids = [f"r{r}" for r in range(len(runs)) if runs[r]]
    whole = monitor(store, run_ids=ids, since=since)
    each = [monitor(store, run_ids=[run_id], since=since) for run_id in ids]
    assert whole.calls == sum(r.calls for r in each)
    assert whole.runs == sum(r.runs for r in each)
    assert _summed([whole]) == _summed(each)
    for health in whole.tools:
        assert health.selection_rate == health.calls / whole.calls
    # the order the runs are read in changes nothing, the order of the tools and of their counts included
    assert monitor(store, run_ids=ids[::-1], since=since).to_dict() == whole.to_dict()
