"""``actionspace trace show``'s header fits the terminal: it breaks between facts, never inside one,
and the run id (what a reader copies) stays whole on one line."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from typer.testing import CliRunner

from actionspace.trace.cli import trace_app
from actionspace.trace.events import RunSummary, summarize
from actionspace.trace.render import format_time, run_header
from actionspace.trace.sqlite import SqliteTraceStore
from tests.trace.factories import calendar_run

LONG_ID = "run-with-a-rather-long-id-for-a-nightly-batch-0123456789"


def _shown(renderable: object, width: int) -> list[str]:
    console = Console(width=width, force_terminal=False, color_system=None)
    with console.capture() as captured:
        console.print(renderable, crop=False)  # as `trace show` prints the header
    return captured.get().splitlines()


def _facts(summary: RunSummary) -> list[str]:
    said = "finished" if summary.finished else "not finished"
    return [
        f"started {format_time(summary.started_at)}",
        f"{summary.events:,} event" + ("" if summary.events == 1 else "s"),
        f"{summary.calls:,} call" + ("" if summary.calls == 1 else "s"),
        f"{summary.errors:,} error" + ("" if summary.errors == 1 else "s"),
        said,
    ]


def test_trace_show_at_80_columns_keeps_the_header_within_80_and_every_fact_whole(tmp_path: Path) -> None:
    path = tmp_path / "trace.db"
    with SqliteTraceStore(path) as store:
        store.append_many(calendar_run(LONG_ID, start=1_700_000_000.0, finished=False))
    done = CliRunner().invoke(
        trace_app, ["show", "run-with", "--store", f"sqlite:///{path}"], env={"COLUMNS": "80", "TERM": "dumb"}
    )
    assert done.exit_code == 0, done.output
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80, done.stdout
    head = lines[: next(i for i, line in enumerate(lines) if line.lstrip().startswith(("┏", "+", "─")))]
    assert any(LONG_ID in line for line in head), head
    summary = summarize(LONG_ID, calendar_run(LONG_ID, start=1_700_000_000.0, finished=False))
    assert summary is not None
    for fact in _facts(summary):
        assert any(fact in line for line in head), (fact, head)


@settings(max_examples=200, deadline=None)
@given(
    run_id=st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_", min_size=1, max_size=120),
    events=st.integers(min_value=0, max_value=10**9),
    calls=st.integers(min_value=0, max_value=10**7),
    errors=st.integers(min_value=0, max_value=10**6),
    finished=st.booleans(),
    width=st.integers(min_value=40, max_value=200),
)
def test_the_header_breaks_only_between_facts_and_fits_the_width(
    run_id: str, events: int, calls: int, errors: int, finished: bool, width: int
) -> None:
    summary = RunSummary(
        run_id=run_id,
        started_at=1_700_000_000.0,
        last_at=1_700_000_001.0,
        events=events,
        calls=calls,
        errors=errors,
        finished=finished,
    )
    lines = _shown(run_header(summary), width)
    assert any(f"run {run_id}" in line for line in lines), lines
    for fact in _facts(summary):
        assert any(fact in line for line in lines), (fact, lines)
    for line in lines:
        assert len(line) <= width or line.rstrip() == f"run {run_id}", (width, lines)


def test_a_wide_terminal_still_shows_the_header_on_one_line() -> None:
    summary = summarize("run-x", calendar_run("run-x"))
    assert summary is not None
    [line] = _shown(run_header(summary), 200)
    assert line.startswith("run run-x  started ") and line.endswith(
        "22 events · 3 calls · 1 error · finished"
    )
