"""``trace replay``: every recorded decision re-decided against a fresh runtime, no tool run."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import date
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from actionspace import Runtime
from actionspace.demo.calendar import CalendarService
from actionspace.demo.scenario import build_runtime, next_tuesday, run_demo, seed_calendar
from actionspace.errors import ActionError
from actionspace.policy import NoSecretToExternalSink
from actionspace.policy.arguments import ArgumentPolicy, Param
from actionspace.policy.provenance import Source
from actionspace.policy.provenance_stage import ProvenanceStage
from actionspace.trace.cli import trace_app
from actionspace.trace.replay import parse_source, replay_events
from actionspace.validation.verdicts import Rejected

TODAY = date(2026, 3, 2)
FRESH: dict[str, Any] = {}


def _fresh_demo(tmp: Path, *, stricter: bool = False) -> Runtime:
    service = CalendarService(tmp / "fresh.db")
    seed_calendar(service, next_tuesday(TODAY))
    rt = build_runtime(service, "memory://")
    if stricter:  # a validator that changed since the run: no event may be an hour long
        spec = rt.catalog.get("create_event")

        def no_hour(ctx: Any, args: Mapping[str, Any]) -> Rejected | None:
            return Rejected(ActionError.of("invalid_arguments", "no hour-long events"))

        object.__setattr__(spec, "validators", (*spec.validators, no_hour))  # this fresh runtime's own spec
    return rt


def fresh_demo_runtime() -> Runtime:
    """The factory ``trace replay --runtime`` loads in the CLI test."""
    return _fresh_demo(FRESH["dir"])


def _demo(tmp: Path) -> tuple[str, str]:
    store = f"sqlite:///{tmp / 'trace.db'}"
    report = run_demo(tmp / "demo", store=store, today=TODAY)
    return report.run_id, store


def test_replay_reproduces_every_decision_of_the_demo_run(tmp_path: Path) -> None:
    run_id, store = _demo(tmp_path)
    rt = Runtime(store, recover_on_start=False)
    events = rt.trace.events(run_id)
    result = replay_events(run_id, events, _fresh_demo(tmp_path))
    stages = {d.stage for d in result.decisions}
    assert {"resolve", "authorize", "validate"} <= stages
    assert result.differences == [], [d.to_dict() for d in result.differences]
    assert len(result.decisions) >= 3 * len({e.call_id for e in events if e.kind == "validated"})


def test_replay_reports_a_changed_validator(tmp_path: Path) -> None:
    run_id, store = _demo(tmp_path)
    events = Runtime(store, recover_on_start=False).trace.events(run_id)
    result = replay_events(run_id, events, _fresh_demo(tmp_path, stricter=True))
    changed = [d for d in result.differences if d.stage == "validate"]
    assert changed and all(d.tool == "create_event" and d.replayed == "rejected" for d in changed)


def test_trace_replay_cli_exits_0_when_reproduced_and_1_when_a_decision_differs(tmp_path: Path) -> None:
    run_id, store = _demo(tmp_path)
    FRESH["dir"] = tmp_path
    ok = CliRunner().invoke(
        trace_app,
        ["replay", run_id, "--store", store, "--runtime", f"{__name__}:fresh_demo_runtime", "--json"],
    )
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout)["differences"] == 0
    bad = CliRunner().invoke(trace_app, ["replay", run_id, "--store", store, "--runtime", "tests.nowhere:x"])
    assert bad.exit_code == 1


def test_replay_re_decides_flow_from_the_recorded_provenance() -> None:
    rules = {"send": {"to": Param("user | tool_result")}}

    def build(policy_rules: Mapping[str, Any]) -> Runtime:
        rt = Runtime(
            "memory://",
            recover_on_start=False,
            flow_policy=NoSecretToExternalSink() & ArgumentPolicy(policy_rules),
            stages=[ProvenanceStage()],
        )

        @rt.tool(effect="external")
        def send(to: str, body: str) -> dict[str, bool]:
            return {"ok": True}

        return rt

    rt = build(rules)
    run = rt.new_run("r")
    rt.user_input(run, "send hi to bob")
    assert rt.call({"name": "send", "arguments": {"to": "bob", "body": "hi"}}, run_id=run).status == "ok"
    denied = rt.call({"name": "send", "arguments": {"to": "eve", "body": "hi"}}, run_id=run)
    assert denied.error is not None and denied.error.category == "policy_violation"
    events = rt.trace.events(run)
    assert replay_events(run, events, build(rules)).differences == []
    looser = replay_events(run, events, build({}))
    assert [(d.stage, d.recorded, d.replayed) for d in looser.differences] == [("flow", "deny", "allow")]


def test_a_recorded_source_reads_back() -> None:
    for source in (Source("user", None, "0:1-4"), Source("untrusted", "r:n1", "/0/body"), Source("model")):
        assert parse_source(str(source)) == source
    assert parse_source("tool_result(r:n1, /)") == Source("tool_result", "r:n1", "")
    assert parse_source("nonsense") == Source("model")
