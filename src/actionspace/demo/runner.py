"""Run the built-in scenarios in order, each in its own folder, and collect their verdicts.

1 calendar (scenario.py), 2 vendors (vendors.py), 3 config migration (migrate.py), 4 revenue
(revenue.py). Every scenario's verdict is computed from its service's state after the run.
"""

from __future__ import annotations

import importlib
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from rich.console import RenderableType
from rich.text import Text

__all__ = ["SCENARIOS", "ScenarioOutcome", "run_scenario", "run_scenarios"]

SCENARIOS: dict[int, tuple[str, str]] = {
    1: ("calendar", "next Tuesday 3 pm, one hour review with the design team"),
    2: ("vendors", "verify three vendors in parallel, save the confirmed ones, merge on conflict"),
    3: ("migration", "migrate a directory of config files as a DAG"),
    4: ("revenue", "compare two companies' latest annual revenue, checked by a verifier"),
}
"""Number → (folder name, one-line title)."""


@dataclass
class ScenarioOutcome:
    """One scenario's run: its verdict, its report as JSON, and how to render it."""

    number: int
    name: str
    title: str
    passed: bool
    report: dict[str, Any] = field(default_factory=dict)
    render: Callable[[], RenderableType] | None = field(default=None, repr=False)
    error: str | None = None
    """Why the scenario could not run (its report is then empty)."""
    skipped: bool = False
    """The scenario is not part of this build; it neither passes nor fails the run."""
    traceback: str | None = field(default=None, repr=False)
    """The full traceback when the scenario raised (for stderr, not for the JSON report)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "scenario": self.number,
            "name": self.name,
            "title": self.title,
            "passed": self.passed,
            "skipped": self.skipped,
            "error": self.error,
            "report": self.report,
        }

    def renderable(self) -> RenderableType:
        if self.render is not None:
            return self.render()
        if self.error is not None:
            style = "yellow" if self.skipped else "bold red"
            return Text(f"scenario {self.number} did not run: {self.error}", style=style)
        verdict = "passed" if self.passed else "NOT verified"
        return Text(f"scenario {self.number}: {verdict}", style="bold green" if self.passed else "bold red")


def run_scenario(number: int, folder: Path, *, store: str, today: date | None = None) -> ScenarioOutcome:
    """Run scenario ``number`` in ``folder``; an exception is an outcome that did not pass."""
    name, title = SCENARIOS[number]
    try:
        return _RUNNERS[number](folder, store, today)
    except Exception as exc:
        detail = "".join(traceback.format_exception_only(exc)).strip()
        full = "".join(traceback.format_exception(exc))
        return ScenarioOutcome(number, name, title, False, error=detail, traceback=full)


def run_scenarios(
    numbers: Iterable[int], folder: Path, *, store: str, today: date | None = None
) -> list[ScenarioOutcome]:
    """Run each scenario in order, scenario N in ``folder / <its name>``."""
    return [run_scenario(n, folder / SCENARIOS[n][0], store=store, today=today) for n in numbers]


def _calendar(folder: Path, store: str, today: date | None) -> ScenarioOutcome:
    from actionspace.demo.followup import leave_pending, with_note
    from actionspace.demo.render import render_report
    from actionspace.demo.scenario import PRINCIPAL, run_demo

    report = run_demo(folder, store=store, today=today)
    held = leave_pending(store, after_run=report.run_id, event=report.event, principal=PRINCIPAL)

    def render() -> RenderableType:
        return with_note(render_report(report), held)

    return ScenarioOutcome(1, *SCENARIOS[1], report.verified, report.to_dict(), render)


def _vendors(folder: Path, store: str, today: date | None) -> ScenarioOutcome:
    from actionspace.demo.render import render_vendors
    from actionspace.demo.vendors import run_vendors

    report = run_vendors(folder, store=store, today=today)
    return ScenarioOutcome(2, *SCENARIOS[2], report.passed, report.to_dict(), lambda: render_vendors(report))


def _migration(folder: Path, store: str, today: date | None) -> ScenarioOutcome:
    try:
        module = importlib.import_module("actionspace.demo.migrate")
    except ModuleNotFoundError as exc:
        if exc.name != "actionspace.demo.migrate":
            raise
        return ScenarioOutcome(3, *SCENARIOS[3], False, error="not available in this build", skipped=True)
    report = module.run_migration(folder, store=store)
    render = getattr(module, "render_migration", None)
    return ScenarioOutcome(
        3,
        *SCENARIOS[3],
        bool(report.passed),
        report.to_dict(),
        (lambda: render(report)) if render is not None else None,
    )


def _revenue(folder: Path, store: str, today: date | None) -> ScenarioOutcome:
    from actionspace.demo.render import render_revenue
    from actionspace.demo.revenue import run_revenue

    report = run_revenue(folder, store=store)
    return ScenarioOutcome(4, *SCENARIOS[4], report.passed, report.to_dict(), lambda: render_revenue(report))


_RUNNERS: dict[int, Callable[[Path, str, date | None], ScenarioOutcome]] = {
    1: _calendar,
    2: _vendors,
    3: _migration,
    4: _revenue,
}
