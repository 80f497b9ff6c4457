"""Every run of every demo scenario, recorded in SQLite, replays: no difference, no tool run."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.demo.registry import DEMO_RUNTIMES
from actionspace.demo.runner import SCENARIOS, run_scenarios
from actionspace.trace.events import TraceEvent
from actionspace.trace.replay import DECISION_KINDS, Replayed, replay_events
from actionspace.trace.store import open_trace_store

TODAY = date(2026, 3, 2)


@dataclass(frozen=True)
class Recorded:
    folder: Path
    runs: dict[str, list[TraceEvent]]
    """Run id → its events."""


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    """Every scenario of ``actionspace demo``, run once into one SQLite store."""
    folder = tmp_path_factory.mktemp("demo")
    url = f"sqlite:///{folder / 'trace.db'}"
    outcomes = run_scenarios(sorted(SCENARIOS), folder, store=url, today=TODAY)
    assert all(o.passed for o in outcomes), [(o.name, o.error) for o in outcomes if not o.passed]
    store = open_trace_store(url, create=False)
    try:
        runs = {s.run_id: store.events(s.run_id) for s in store.runs(limit=100)}
    finally:
        store.close()
    yield Recorded(folder, runs)


def _scenario(run_id: str, events: list[TraceEvent]) -> str:
    """Which scenario recorded the run (by its id, else by the tools it called)."""
    if run_id.startswith("migrate-"):
        return "migration:" + run_id.split("-")[1]
    if run_id.endswith("-followup"):
        return "followup"
    tools = {e.data.get("tool") for e in events if e.kind == "validated"}
    for tool, scenario in (("create_event", "calendar"), ("check_vendor", "vendors")):
        if tool in tools:
            return scenario
    return "revenue"


RUNS = [
    "calendar",
    "followup",
    "vendors",
    "migration:independent",
    "migration:switch_fault",
    "migration:switch_clean",
    "revenue",
]
"""Every run the demo records: scenario 1 leaves two (the booking and its follow-up), scenario 3
one per variant."""


def _fresh(scenario: str, recorded: Recorded, tmp: Path) -> Runtime:
    name, _, variant = scenario.partition(":")
    # scenario 3 confines its tools to its variant's folder: the folder is part of their schema
    folder = recorded.folder / "migration" / variant if variant else tmp
    return DEMO_RUNTIMES[name](today=TODAY, folder=folder)


def _count_calls(rt: Runtime) -> dict[str, int]:
    """Wrap every tool of ``rt`` so that running it counts (the replay must never run one)."""
    counts: dict[str, int] = {}
    for spec in rt.catalog.offerable():
        fn = spec.fn
        assert fn is not None
        counts[spec.key] = 0

        def counted(*a: Any, _fn: Callable[..., Any] = fn, _key: str = spec.key, **k: Any) -> Any:
            counts[_key] += 1
            return _fn(*a, **k)

        object.__setattr__(spec, "fn", counted)
    return counts


def test_the_demo_records_exactly_these_runs(recorded: Recorded) -> None:
    assert sorted(_scenario(r, e) for r, e in recorded.runs.items()) == sorted(RUNS)


@pytest.mark.parametrize("scenario", RUNS)
def test_every_demo_run_replays_with_no_difference(
    scenario: str,
    recorded: Recorded,
    tmp_path: Path,
) -> None:
    [(run_id, events)] = [(r, e) for r, e in recorded.runs.items() if _scenario(r, e) == scenario]
    rt = _fresh(scenario, recorded, tmp_path)
    counts = _count_calls(rt)
    try:
        result: Replayed = replay_events(run_id, events, rt)
        assert rt.trace.runs() == []  # the fresh runtime recorded nothing: no call went through it
    finally:
        rt.close()
    assert counts and set(counts.values()) == {0}
    assert result.problems == ()
    assert result.differences == [], [d.to_dict() for d in result.differences]
    decision_events = {e.seq for e in events if e.kind in DECISION_KINDS}
    assert len(decision_events) >= 3
    assert set(result.recorded_events) == decision_events
    # every recorded decision event is answered by a decision naming it ...
    assert {d.seq for d in result.decisions if d.seq is not None} == decision_events
    # ... and re-decided: plan nodes too (their checked arguments are in a ``proposed`` event)
    assert result.redecided_events == decision_events
    assert result.unreplayed == [], [d.to_dict() for d in result.unreplayed]
