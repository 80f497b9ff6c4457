"""``actionspace trace`` against a real SQLite store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from actionspace.trace.cli import trace_app
from actionspace.trace.sqlite import SqliteTraceStore
from tests.trace.factories import calendar_run

runner = CliRunner()


@pytest.fixture
def url(tmp_path: Path) -> str:
    path = tmp_path / "trace.db"
    with SqliteTraceStore(path) as store:
        store.append_many(calendar_run("run-7f3a9c", start=1_700_000_000.0))
        store.append_many(calendar_run("run-81bc02", start=1_700_000_100.0, finished=False))
    return f"sqlite:///{path}"


def invoke(*args: str) -> Result:
    return runner.invoke(trace_app, list(args), env={"COLUMNS": "200"})


def test_list_shows_the_recent_runs_in_a_table(url: str) -> None:
    result = invoke("list", "--store", url)
    assert result.exit_code == 0, result.output
    assert result.stdout.index("run-81bc02") < result.stdout.index("run-7f3a9c")
    assert "started" in result.stdout and "errors" in result.stdout


def test_list_json_prints_the_run_summaries(url: str) -> None:
    result = invoke("list", "--store", url, "--json", "--limit", "1")
    assert result.exit_code == 0, result.output
    [run] = json.loads(result.stdout)
    assert run == {
        "run_id": "run-81bc02",
        "started_at": 1_700_000_100.0,
        "last_at": pytest.approx(1_700_000_100.25),
        "events": 21,
        "calls": 3,
        "errors": 1,
        "finished": False,
    }


def test_list_on_a_store_that_does_not_exist_yet_says_so_and_fails(tmp_path: Path) -> None:
    result = invoke("list", "--store", f"sqlite:///{tmp_path}/none.db")
    assert result.exit_code == 1
    assert "error: no trace store at" in result.stderr
    assert not (tmp_path / "none.db").exists()


def test_list_uses_the_store_from_the_environment(url: str) -> None:
    result = runner.invoke(trace_app, ["list", "--json"], env={"ACTIONSPACE_STORE": url})
    assert [r["run_id"] for r in json.loads(result.stdout)] == ["run-81bc02", "run-7f3a9c"]


def test_show_prints_a_timeline_for_a_unique_prefix(url: str) -> None:
    result = invoke("show", "run-7f", "--store", url)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "run-7f3a9c" in out and "22 events · 3 calls · 1 error · finished" in out
    for expected in (
        "2 offered: create_event@2, list_events@1",
        "rejected invalid_arguments: /start, /attendees/0",
        "create_event@2 attempt 2 node n1",
        "trimmed by rows@3 (48,213 → 4,096 B)",
        "status completed",
    ):
        assert expected in out


def test_show_json_prints_the_events_as_an_array(url: str) -> None:
    result = invoke("show", "run-81", "--store", url, "--json")
    assert result.exit_code == 0, result.output
    events = json.loads(result.stdout)
    assert events == [e.to_dict() for e in calendar_run("run-81bc02", start=1_700_000_100.0, finished=False)]


def test_show_of_a_missing_run_fails_with_a_message_not_a_traceback(url: str) -> None:
    result = invoke("show", "nope", "--store", url)
    assert result.exit_code == 1
    assert "no run matches 'nope'" in result.stderr
    assert "Traceback" not in result.output


def test_show_of_an_ambiguous_prefix_lists_the_matches(url: str) -> None:
    result = invoke("show", "run-", "--store", url)
    assert result.exit_code == 1
    assert "run-7f3a9c, run-81bc02" in result.stderr


def test_a_bad_store_url_fails_with_the_supported_forms(tmp_path: Path) -> None:
    result = invoke("show", "x", "--store", "mysql://db")
    assert result.exit_code == 1
    assert "supported: memory://" in result.stderr


def test_a_file_that_is_not_a_database_fails_cleanly(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.db"
    bogus.write_text("this is not sqlite" * 100)
    result = invoke("list", "--store", f"sqlite:///{bogus}")
    assert result.exit_code == 1
    assert "cannot read trace store" in result.stderr


def test_export_and_import_round_trip_through_a_file(url: str, tmp_path: Path) -> None:
    out = tmp_path / "runs.jsonl"
    exported = invoke("export", "--out", str(out), "--store", url)
    assert exported.exit_code == 0, exported.output
    assert len(out.read_text().splitlines()) == 43

    target = f"sqlite:///{tmp_path}/copy.db"
    first = invoke("import", str(out), "--store", target)
    again = invoke("import", str(out), "--store", target)
    assert "43 new" in first.stderr and "0 new" in again.stderr
    listed = json.loads(invoke("list", "--json", "--store", target).stdout)
    assert [r["events"] for r in listed] == [21, 22]


def test_export_of_one_run_to_stdout_writes_json_lines(url: str) -> None:
    result = invoke("export", "run-7f", "--out", "-", "--store", url)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert [json.loads(line)["seq"] for line in lines] == list(range(22))
    assert {json.loads(line)["run_id"] for line in lines} == {"run-7f3a9c"}


def test_export_of_a_missing_run_fails_with_exit_code_1(url: str, tmp_path: Path) -> None:
    result = invoke("export", "zzz", "--out", str(tmp_path / "x.jsonl"), "--store", url)
    assert result.exit_code == 1
    assert "no run matches" in result.stderr
    assert not (tmp_path / "x.jsonl").exists()


def test_import_of_a_malformed_file_names_the_line(url: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"run_id": "r", "seq": 0, "kind": "parsed", "ts": 1}\n{oops\n')
    result = invoke("import", str(bad), "--store", url)
    assert result.exit_code == 1
    assert "line 2: not JSON" in result.stderr


@pytest.mark.parametrize("command", ["list", "show", "export", "import"])
def test_every_command_explains_itself_in_help(command: str) -> None:
    result = invoke(command, "--help")
    assert result.exit_code == 0
    assert "--store" in result.stdout


def test_the_app_without_a_command_shows_its_commands() -> None:
    result = invoke()
    for command in ("list", "show", "export", "import"):
        assert command in result.output
