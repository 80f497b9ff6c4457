"""Rich rendering of a demo report: the step timeline and a summary table."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from actionspace.demo.scenario import DemoReport

__all__ = ["render_report"]

_STYLE = {"ok": "green", "partial": "yellow", "error": "red"}


def _detail(step: dict[str, object]) -> str:
    obs = step["observation"]
    assert isinstance(obs, dict)
    err = obs.get("error")
    if not err:
        data = obs.get("data")
        text = str(data)
        how = obs.get("diagnostics", {}).get("resolved_by")
        if how:
            text = f"response lost; found by {how.replace('_', ' ')} (sent once) | {text}"
        return text if len(text) <= 110 else text[:107] + "..."
    parts = [str(err["message"])]
    if err.get("field_errors"):
        parts.append("fields: " + ", ".join(f"{f['path']} ({f['message']})" for f in err["field_errors"]))
    if err.get("candidates"):
        parts.append(
            "candidates: " + ", ".join(f"{c['id']} = {c.get('label', '')}" for c in err["candidates"])
        )
    if err.get("alternatives"):
        alt = err["alternatives"][0]
        parts.append(
            f"free: {alt['start'][11:16]}-{alt['end'][11:16]} (+{len(err['alternatives']) - 1} more)"
        )
    return " | ".join(parts)


def render_report(report: DemoReport) -> RenderableType:
    timeline = Table(title=f"request: {report.request!r}", expand=True, show_lines=True)
    timeline.add_column("#", justify="right", width=3)
    timeline.add_column("model turn (format)", ratio=2)
    timeline.add_column("tool", no_wrap=True)
    timeline.add_column("outcome", no_wrap=True)
    timeline.add_column("what the observation says", ratio=4)
    timeline.add_column("next move", ratio=2)
    for step in report.steps:
        d = step.to_dict()
        outcome = Text(step.category or step.status, style=_STYLE.get(step.status, ""))
        timeline.add_row(
            str(step.index), f"{step.intent} ({step.format})", step.tool, outcome, _detail(d), step.next_move
        )
    summary = Table(title="summary", show_header=True)
    summary.add_column("outcome")
    summary.add_column("steps", justify="right")
    counts: dict[str, int] = {}
    for step in report.steps:
        key = step.category or "ok"
        counts[key] = counts.get(key, 0) + 1
    for key, n in counts.items():
        summary.add_row(Text(key, style="green" if key == "ok" else "red"), str(n))
    verdict = Text(
        "verified: the event read back matches the one created" if report.verified else "NOT verified",
        style="bold green" if report.verified else "bold red",
    )
    footer = Text.assemble(
        verdict,
        "\n",
        f"events in the calendar: {report.events_in_calendar} (folder {report.folder})\n",
        f"mails sent: {report.mails_sent} (one per attendee, sent once)\n",
        *(
            f"unknown_commit left for a person: actionspace ledger resolve {key} --outcome committed "
            f"--by YOU --reason 'seen in the outbox' --store {report.store}\n"
            for key in report.unknown_commits
        ),
        f"trace: {report.store}  run {report.run_id}\n",
        f"replay it:  actionspace trace show {report.run_id} --store {report.store}",
    )
    return Group(timeline, summary, Panel(footer, title="result"))
