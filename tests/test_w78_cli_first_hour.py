"""What a new user sees of the command line in the first hour, at 80 columns: the demo's runs listed
one line each, the monitor's headers whole, counts in the singular for one, flags shown as flags,
and ``eval parse`` outside a checkout saying where its corpus comes from.
"""

from __future__ import annotations

import json
import re
from datetime import date
from pathlib import Path
from typing import Any

import pytest
import typer
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner, Result

from actionspace import Runtime, ToolCall
from actionspace.cli import _mount, app

NARROW = {"COLUMNS": "80", "TERM": "dumb"}
runner = CliRunner(env=NARROW)
TIME = re.compile(r"\d\d-\d\d \d\d:\d\d:\d\d")


def _invoke(*args: str) -> Result:
    _mount()
    return runner.invoke(app, list(args))


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The trace store the four demo scenarios leave behind (their run ids are long)."""
    from actionspace.demo.runner import run_scenarios

    folder = tmp_path_factory.mktemp("demo")
    url = f"sqlite:///{folder / 'trace.db'}"
    outcomes = run_scenarios([1, 2, 3, 4], folder, store=url, today=date(2026, 11, 30))
    assert all(o.passed for o in outcomes), [o.error for o in outcomes]
    return url


@pytest.fixture()
def one_call(tmp_path: Path) -> str:
    """A store holding one run of one call."""
    url = f"sqlite:///{tmp_path / 'one.db'}"
    rt = Runtime(url)

    @rt.tool(effect="none")
    def echo(text: str) -> str:
        """Say the text back."""
        return text

    obs = rt.call(ToolCall(name="echo", arguments={"text": "hi"}), run_id="solo-run")
    assert obs.error is None
    rt.close()
    return url


def _fits(text: str) -> list[str]:
    lines = text.splitlines()
    assert max(map(len, lines)) <= 80, text
    assert "…" not in text, text
    return lines


def test_trace_list_shows_each_demo_run_on_one_line_at_80_columns(demo_store: str) -> None:
    runs = json.loads(_invoke("trace", "list", "--json", "--store", demo_store).stdout)
    listed = _invoke("trace", "list", "--store", demo_store)
    assert listed.exit_code == 0, listed.output
    lines = _fits(listed.stdout)
    assert len(runs) >= 7 and max(len(r["run_id"]) for r in runs) >= 28
    for run in runs:
        (row,) = [line for line in lines if re.search(rf"(^|\s){re.escape(run['run_id'])}\s", line)]
        assert TIME.search(row), row
        counts = rf"\s{run['events']}\s+{run['calls']}\s+{run['errors']}\s+(yes|no)\s*$"
        assert re.search(counts, row), row
    rows = [line for line in lines if line.strip() and not set(line.strip()) <= {"─"}]
    assert len(rows) == len(runs) + 1, listed.stdout  # the header and one line per run, nothing wrapped


def test_monitor_shows_every_header_and_tool_whole_at_80_columns(demo_store: str) -> None:
    report = json.loads(_invoke("monitor", "--json", "--store", demo_store).stdout)
    shown = _invoke("monitor", "--store", demo_store)
    assert shown.exit_code == 0, shown.output
    lines = _fits(shown.stdout)
    text = "\n".join(lines)
    for header in ("tool", "calls", "selected", "unknown", "used", "downstream ok"):
        assert re.search(rf"(^|\s){header}(\s|$)", text), (header, text)
    for tool in report["tools"]:
        assert re.search(rf"(^|\s){re.escape(tool['tool'])}\s+{tool['calls']}\s", text), tool["tool"]
        for outcome, counts in (
            ("rejected", tool["rejects_by_category"]),
            ("failed", tool["failures_by_category"]),
            ("undecided", tool["undecided_by_category"]),
        ):
            for category, n in counts.items():
                line = rf"(^|\s){re.escape(tool['tool'])}\s+{outcome}\s+{category}\s+{n}(\s|$)"
                assert re.search(line, text, re.MULTILINE), (tool["tool"], outcome, category, text)
    assert "alert: unknown_commits" in text and "notify_attendees" in text


def test_trace_show_says_one_call_in_the_singular(one_call: str) -> None:
    shown = _invoke("trace", "show", "solo-run", "--store", one_call)
    assert shown.exit_code == 0, shown.output
    assert " · 1 call · 0 errors · " in shown.stdout, shown.stdout
    assert "1 calls" not in shown.stdout


def test_monitor_says_one_call_in_one_run_in_the_singular(one_call: str) -> None:
    shown = _invoke("monitor", "--store", one_call)
    assert shown.exit_code == 0, shown.output
    assert "1 call in 1 run" in shown.stdout and "1 calls" not in shown.stdout, shown.stdout


def test_trace_export_and_import_count_one_event_in_the_singular(tmp_path: Path) -> None:
    from actionspace.trace.events import TraceEvent
    from actionspace.trace.sqlite import SqliteTraceStore

    path = tmp_path / "t.db"
    with SqliteTraceStore(path) as store:
        store.append_many([TraceEvent(run_id="r", seq=0, ts=1.0, kind="run_started")])
    out = tmp_path / "r.jsonl"
    exported = _invoke("trace", "export", "--out", str(out), "--store", f"sqlite:///{path}")
    assert exported.exit_code == 0, exported.output
    assert f"Exported 1 event to {out}." in exported.stderr
    imported = _invoke("trace", "import", str(out), "--store", f"sqlite:///{tmp_path / 'u.db'}")
    assert imported.exit_code == 0, imported.output
    assert "Read 1 event, 1 new." in imported.stderr


@given(n=st.integers(min_value=0, max_value=10**12), noun=st.sampled_from(["call", "run", "edge", "event"]))
def test_a_count_is_singular_exactly_for_one(n: int, noun: str) -> None:
    from actionspace._cli_tables import counted

    said = counted(n, noun)
    assert said == (f"1 {noun}" if n == 1 else f"{n:,} {noun}s")


def _every_command() -> list[tuple[str, ...]]:
    _mount()

    def paths(command: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
        found = [path]
        for name, sub in getattr(command, "commands", {}).items():
            found += paths(sub, (*path, name))
        return found

    return paths(typer.main.get_command(app))


@pytest.mark.parametrize("path", _every_command(), ids=lambda p: " ".join(p) or "actionspace")
def test_help_shows_flags_as_flags_taking_no_value(path: tuple[str, ...]) -> None:
    shown = _invoke(*path, "--help")
    assert shown.exit_code == 0, shown.output
    assert "<bool>" not in shown.stdout, shown.stdout
    assert re.search(r"--help\s+Show this message", shown.stdout), shown.stdout


def test_a_flag_given_a_value_is_a_usage_error_and_help_shows_it_alone(tmp_path: Path) -> None:
    shown = _invoke("trace", "list", "--help")
    assert re.search(r"--json\s+Print JSON instead of a table", shown.stdout), shown.stdout
    refused = _invoke("trace", "list", "--json", "true", "--store", "memory://")
    assert refused.exit_code == 2, refused.output


def test_eval_parse_without_a_corpus_says_how_to_point_at_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from actionspace.evaluation import parse_corpus

    monkeypatch.setattr(parse_corpus, "default_corpus_dir", lambda: tmp_path / "tests" / "parse" / "corpus")
    refused = _invoke("eval", "parse")
    assert refused.exit_code == 2, refused.output
    (line,) = refused.stderr.splitlines()
    assert line.startswith("error: ") and "--corpus PATH" in line, line
    assert "tests/parse/corpus" in line, line


def test_eval_parse_reads_a_corpus_given_with_corpus(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from actionspace.evaluation import parse_corpus

    monkeypatch.setattr(parse_corpus, "default_corpus_dir", lambda: tmp_path / "nowhere")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    case = {"id": "one", "source": "hand", "raw": "no call here", "calls": []}
    (corpus / "plain.json").write_text(json.dumps({"family": "plain", "cases": [case]}), encoding="utf-8")
    done = _invoke("eval", "parse", "--corpus", str(corpus))
    assert done.exit_code == 0, done.output
    assert re.search(r"plain\s.*\b1\b", done.stdout), done.stdout
