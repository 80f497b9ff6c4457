"""One-line summaries, outcomes and timeline rows, straight from events."""

from __future__ import annotations

import json
from typing import Any

import pytest
from rich.console import Console

from actionspace.trace.events import TraceEvent, summarize
from actionspace.trace.render import (
    event_outcome,
    events_json,
    run_header,
    runs_table,
    summarize_event,
    timeline_rows,
    timeline_table,
)
from tests.trace.factories import LONG_MODEL_OUTPUT, calendar_run


def ev(kind: str, call_id: str | None = None, **data: Any) -> TraceEvent:
    return TraceEvent(run_id="r", seq=0, kind=kind, ts=1.0, call_id=call_id, data=data)


def render(renderable: object) -> str:
    console = Console(width=200, record=True, file=None, force_terminal=False)
    with console.capture() as captured:
        console.print(renderable)
    return captured.get()


@pytest.mark.parametrize(
    ("event", "summary"),
    [
        (ev("run_started", principal="alice"), "principal alice"),
        (ev("run_started", principal={"id": "svc-bot", "scopes": ["*"]}), "principal svc-bot"),
        (
            ev(
                "candidates_offered",
                offered=[{"name": "a", "version": "1", "schema_hash": "h"}, {"name": "b"}],
                left_out=[{"name": "c", "reason": "phase"}],
            ),
            "2 offered: a@1, b; 1 left out: c (phase)",
        ),
        (
            ev("parsed", format="anthropic", calls=[{"name": "x", "id": "1"}, {"name": "y"}]),
            "anthropic: x, y",
        ),
        (
            ev("parsed", format="text", calls=[], error="no JSON object"),
            "text: no calls; error: no JSON object",
        ),
        (ev("resolved", tool="x", version="3", schema_hash="0123456789abcdef"), "x@3 schema 0123456789ab"),
        (
            ev("resolved", error={"category": "unknown_tool", "message": "no tool y"}),
            "error: unknown_tool: no tool y",
        ),
        (
            ev(
                "validated",
                verdict="rejected",
                category="invalid_arguments",
                field_errors=[{"path": "/a", "message": "m"}, {"path": "", "message": "m"}],
            ),
            "rejected invalid_arguments: /a, /",
        ),
        (ev("validated", verdict="needs_approval", reason="high risk"), "needs_approval (high risk)"),
        (
            ev("authorized", verdict="denied", category="permission_denied", missing_scope="calendar:write"),
            "denied permission_denied, missing scope calendar:write",
        ),
        (ev("authorized", verdict="denied", missing_scope=["a:w", "b:w"]), "denied, missing scope a:w, b:w"),
        (ev("dispatched", tool="x", version="2", attempt=3, node_id="n7"), "x@2 attempt 3 node n7"),
        (
            ev("attempt", attempt=2, category="rate_limited", delay_s=1.5),
            "attempt 2 rate_limited, retry in 1.50s",
        ),
        (
            ev("observation", status="error", category="transient", recovery=["retry_same_key"]),
            "error transient → retry_same_key",
        ),
        (
            ev(
                "observation",
                status="ok",
                trimming={"rule": "rows", "rule_version": 2, "original_bytes": 10_000, "kept_bytes": 512},
                artifact_ref="artifact://x",
            ),
            "ok; trimmed by rows@2 (10,000 → 512 B); artifact artifact://x",
        ),
        (ev("run_finished", status="completed"), "status completed"),
        (ev("ledger", key="k1", state="committed"), "key=k1 state=committed"),
        (ev("some_future_kind", answer=42, nested={"a": [1]}), 'answer=42 nested={"a":[1]}'),
    ],
)
def test_each_kind_has_a_one_line_summary(event: TraceEvent, summary: str) -> None:
    assert summarize_event(event) == summary


def test_model_output_shows_the_first_80_characters_on_one_line() -> None:
    summary = summarize_event(ev("model_output", raw=LONG_MODEL_OUTPUT))
    flat = " ".join(LONG_MODEL_OUTPUT.split())
    assert summary == f'"{flat[:80]}…" ({len(LONG_MODEL_OUTPUT):,} chars)'
    assert summarize_event(ev("model_output", raw="short\nanswer")) == '"short answer"'


def test_control_characters_in_model_output_are_escaped() -> None:
    assert summarize_event(ev("model_output", raw="a\x1b[31mb")) == '"a\\x1b[31mb"'


@pytest.mark.parametrize(
    "event",
    [
        ev("candidates_offered", offered="not a list", left_out=[1, None]),
        ev("parsed", calls=[None, "x", 3], format=None),
        ev("validated", field_errors="oops"),
        ev("authorized"),
        ev("attempt", delay_s="soon"),
        ev("observation", trimming="none", recovery="wait"),
        ev("run_started"),
        ev("dispatched"),
    ],
)
def test_payloads_of_unexpected_shape_still_summarize(event: TraceEvent) -> None:
    assert isinstance(summarize_event(event), str)


def test_summaries_are_clipped_to_one_bounded_line() -> None:
    summary = summarize_event(ev("unknown", text="word\n" * 500))
    assert "\n" not in summary
    assert len(summary) <= 160


@pytest.mark.parametrize(
    ("event", "outcome"),
    [
        (ev("validated", verdict="accepted"), "ok"),
        (ev("validated", verdict="rejected"), "error"),
        (ev("validated", verdict="needs_approval"), "warn"),
        (ev("authorized", verdict="denied"), "error"),
        (ev("observation", status="ok"), "ok"),
        (ev("observation", status="error", category="transient"), "error"),
        (ev("attempt", attempt=1, category="transient"), "warn"),
        (ev("resolved", error="unknown tool"), "error"),
        (ev("parsed", format="openai", calls=[{"name": "x"}]), "ok"),
        (ev("run_finished", status="failed"), "error"),
        (ev("verified", passed=False), "error"),
        (ev("model_output", raw="hi"), "info"),
        (ev("whatever"), "info"),
    ],
)
def test_outcomes_follow_verdicts_and_statuses(event: TraceEvent, outcome: str) -> None:
    assert event_outcome(event) == outcome


def test_timeline_rows_count_milliseconds_from_the_first_event() -> None:
    rows = timeline_rows(calendar_run("r", start=50.0))
    assert [round(r.offset_ms, 3) for r in rows[:3]] == [0.0, 12.5, 25.0]
    assert (rows[5].kind, rows[5].call_id, rows[5].outcome) == ("validated", "c1", "error")
    assert rows[0].call_id == ""


def test_the_timeline_table_prints_every_event_without_reading_markup() -> None:
    events = [*calendar_run("r"), ev("model_output", raw="[bold]not markup[/bold]")]
    text = render(timeline_table(events))
    assert "trimmed by rows@3" in text
    assert "[bold]not markup[/bold]" in text


def test_the_runs_table_and_header_show_the_counts() -> None:
    summary = summarize("run-x", calendar_run("run-x"))
    assert summary is not None
    assert "run-x" in render(runs_table([summary]))
    assert "22 events · 3 calls · 1 error · finished" in render(run_header(summary))


def test_events_json_is_an_array_of_event_dicts() -> None:
    events = calendar_run("r")
    assert json.loads(events_json(events)) == [e.to_dict() for e in events]
