"""The monitor over traces it did not write: payloads of the wrong type, huge runs, any event stream."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from actionspace.cli import _mount, app
from actionspace.errors import ConfigurationError
from actionspace.evaluation.monitor import monitor
from actionspace.trace.events import EVENT_KINDS, TraceEvent
from actionspace.trace.memory import MemoryTraceStore


def _store(events: list[tuple[str, str | None, dict[str, Any]]]) -> MemoryTraceStore:
    store = MemoryTraceStore()
    store.append_many(
        [
            TraceEvent(run_id="r", seq=seq, kind=kind, ts=1.0, call_id=call_id, data=data)
            for seq, (kind, call_id, data) in enumerate(events)
        ]
    )
    return store


_OK = ("observation", "c9", {"tool": "t", "status": "ok"})

HOSTILE: dict[str, list[tuple[str, str | None, dict[str, Any]]]] = {
    "observation category is a list": [
        ("dispatched", "c1", {"tool": "t"}),
        ("observation", "c1", {"tool": "t", "status": "error", "category": ["transient"]}),
    ],
    "observation category is an object": [
        ("dispatched", "c1", {"tool": "t"}),
        ("observation", "c1", {"tool": "t", "status": "error", "category": {"a": 1}}),
    ],
    "refused category is a list": [
        ("observation", "c1", {"tool": "t", "status": "error", "category": ["permission_denied"]}),
    ],
    "field errors is a number": [
        ("validated", "c1", {"tool": "t", "verdict": "rejected", "field_errors": 5}),
    ],
    "plan nodes is a number": [("plan_started", None, {"nodes": 5})],
    "plan edge has three ends": [
        ("plan_started", None, {"nodes": [{"id": "a"}], "edges": [["a", "b", "c"]]})
    ],
    "plan edges is a number": [("plan_started", None, {"nodes": [{"id": "a"}], "edges": 7})],
    "plan edge is a number": [("plan_started", None, {"nodes": [{"id": "a"}], "edges": [7]})],
    "node refs is a number": [("plan_started", None, {"nodes": [{"id": "a", "refs": 3}]})],
    "added edges is a number": [("plan_started", None, {"nodes": [{"id": "a"}], "added_edges": 3})],
    "added edge ends are lists": [
        (
            "plan_started",
            None,
            {"nodes": [{"id": "a"}], "edges": [[["a"], "b"]], "added_edges": [{"from": ["a"], "to": "b"}]},
        )
    ],
    "verified category is a list": [
        ("observation", "c1", {"tool": "t", "status": "ok"}),
        ("verified", "c1", {"tool": "t", "verdict": "rejected", "category": ["x"]}),
    ],
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_payload_of_the_wrong_type_is_ignored_and_every_call_is_still_counted(name: str) -> None:
    report = monitor(_store([*HOSTILE[name], _OK]))
    health = report.tool("t")
    assert report.calls == health.calls == (2 if any(c == "c1" for _, c, _ in HOSTILE[name]) else 1)
    assert health.rejects + health.failures + health.ok_results <= health.calls
    for category in (*health.rejects_by_category, *health.failures_by_category):
        assert isinstance(category, str) and not category.startswith(("[", "{"))
    json.dumps(report.to_dict())


def test_an_unreadable_category_of_a_failed_call_is_counted_as_unknown() -> None:
    report = monitor(_store(HOSTILE["observation category is a list"]))
    assert report.tool("t").failures_by_category == {"unknown": 1}


def test_rejects_with_a_field_errors_number_count_the_reject_without_fields() -> None:
    report = monitor(_store(HOSTILE["field errors is a number"]))
    assert report.tool("t").rejects_by_category == {"invalid_arguments": 1}
    assert report.tool("t").rejects_by_field == {}


def test_monitor_on_an_imported_trace_with_odd_payloads_prints_a_table_not_a_traceback(
    tmp_path: Path,
) -> None:
    events = [
        {"run_id": "r", "seq": 0, "kind": "validated", "ts": 1.0, "call_id": "c1", "data": data}
        for data in [{"tool": "t", "verdict": "rejected", "field_errors": 5}]
    ]
    events.append({"run_id": "r", "seq": 1, "kind": "plan_started", "ts": 1.0, "data": {"nodes": 3}})
    events.append({"run_id": "r", "seq": 2, "kind": "no_such_kind", "ts": 1e300, "call_id": "c1", "data": {}})
    source = tmp_path / "odd.jsonl"
    source.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    url = f"sqlite:///{tmp_path / 'trace.db'}"
    _mount()
    runner = CliRunner()
    imported = runner.invoke(app, ["trace", "import", str(source), "--store", url])
    assert imported.exit_code == 0, imported.output
    result = runner.invoke(app, ["monitor", "--store", url, "--json"])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["calls"] == 1 and report["tools"][0]["rejects_by_category"] == {"invalid_arguments": 1}


def test_a_run_reusing_one_call_id_many_times_is_read_in_near_linear_time() -> None:
    n = 30_000
    events: list[TraceEvent] = []
    for i in range(n):
        accepted = {"tool": "t", "verdict": "accepted", "provenance": {"x": "tool_result:call_1"}}
        events.append(
            TraceEvent(run_id="r", seq=2 * i, kind="validated", ts=1.0, call_id="call_1", data=accepted)
        )
        observed = {"tool": "t", "status": "ok"}
        events.append(
            TraceEvent(run_id="r", seq=2 * i + 1, kind="observation", ts=1.0, call_id="call_1", data=observed)
        )
    store = MemoryTraceStore()
    store.append_many(events)
    # quadratic reading took 73 s here; linear takes about 1 s, so the bound holds on a loaded machine
    started = time.perf_counter()
    report = monitor(store)
    elapsed = time.perf_counter() - started
    health = report.tool("t")
    # each handling consumed the one before it; the first had nothing before it
    assert health.calls == n
    assert (health.used_results, health.consumers, health.consumers_ok) == (n - 1, n - 1, n - 1)
    assert elapsed < 30.0, f"{n} handlings of one call id took {elapsed:.1f} s"


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
_KEYS = st.sampled_from(
    [
        "tool",
        "category",
        "status",
        "verdict",
        "field_errors",
        "nodes",
        "edges",
        "added_edges",
        "group",
        "to",
        "provenance",
        "refs",
    ]
)
_PAYLOAD = st.dictionaries(_KEYS, _JSON | st.sampled_from(["t", "u", "ok", "error", "rejected"]), max_size=6)
_EVENT = st.tuples(
    st.sampled_from([*EVENT_KINDS, "unknown_kind"]),
    st.sampled_from([None, "c1", "c2", "r:g"]),
    _PAYLOAD,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_EVENT, max_size=25))
def test_any_event_stream_gives_a_report_whose_rates_are_shares(events: list[Any]) -> None:
    report = monitor(_store(events))
    assert report.calls == sum(t.calls for t in report.tools)
    for health in report.tools:
        assert 0.0 <= health.selection_rate <= 1.0
        for share in (health.utilization, health.downstream_success):
            assert share is None or 0.0 <= share <= 1.0
        assert health.rejects + health.failures + health.ok_results <= health.calls
        assert all(isinstance(k, str) for k in (*health.rejects_by_category, *health.failures_by_category))
    json.dumps(report.to_dict(), allow_nan=False)


@pytest.mark.parametrize(
    "limits",
    [
        {"field_share": float("nan")},
        {"field_share": 1.5},
        {"field_share": -0.1},
        {"min_rejects": -1},
        {"min_unknown_commits": -2},
    ],
)
def test_thresholds_that_could_never_or_always_fire_are_refused(limits: dict[str, Any]) -> None:
    from actionspace.evaluation.monitor import MonitorThresholds

    with pytest.raises(ConfigurationError, match=next(iter(limits))):
        MonitorThresholds(**limits)


@pytest.mark.parametrize("since", [float("nan"), float("inf"), float("-inf")])
def test_a_since_that_is_no_time_is_refused_rather_than_answered_with_nothing(since: float) -> None:
    with pytest.raises(ConfigurationError, match="since"):
        monitor(_store([_OK]), since=since)


def test_a_duration_too_long_for_a_clock_is_a_one_line_error(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'trace.db'}"
    _mount()
    result = CliRunner().invoke(app, ["monitor", "--store", url, "--since", "9" * 400 + "s"])
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "--since" in result.output


def test_an_empty_store_reports_no_calls_and_raises_no_alert() -> None:
    report = monitor(MemoryTraceStore())
    assert (report.runs, report.calls, report.tools, report.alerts) == (0, 0, (), ())
