"""``actionspace monitor``: per-tool health read back from real trace stores."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner, Result

from actionspace import Runtime
from actionspace.demo.runner import run_scenarios
from actionspace.evaluation.monitor import MonitorReport, MonitorThresholds, monitor
from actionspace.evaluation.monitor_cli import monitor_command, parse_since
from actionspace.trace.events import TraceEvent
from actionspace.trace.memory import MemoryTraceStore
from actionspace.trace.store import open_trace_store
from tests.pg import fresh_schema

app = typer.Typer()
app.command("monitor")(monitor_command)


@app.command("other")
def _other() -> None:
    """A second command, so that ``monitor`` is invoked by name as under the real CLI."""


def invoke(*args: str) -> Result:
    return CliRunner().invoke(app, ["monitor", *args], env={"COLUMNS": "200"})


@pytest.fixture(scope="module")
def demo_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    folder = tmp_path_factory.mktemp("demo")
    url = f"sqlite:///{folder / 'trace.db'}"
    outcomes = run_scenarios([1, 2, 3, 4], folder, store=url, today=date(2026, 11, 30))
    assert all(o.passed for o in outcomes), [o.error for o in outcomes]
    return url


@pytest.fixture(scope="module")
def demo(demo_url: str) -> MonitorReport:
    store = open_trace_store(demo_url, create=False)
    try:
        return monitor(store)
    finally:
        store.close()


def record_booking_run(url: str, *, bad_seats: int = 5) -> str:
    """A run of ``book_room`` calls: ``bad_seats`` rejected on /seats, one on /room, one ok."""
    rt = Runtime(url)

    @rt.tool(effect="none")
    def book_room(room: str, seats: int) -> str:
        """Book a room for a number of seats."""
        return f"{room}:{seats}"

    run = rt.new_run()
    try:
        for _ in range(bad_seats):
            rt.call(
                json.dumps({"name": "book_room", "arguments": {"room": "A", "seats": "many"}}), run_id=run
            )
        rt.call(json.dumps({"name": "book_room", "arguments": {"seats": 3}}), run_id=run)
        rt.call(json.dumps({"name": "book_room", "arguments": {"room": "A", "seats": 3}}), run_id=run)
    finally:
        rt.close(wait=True)
    return run


def test_the_demo_trace_counts_create_event_rejects_by_category_and_by_field(demo: MonitorReport) -> None:
    create = demo.tool("create_event")
    assert create.calls == 6  # call_8 is proposed twice: a dry run, then the call itself
    assert create.rejects_by_category == {"invalid_arguments": 2, "conflict": 1, "permission_denied": 1}
    assert create.rejects_by_field == {"/attendees": 1, "/end": 1, "/timezone": 1}
    assert create.ok_results == 2 and create.failures == 0


def test_the_demo_trace_reports_the_unknown_commit_of_notify_attendees_as_an_alert(
    demo: MonitorReport,
) -> None:
    notify = demo.tool("notify_attendees")
    assert notify.unknown_commits == 1
    assert notify.failures_by_category == {}  # undecided, not a failure (as the metrics read it)
    assert notify.undecided_by_category == {"unknown_commit": 1}
    assert [(a.kind, a.tool) for a in demo.alerts] == [("unknown_commits", "notify_attendees")]


def test_the_demo_trace_counts_execution_failures_and_verifier_rejections_by_category(
    demo: MonitorReport,
) -> None:
    assert demo.tool("check_vendor").failures_by_category == {"transient": 1}
    assert demo.tool("save_vendor_list").failures_by_category == {"conflict": 1}
    assert demo.tool("compare_revenue").failures_by_category == {"invalid_arguments": 1}


def test_plan_edges_of_the_demo_mark_search_results_used_by_the_comparisons(demo: MonitorReport) -> None:
    search = demo.tool("search_documents")
    # the second plan searches again (its nodes reuse the first plan's ids): four results, all used
    assert search.ok_results == 4 and search.used_results == 4 and search.utilization == 1.0
    assert search.consumers >= 2 and search.downstream_success is not None
    assert search.consumers_ok < search.consumers  # the first comparison was rejected by the verifier
    assert demo.tool("get_event").utilization == 0.0


def test_selection_rates_are_each_tools_share_of_all_calls(demo: MonitorReport) -> None:
    assert demo.calls == sum(t.calls for t in demo.tools)
    assert sum(t.selection_rate for t in demo.tools) == pytest.approx(1.0)
    assert demo.tool("create_event").selection_rate == pytest.approx(6 / demo.calls)
    assert [t.calls for t in demo.tools] == sorted((t.calls for t in demo.tools), reverse=True)


def test_rejects_concentrated_on_one_field_raise_an_alert_naming_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'trace.db'}"
    record_booking_run(url)
    store = open_trace_store(url, create=False)
    try:
        report = monitor(store)
        stricter = monitor(store, thresholds=MonitorThresholds(min_rejects=7))
        higher_share = monitor(store, thresholds=MonitorThresholds(field_share=0.9))
    finally:
        store.close()
    book = report.tool("book_room")
    assert book.calls == 7 and book.rejects == 6 and book.ok_results == 1
    assert book.rejects_by_field == {"/seats": 5, "/room": 1}
    [alert] = report.alerts
    assert (alert.kind, alert.tool, alert.field, alert.count, alert.total) == (
        "field_concentration",
        "book_room",
        "/seats",
        5,
        6,
    )
    assert stricter.alerts == () and higher_share.alerts == ()


def test_rejects_split_evenly_over_two_fields_stay_under_a_60_percent_share(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'trace.db'}"
    record_booking_run(url, bad_seats=1)
    store = open_trace_store(url, create=False)
    try:
        report = monitor(store, thresholds=MonitorThresholds(min_rejects=2, field_share=0.6))
        even = monitor(store, thresholds=MonitorThresholds(min_rejects=2, field_share=0.5))
    finally:
        store.close()
    assert report.tool("book_room").rejects_by_field == {"/room": 1, "/seats": 1}
    assert report.alerts == ()
    assert [a.count for a in even.alerts] == [1]  # 1 of 2 is exactly the 50 % share


def test_a_provenance_mark_links_a_result_to_the_call_that_consumed_it() -> None:
    def ev(seq: int, kind: str, call_id: str, **data: object) -> TraceEvent:
        return TraceEvent(run_id="r", seq=seq, kind=kind, ts=100.0 + seq, call_id=call_id, data=data)

    store = MemoryTraceStore()
    store.append_many(
        [
            ev(0, "validated", "c1", verdict="accepted", tool="lookup"),
            ev(1, "dispatched", "c1", tool="lookup"),
            ev(2, "observation", "c1", status="ok", tool="lookup"),
            ev(3, "validated", "c2", verdict="accepted", tool="lookup"),
            ev(4, "dispatched", "c2", tool="lookup"),
            ev(5, "observation", "c2", status="ok", tool="lookup"),
            ev(6, "validated", "c3", verdict="accepted", tool="send", provenance={"to": "tool_result:c1"}),
            ev(7, "dispatched", "c3", tool="send"),
            ev(8, "observation", "c3", status="error", tool="send", category="transient"),
        ]
    )
    report = monitor(store)
    lookup, send = report.tool("lookup"), report.tool("send")
    assert (lookup.ok_results, lookup.used_results, lookup.utilization) == (2, 1, 0.5)
    assert (lookup.consumers, lookup.consumers_ok, lookup.downstream_success) == (1, 0, 0.0)
    assert send.failures_by_category == {"transient": 1} and send.utilization is None


def test_since_and_run_ids_restrict_which_calls_are_read(demo_url: str, tmp_path: Path) -> None:
    store = open_trace_store(demo_url, create=False)
    try:
        everything = monitor(store)
        future = monitor(store, since=4_102_444_800.0)  # 2100-01-01
        one_run = monitor(store, run_ids=[store.runs(limit=1)[0].run_id])
    finally:
        store.close()
    assert future.calls == 0 and future.tools == () and future.runs == 0
    assert one_run.runs == 1 and 0 < one_run.calls < everything.calls


def test_since_takes_durations_back_from_now_and_iso_times() -> None:
    assert parse_since("90s", now=1000.0) == 910.0
    assert parse_since("2h", now=10_000.0) == 10_000.0 - 7200
    assert parse_since("1w", now=1e6) == 1e6 - 604_800
    assert parse_since("2026-11-30T00:00:00") == parse_since("2026-11-30T01:00:00+01:00") == 1_795_996_800.0
    with pytest.raises(ValueError, match="duration"):
        parse_since("yesterday")


def test_the_command_prints_a_table_and_the_alerts(demo_url: str) -> None:
    result = invoke("--store", demo_url)
    assert result.exit_code == 0, result.output
    assert re.search(r"create_event\s+rejected\s+permission_denied\s+1\s", result.stdout), result.stdout
    assert "alert: unknown_commits" in result.stdout and "notify_attendees" in result.stdout


def test_the_command_prints_the_report_as_json(demo_url: str, demo: MonitorReport) -> None:
    result = invoke("--store", demo_url, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == demo.to_dict()


def test_the_command_with_a_future_since_reports_no_calls(demo_url: str) -> None:
    result = invoke("--store", demo_url, "--since", "2100-01-01", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["calls"] == 0


def test_the_command_exits_1_on_a_missing_store_or_a_bad_since(tmp_path: Path, demo_url: str) -> None:
    missing = invoke("--store", f"sqlite:///{tmp_path / 'none.db'}")
    assert missing.exit_code == 1 and "no trace store" in missing.output
    bad = invoke("--store", demo_url, "--since", "yesterday")
    assert bad.exit_code == 1 and "--since" in bad.output


@pytest.fixture
def pg_schema_url(pg_url: str) -> Iterator[str]:
    yield from fresh_schema(pg_url)


def test_monitor_reads_a_postgresql_store_and_raises_the_field_alert(pg_schema_url: str) -> None:
    run = record_booking_run(pg_schema_url)
    result = invoke("--store", pg_schema_url, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["runs"] == 1 and report["calls"] == 7
    assert [(a["tool"], a["field"]) for a in report["alerts"]] == [("book_room", "/seats")]
    store = open_trace_store(pg_schema_url)
    try:
        assert monitor(store, run_ids=[run]).to_dict() == report
    finally:
        store.close()
