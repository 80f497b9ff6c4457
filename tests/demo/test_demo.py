from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from datetime import date
from pathlib import Path

from typer.testing import CliRunner

from actionspace.cli import _mount, app
from actionspace.demo.calendar import CalendarService
from actionspace.demo.documents import DocumentStore
from actionspace.demo.scenario import next_tuesday, run_demo
from actionspace.trace.store import open_trace_store

EXPECTED = [
    ("create_event", "invalid_arguments"),
    ("get_user_profile", None),
    ("list_team_members", "ambiguous_reference"),
    ("list_team_members", None),
    ("create_event", "invalid_arguments"),
    ("create_event", "conflict"),
    ("create_event", "permission_denied"),
    ("create_event", None),  # the preview (dry run)
    ("create_event", None),
    ("get_event", None),
    ("notify_attendees", "unknown_commit"),
]


def test_the_scenario_recovers_from_each_mistake_by_category_and_verifies(tmp_path: Path) -> None:
    report = run_demo(tmp_path, store="memory://", today=date(2026, 11, 30))
    assert [(s.tool, s.category) for s in report.steps] == EXPECTED
    first = report.steps[0].observation["error"]
    assert sorted(f["path"] for f in first["field_errors"]) == ["/attendees", "/timezone"]
    candidates = report.steps[2].observation["error"]["candidates"]
    assert [c["id"] for c in candidates] == ["t-design-ber", "t-design-sh"]
    assert report.steps[4].observation["error"]["field_errors"][0]["path"] == "/end"
    assert "dry run" in report.steps[7].intent and report.steps[7].next_move.endswith("book it for real")
    conflict = report.steps[5].observation["error"]
    assert conflict["alternatives"][0]["start"].startswith("2026-12-08T15:30:00+08:00")
    assert report.steps[6].observation["error"]["details"]["attendees"] == ["u-vp"]
    assert report.verified
    assert report.event is not None
    assert report.event["attendees"] == ["u-chen", "u-wang", "u-zhao"]
    assert report.event["start_utc"] == "2026-12-08T07:30:00Z"
    preview = report.steps[7].observation
    assert preview["diagnostics"]["dry_run"] is True and preview["effects"] == []
    assert preview["data"]["would_create"]["start_utc"] == "2026-12-08T07:30:00Z"
    assert preview["data"]["busy"] == []
    created = report.steps[8].observation
    assert created["diagnostics"]["resolved_by"] == "status_query"  # its response was lost after commit
    assert created["diagnostics"]["completion"] == {"reached": "delivered", "required": "delivered"}
    assert report.mails_sent == 3  # sent once, although its response was lost too
    assert len(report.unknown_commits) == 1


def test_only_the_final_call_wrote_to_the_calendar(tmp_path: Path) -> None:
    report = run_demo(tmp_path, store="memory://", today=date(2026, 11, 30))
    service = CalendarService(tmp_path / "calendar.db")
    try:
        assert service.count_events() == 2  # the seeded meeting and the one created
        assert report.events_in_calendar == 2
        assert service.event(report.event["id"] if report.event else "") is not None
    finally:
        service.close()


def test_next_tuesday_is_never_tomorrow() -> None:
    assert next_tuesday(date(2026, 11, 30)) == date(2026, 12, 8)  # a Monday
    assert next_tuesday(date(2026, 12, 1)) == date(2026, 12, 8)  # a Tuesday
    assert next_tuesday(date(2026, 12, 6)) == date(2026, 12, 8)  # a Sunday


def test_demo_json_and_trace_show_describe_the_same_run(tmp_path: Path) -> None:
    _mount()
    store = f"sqlite:///{tmp_path / 'trace.db'}"
    runner = CliRunner()
    result = runner.invoke(
        app, ["demo", "--scenario", "1", "--json", "--dir", str(tmp_path / "cal"), "--store", store]
    )
    assert result.exit_code == 0, result.output
    [outcome] = json.loads(result.output)["scenarios"]
    report = outcome["report"]
    assert [s["category"] for s in report["steps"]] == [c for _, c in EXPECTED]
    assert report["verified"] is True
    shown = runner.invoke(app, ["trace", "show", report["run_id"], "--store", store, "--json"])
    assert shown.exit_code == 0, shown.output
    events = json.loads(shown.stdout)
    observations = [e for e in events if e["kind"] == "observation"]
    assert [o["data"].get("category") for o in observations] == [c for _, c in EXPECTED]
    assert events[-1]["kind"] == "run_finished"
    trace = open_trace_store(store)
    assert len(trace.events(report["run_id"])) == len(events)
    [key] = report["unknown_commits"]
    resolved = runner.invoke(
        app,
        [
            "ledger",
            "resolve",
            key,
            "--outcome",
            "committed",
            "--by",
            "alice",
            "--reason",
            "3 mails in outbox",
            "--store",
            store,
        ],
    )
    assert resolved.exit_code == 0, resolved.output
    listed = runner.invoke(app, ["ledger", "show", key, "--store", store])
    entry = json.loads(listed.stdout)
    assert entry["state"] == "committed" and entry["resolution"]["by"] == "alice"
    again = runner.invoke(
        app,
        ["ledger", "resolve", key, "--outcome", "failed", "--by", "bob", "--reason", "x", "--store", store],
    )
    assert again.exit_code == 1 and "only unknown_commit" in again.output


def _demo(*args: str) -> tuple[int, str]:
    _mount()
    result = CliRunner().invoke(app, ["demo", *args])
    return result.exit_code, result.output


def test_demo_runs_every_scenario_in_order_and_exits_0_when_all_verdicts_pass(tmp_path: Path) -> None:
    code, output = _demo("--json", "--dir", str(tmp_path), "--store", "memory://", "--today", "2026-11-30")
    assert code == 0, output
    report = json.loads(output)
    assert [s["scenario"] for s in report["scenarios"]] == [1, 2, 3, 4]
    assert report["passed"] is True
    by_number = {s["scenario"]: s for s in report["scenarios"]}
    assert all(by_number[n]["passed"] for n in (1, 2, 4))
    assert by_number[3]["passed"] or by_number[3]["skipped"]
    assert by_number[2]["report"]["final_list"]["version"] == 3
    assert by_number[4]["report"]["comparison"]["b"]["doc_id"] == "pl-ar-2025"
    assert (tmp_path / "vendors" / "vendors.db").exists()
    assert (tmp_path / "revenue" / "documents.db").exists()


def test_demo_scenario_option_runs_only_that_scenario(tmp_path: Path) -> None:
    code, output = _demo("--scenario", "2", "--json", "--dir", str(tmp_path), "--store", "memory://")
    assert code == 0, output
    [only] = json.loads(output)["scenarios"]
    assert only["scenario"] == 2 and only["passed"] is True
    assert not (tmp_path / "calendar").exists() and not (tmp_path / "revenue").exists()


def test_demo_renders_a_scenario_with_its_verdict(tmp_path: Path) -> None:
    code, output = _demo("--scenario", "4", "--dir", str(tmp_path), "--store", "memory://")
    assert code == 0, output
    assert "scenario 4" in output and "verified: official reports" in output


def test_demo_exits_1_when_a_verdict_fails_on_the_service_state(tmp_path: Path) -> None:
    # a newer annual report of one company only: the latest figures are now of two fiscal years
    (tmp_path / "revenue").mkdir()
    docs = DocumentStore(tmp_path / "revenue" / "documents.db")
    docs.seed()
    docs.close()
    with closing(sqlite3.connect(tmp_path / "revenue" / "documents.db")) as conn, conn:
        conn.execute(
            "INSERT INTO documents VALUES ('nw-ar-2026', 'Nordwind AG', 'annual_report',"
            " 'Nordwind AG Annual Report 2026', 'Nordwind AG', '2027-03-11', 2026, 'EUR', 43000.0, NULL)"
        )
    code, output = _demo("--scenario", "4", "--json", "--dir", str(tmp_path), "--store", "memory://")
    assert code == 1, output
    [only] = json.loads(output)["scenarios"]
    assert only["passed"] is False
    steps = only["report"]["steps"]
    assert [s["category"] for s in steps if s["node"].startswith("compare")] == [
        "invalid_arguments",
        "invalid_arguments",
    ]
    assert "fiscal year 2025 is not 2026" in steps[-1]["observation"]["error"]["message"]


def test_demo_refuses_an_unknown_scenario_number(tmp_path: Path) -> None:
    code, _ = _demo("--scenario", "5", "--dir", str(tmp_path), "--store", "memory://")
    assert code == 2
