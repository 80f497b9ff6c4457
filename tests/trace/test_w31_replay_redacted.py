"""A replay never reports a difference it did not find: a trace as a viewer without clearance
saw it (a secret-labelled run, redacted, then exported and imported elsewhere) holds no values,
so the decisions that need them are not replayed, and say why; the others are reproduced."""

from __future__ import annotations

import dataclasses

from actionspace import Runtime
from actionspace.policy import NoSecretToExternalSink, redact_events
from actionspace.policy.provenance_stage import ProvenanceStage
from actionspace.trace.events import TraceEvent
from actionspace.trace.replay import replay_events


def _build() -> Runtime:
    rt = Runtime(
        "memory://", recover_on_start=False, flow_policy=NoSecretToExternalSink(), stages=[ProvenanceStage()]
    )

    @rt.tool(effect="external")
    def pay(amount: int, to: str) -> dict[str, bool]:
        return {"ok": True}

    return rt


def _secret_run() -> tuple[str, list[TraceEvent]]:
    rt = _build()
    run = rt.new_run("r")
    rt.user_input(run, "pay 5 to bob")
    assert rt.call({"name": "pay", "arguments": {"amount": 5, "to": "bob"}}, run_id=run).status == "ok"
    secret = {"confidentiality": "secret", "integrity": "trusted", "readers": None}
    marked = [dataclasses.replace(e, data={**e.data, "label": secret}) for e in rt.trace.events(run)]
    return run, marked


def test_a_secret_run_replays_whole_for_a_cleared_reader() -> None:
    run, events = _secret_run()
    result = replay_events(run, events, _build())
    assert result.differences == [] and result.unreplayed == []
    assert {d.stage for d in result.decisions} >= {"validate", "provenance", "flow"}


def test_a_redacted_trace_replays_with_no_false_difference_and_says_it_was_redacted() -> None:
    run, events = _secret_run()
    result = replay_events(run, redact_events(events, None), _build())
    assert result.differences == [], [d.to_dict() for d in result.differences]
    validate = [d for d in result.decisions if d.stage == "validate"]
    assert validate and all("redacted" in d.replayed and not d.replayable for d in validate)
    assert {d.stage for d in result.decisions if d.replayable} >= {"resolve", "authorize"}
