"""``actionspace monitor``: per-tool health of the runs in a trace store, as a table or JSON.

Expected failures (bad store URL, missing or unreadable store, bad ``--since``) print one line to
stderr and exit with code 1. The command exits 0 whether or not alerts were raised.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Annotated, Final, NoReturn

import typer
from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from actionspace._cli_tables import cell, counted, on_interrupt, refused_store, shown_store
from actionspace.errors import ConfigurationError
from actionspace.evaluation.monitor import MonitorReport, MonitorThresholds, monitor
from actionspace.trace.store import default_store_url, open_trace_store

__all__ = ["monitor_command", "parse_since", "report_table"]

_DEFAULTS: Final = MonitorThresholds()
_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}
_DURATION: Final = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$", re.IGNORECASE)


def parse_since(text: str, *, now: float | None = None) -> float:
    """Unix time (seconds) for ``--since``: a duration back from ``now`` or an ISO 8601 time.

    Durations are a number and one unit: ``90s``, ``30m``, ``2h``, ``7d``, ``1w``. An ISO time
    without a zone is UTC. ``now`` defaults to the current time. Raises ValueError otherwise.
    """
    match = _DURATION.match(text)
    if match is not None:
        amount, unit = float(match.group(1)), match.group(2).lower()
        start = (time.time() if now is None else now) - amount * _UNITS[unit]
        if not math.isfinite(start):
            raise ValueError(f"--since {text.strip()!r} reaches back further than any clock")
        return start
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"--since takes a duration (30m, 2h, 7d) or an ISO time (2026-11-30T09:00), got {text!r}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def monitor_command(
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            metavar="URL",
            help="Trace store URL: sqlite:///relative.db, sqlite:////abs/path.db or "
            "postgresql://user@host/db. Default: $ACTIONSPACE_STORE, else sqlite:///$ACTIONSPACE_HOME/actionspace.db.",
            show_default=False,
        ),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            metavar="ISO|DURATION",
            help="Only calls since then: an ISO time (UTC when no zone is given) or a duration back "
            "from now (90s, 30m, 2h, 7d, 1w).",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    field_share: Annotated[
        float,
        typer.Option(
            "--field-share",
            min=0.0,
            max=1.0,
            help="Alert when this share of a tool's rejects name one field.",
        ),
    ] = _DEFAULTS.field_share,
    min_rejects: Annotated[
        int, typer.Option("--min-rejects", min=1, help="Rejects a tool needs before the field alert applies.")
    ] = _DEFAULTS.min_rejects,
) -> None:
    """Per tool: selection rate, rejects by category and field, failures, undecided calls (waiting for
    approval, unknown commits), unknown commits still unsettled, result use.

    Alerts name tools whose rejects concentrate on one field and tools with unknown commits.
    """
    url = store or default_store_url()
    on_interrupt("nothing was written (monitor only reads)")
    try:
        cutoff = parse_since(since) if since is not None else None
    except ValueError as exc:
        _fail(str(exc))
    try:
        thresholds = MonitorThresholds(field_share=field_share, min_rejects=min_rejects)
        opened = open_trace_store(url, read_only=True)  # no trace there: refused in one line
        try:
            report = monitor(opened, since=cutoff, thresholds=thresholds)
        finally:
            opened.close()
    except ConfigurationError as exc:
        _fail(str(exc))
    except sqlite3.DatabaseError as exc:
        _fail(refused_store(url, exc, "trace store") or f"cannot read trace store {shown_store(url)}: {exc}")
    if as_json:
        typer.echo(_json(report))
    elif not report.tools:
        Console(stderr=True, highlight=False, soft_wrap=True).print(
            Text(f"No tool calls in {shown_store(url)}.")
        )
    else:
        Console(highlight=False).print(report_table(report))


def report_table(report: MonitorReport) -> Group:
    """What ``actionspace monitor`` prints, whole at 80 columns: one row per tool (its calls and what
    became of their results), a legend, then one row per tool, outcome and error category for the
    calls that were rejected, failed or are undecided, then one line per alert."""
    title = f"{counted(report.calls, 'call')} in {counted(report.runs, 'run')}"
    tools = _table(title)
    for name in ("tool", "calls", "selected", "unknown", "used", "downstream ok"):
        tools.add_column(name, justify="left" if name == "tool" else "right", no_wrap=name != "tool")
    for t in report.tools:
        tools.add_row(
            cell(t.tool),
            str(t.calls),
            _pct(t.selection_rate),
            Text(str(t.unknown_commits), style="bold red") if t.unknown_commits else "0",
            _ratio(t.used_results, t.ok_results),
            _ratio(t.consumers_ok, t.consumers),
        )
    lines: list[Table | Text] = [tools, Text(_LEGEND, style="dim"), Text("")]
    if any(t.rejects or t.failures or t.undecided for t in report.tools):
        lines.append(_not_ok_table(report))
    for alert in report.alerts:
        lines.append(Text.assemble(("alert: ", "bold red"), (alert.kind, "bold"), " ", alert.message))
    if not report.alerts:
        lines.append(Text("no alerts", style="green"))
    return Group(*lines)


_LEGEND: Final = (
    "selected: share of all calls · unknown: unknown commits not yet settled · used: ok results "
    "another call consumed · downstream ok: consuming calls that ended ok"
)


def _not_ok_table(report: MonitorReport) -> Table:
    """One row per tool, outcome and error category; a tool's most rejected field on its first
    rejected row."""
    table = _table("rejected (before dispatch), failed or undecided calls")
    for name in ("tool", "outcome", "category", "calls", "top field"):
        table.add_column(name, justify="right" if name == "calls" else "left", no_wrap=name != "top field")
    for t in report.tools:
        top_field = next(iter(t.rejects_by_field.items()), None)
        for outcome, counts in (
            ("rejected", t.rejects_by_category),
            ("failed", t.failures_by_category),
            ("undecided", t.undecided_by_category),
        ):
            for category, n in counts.items():
                shown = f"{top_field[0]} ({top_field[1]})" if outcome == "rejected" and top_field else ""
                top_field = None if shown else top_field
                table.add_row(cell(t.tool), outcome, cell(category), str(n), cell(shown))
    return table


def _table(title: str) -> Table:
    return Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        show_edge=False,
        collapse_padding=True,
    )


def _json(report: MonitorReport) -> str:
    return json.dumps(report.to_dict(), indent=2)


def _pct(value: float) -> str:
    return f"{value:.0%}"


def _ratio(part: int, whole: int) -> str:
    return f"{part}/{whole} ({part / whole:.0%})" if whole else "-"


def _counts(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items())


def _fail(message: str) -> NoReturn:
    """One line on stderr, however long its path and however many lines the driver's text spans."""
    from actionspace._cli_tables import REFUSAL_PREFIX, one_line

    said = Text(one_line(message))
    said.stylize("bold red", 0, len(REFUSAL_PREFIX))
    Console(stderr=True, highlight=False, soft_wrap=True).print(said)
    raise typer.Exit(code=1)
