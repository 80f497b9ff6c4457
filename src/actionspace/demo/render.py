"""Rich rendering of the demo reports: the step timeline, a summary or verdict table, the result."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from actionspace.demo.revenue import RevenueReport
from actionspace.demo.scenario import DemoReport
from actionspace.demo.steps import PlanStep
from actionspace.demo.vendors import VendorsReport

__all__ = ["render_checks", "render_report", "render_revenue", "render_steps", "render_vendors"]

_STYLE = {"ok": "green", "partial": "yellow", "error": "red"}
_NARROW = 110
"""Below this many columns (CI logs, pipes, 80-column terminals) a timeline stacks each step's fields."""


class _Adaptive:
    """A timeline drawn as a wide table, or, where it has fewer than ``_NARROW`` columns, stacked."""

    def __init__(self, wide: Callable[[], Table], narrow: Callable[[], Table]) -> None:
        self.wide, self.narrow = wide, narrow

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.narrow() if options.max_width < _NARROW else self.wide()


def _stacked(title: str, rows: Iterator[tuple[str, Text, Text, str, str, str]]) -> Table:
    """One row per step: its number, then head (node / tool and outcome), intent, what it says, next."""
    table = Table(title=title, expand=True, show_lines=True)
    table.add_column("#", justify="right", width=3)
    table.add_column("step: what the model did, what the observation says, what it does next", ratio=1)
    for index, head, outcome, intent, says, move in rows:
        cell = Text.assemble(
            head, "  ", outcome, "\n", (intent, "italic"), "\n", says, "\n", ("→ ", "dim"), move
        )
        table.add_row(index, cell)
    return table


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
    return Group(
        _Adaptive(lambda: _report_table(report), lambda: _report_stacked(report)), _report_rest(report)
    )


def _report_stacked(report: DemoReport) -> Table:
    rows = (
        (
            str(step.index),
            Text(step.tool, style="cyan"),
            Text(step.category or step.status, style=_STYLE.get(step.status, "")),
            f"{step.intent} ({step.format})",
            _detail(step.to_dict()),
            step.next_move,
        )
        for step in report.steps
    )
    return _stacked(f"request: {report.request!r}", rows)


def _report_table(report: DemoReport) -> Table:
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
    return timeline


def _report_rest(report: DemoReport) -> RenderableType:
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
        f"its trace:  actionspace trace show {report.run_id} --store {report.store}",
    )
    return Group(summary, Panel(footer, title="result"))


def render_steps(title: str, steps: Sequence[PlanStep]) -> RenderableType:
    """The timeline of a plan-based scenario, in the spirit of scenario 1's; a section per plan."""
    return _Adaptive(lambda: _steps_table(title, steps), lambda: _steps_stacked(title, steps))


def _steps_stacked(title: str, steps: Sequence[PlanStep]) -> Table:
    rows = (
        (
            str(step.index),
            Text.assemble((f"{step.plan}: ", "dim"), step.node, " ", (step.tool, "cyan")),
            Text(step.category or step.status, style=_STYLE.get(step.status, "")),
            step.intent,
            step.detail,
            step.next_move,
        )
        for step in steps
    )
    return _stacked(title, rows)


def _steps_table(title: str, steps: Sequence[PlanStep]) -> Table:
    timeline = Table(title=title, expand=True, show_lines=True)
    timeline.add_column("#", justify="right", width=3)
    timeline.add_column("plan: node / tool", no_wrap=True)
    timeline.add_column("intent", ratio=2)
    timeline.add_column("outcome", no_wrap=True)
    timeline.add_column("what the observation says", ratio=4)
    timeline.add_column("next move", ratio=2)
    for i, step in enumerate(steps):
        outcome = Text(step.category or step.status, style=_STYLE.get(step.status, ""))
        timeline.add_row(
            str(step.index),
            Text.assemble((f"{step.plan}: ", "dim"), step.node, "\n", (step.tool, "cyan")),
            step.intent,
            outcome,
            step.detail,
            step.next_move,
            end_section=i + 1 < len(steps) and steps[i + 1].plan != step.plan,
        )
    return timeline


def render_checks(checks: Mapping[str, bool]) -> Table:
    """One row per verdict, read from the service's state."""
    table = Table(title="verdict (read back from the service)", show_header=True)
    table.add_column("check")
    table.add_column("", justify="center")
    for name, ok in checks.items():
        table.add_row(name, Text("yes" if ok else "NO", style="green" if ok else "bold red"))
    return table


def _verdict(passed: bool, good: str) -> Text:
    return Text(good if passed else "NOT verified", style="bold green" if passed else "bold red")


def render_vendors(report: VendorsReport) -> RenderableType:
    """Scenario 2: the plans' timeline, the verdict, and the list as the registry holds it."""
    final = report.final_list
    listed = ", ".join(
        f"{e['vendor_id']} {e['version']} (by {e['added_by']})" for e in final.get("entries", [])
    )
    footer = Text.assemble(
        _verdict(report.passed, "verified: both confirmed vendors listed once, the other edit kept"),
        "\n",
        f"plans: {', '.join(f'{k} {v}' for k, v in report.plans.items())}\n",
        f"{final.get('list_id')} version {final.get('version')}: {listed}\n",
        f"saves accepted by the registry: {len(report.saves)} "
        f"({', '.join(s['author'] for s in report.saves)}); resent key {report.resend.get('key')} "
        f"-> {report.resend.get('saves_with_key')} save\n",
        f"registry: {report.folder}/vendors.db\n",
        f"its trace:  actionspace trace show {report.run_id} --store {report.store}",
    )
    return Group(
        render_steps(f"request: {report.request!r}", report.steps),
        render_checks(report.checks),
        Panel(footer, title="result"),
    )


def render_revenue(report: RevenueReport) -> RenderableType:
    """Scenario 4: the plans' timeline, the verdict, and the accepted comparison."""
    parts: list[str | Text] = [
        _verdict(report.passed, "verified: official reports, one fiscal year, one currency"),
        "\n",
        f"plans: {', '.join(f'{k} {v}' for k, v in report.plans.items())}\n",
    ]
    comparison = report.comparison
    if comparison is not None:
        for key in ("a", "b"):
            side = comparison[key]
            reported, converted = side["reported"], side["converted"]
            parts.append(
                f"{side['company']}: FY{side['fiscal_year']} "
                f"{reported['currency']} {reported['amount']:,.1f} M = "
                f"{converted['currency']} {converted['amount']:,.1f} M "
                f"({side['doc_id']}, {side['rate_source']})\n"
            )
        parts.append(
            f"{comparison['larger']} is larger by {comparison['currency']} {comparison['difference']:,.1f} M "
            f"(x{comparison['ratio']})\n"
        )
    parts.append(f"documents: {report.folder}/documents.db\n")
    parts.append(f"its trace:  actionspace trace show {report.run_id} --store {report.store}")
    return Group(
        render_steps(f"request: {report.request!r}", report.steps),
        render_checks(report.checks),
        Panel(Text.assemble(*parts), title="result"),
    )
