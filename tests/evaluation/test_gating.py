"""Run-time gating on the policy's confidence: the session holds calls, the trace and report say so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from actionspace import Runtime
from actionspace.evaluation.calibration import ThresholdPolicy
from actionspace.evaluation.gating import compare_gating, gate_counts
from actionspace.evaluation.outcomes import StepOutcome, TaskOutcome
from actionspace.evaluation.runner import evaluate
from actionspace.evaluation.suite import Suite
from actionspace.evaluation.support_desk import flawed_policy, support_desk_environment, support_desk_suite


def _message(*calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for i, (n, a) in enumerate(calls)
        ],
    }


def _runtime(ran: list[str]) -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="read")
    def look(x: str) -> str:
        ran.append("look")
        return x

    @rt.tool(effect="write", risk="low")
    def archive(x: str) -> str:
        ran.append("archive")
        return x

    @rt.tool(effect="write", risk="high")
    def delete(x: str) -> str:
        ran.append("delete")
        return x

    return rt


def test_a_gated_session_holds_a_low_confidence_write_and_the_trace_shows_the_decision() -> None:
    ran: list[str] = []
    with _runtime(ran) as rt:
        s = rt.session("gated")
        s.gate = ThresholdPolicy(read=0.5, write=0.8, external=0.95)
        s.user("archive a")
        turn = s.handle(_message(("archive", {"x": "a"})), confidence=0.6)
        (obs,) = turn.observations
        assert ran == []
        assert obs.error is not None and obs.error.category == "needs_approval"
        assert obs.error.details["gate"] == "observe_more"
        decisions = [e.data for e in rt.trace.events("gated") if e.kind == "gate_decided"]
        assert decisions == [
            {
                "tool": "archive@1",
                "effect": "write",
                "risk": "low",
                "threshold": 0.8,
                "confidence": 0.6,
                "decision": "observe_more",
            }
        ]
        s.handle(_message(("archive", {"x": "a"})), confidence=0.9)
        assert ran == ["archive"]


def test_the_risk_class_raises_the_bar_and_below_the_read_threshold_the_user_is_asked() -> None:
    ran: list[str] = []
    with _runtime(ran) as rt:
        s = rt.session("risk")
        s.gate = ThresholdPolicy(read=0.5, write=0.8, external=0.95)
        turn = s.handle(_message(("delete", {"x": "a"}), ("look", {"x": "b"})), confidence=0.9)
        assert [o.error.details["gate"] if o.error else "ok" for o in turn.observations] == [
            "observe_more",
            "ok",
        ]
        turn = s.handle(_message(("delete", {"x": "c"})), confidence=0.3)
        assert turn.observations[0].error is not None
        assert turn.observations[0].error.details["gate"] == "ask_user"
        assert turn.observations[0].error.recovery == ("confirm_with_user",)
        assert ran == ["look"]


def test_confidence_may_be_given_per_call_and_a_call_without_one_is_not_gated() -> None:
    ran: list[str] = []
    with _runtime(ran) as rt:
        s = rt.session("per-call")
        s.gate = ThresholdPolicy()
        out = _message(("archive", {"x": "a"}), ("archive", {"x": "b"}))
        turn = s.handle(out, confidence={"c0": 0.99})
        assert [o.ok for o in turn.observations] == [True, True]
        decided = [e.data["confidence"] for e in rt.trace.events("per-call") if e.kind == "gate_decided"]
        assert decided == [0.99, None]


def test_without_a_gate_the_confidence_changes_nothing() -> None:
    ran: list[str] = []
    with _runtime(ran) as rt:
        s = rt.session("free")
        s.handle(_message(("delete", {"x": "a"})), confidence=0.01)
        assert ran == ["delete"]
        assert not [e for e in rt.trace.events("free") if e.kind == "gate_decided"]


def test_thresholds_read_off_a_calibration_run_keep_the_wrong_writes_out() -> None:
    def step(confidence: float, ok: bool, tool: str) -> TaskOutcome:
        s = StepOutcome(
            index=0, calls=({"name": tool, "arguments": {}},), confidence=confidence, select_ok=ok
        )
        return TaskOutcome(suite="s", task_id=f"{tool}{confidence}{ok}", steps=(s,))

    outcomes = [step(0.97, True, "w"), step(0.9, True, "w"), step(0.6, False, "w"), step(0.95, True, "w")]
    outcomes += [step(0.55, True, "r"), step(0.4, False, "r")]
    policy = ThresholdPolicy.from_calibration(outcomes, effects={"w": "write", "r": "read"})
    assert policy.read == 0.55
    assert policy.write == 0.9  # the lowest confidence above which every write was right
    assert policy.external == 1.0  # no evidence: only certain calls
    assert policy.decide(0.6, "write") == "observe_more"


def test_the_report_compares_gated_and_ungated_runs_of_the_same_scripted_policy(tmp_path: Path) -> None:
    full = support_desk_suite()
    ids = ("desk_archive_0", "desk_solve_2", "desk_which_payment_0", "desk_solve_0")
    suite = Suite(name=full.name, tasks=tuple(full.task(i) for i in ids))
    policy = flawed_policy(suite)
    ungated = evaluate(suite, policy, runtime_factory=support_desk_environment, trace_dir=tmp_path / "u")
    gate = ThresholdPolicy(read=0.7, write=0.8, external=0.95)
    gated = evaluate(
        suite, policy, runtime_factory=support_desk_environment, trace_dir=tmp_path / "g", gate=gate
    )
    report = compare_gating(ungated, gated, policy=gate.to_dict())
    assert report["ungated"]["incidents"] == 2  # the wrong delete and the guessed refund
    assert report["gated"]["incidents"] == 0
    assert report["wrong_writes_avoided"] == 2
    # below the read bar the user is asked: the wrong delete (0.6) and the guessed refund (0.5);
    # the right reply at 0.9 is short of the external bar: refused, to look further
    assert report["questions_asked"] == 2 and report["looked_further"] == 1
    assert report["right_calls_held"] == 1
    assert gate_counts(ungated)["execute"] == 0  # ungated steps carry no gate decision
    held = next(o for o in gated if o.task_id == "desk_archive_0").steps[0]
    assert held.gate == ("ask_user",)
    with Runtime(gated[0].details["trace"]["store"]) as rt:
        events = [
            e.data["decision"] for e in rt.trace.events(gated[0].run_id or "") if e.kind == "gate_decided"
        ]
    assert events == ["ask_user"]


def test_the_offline_threshold_replay_decides_as_the_run_time_gate_did(tmp_path: Path) -> None:
    from actionspace.evaluation.calibration import evaluate_thresholds

    full = support_desk_suite()
    ids = ("desk_archive_0", "desk_partial_refund_1", "desk_solve_2", "desk_which_payment_0", "desk_solve_1")
    suite = Suite(name=full.name, tasks=tuple(full.task(i) for i in ids))
    tools = suite.tasks[0].tools
    effects = {str(t["name"]): str(t["effect"]) for t in tools}
    risks = {str(t["name"]): str(t["risk"]) for t in tools}
    gate = ThresholdPolicy(read=0.7, write=0.8, external=0.95)
    policy = flawed_policy(suite)
    ungated = evaluate(suite, policy, runtime_factory=support_desk_environment, trace_dir=tmp_path / "u")
    gated = evaluate(
        suite, policy, runtime_factory=support_desk_environment, trace_dir=tmp_path / "g", gate=gate
    )
    replay = evaluate_thresholds(ungated, gate, effects=effects, risks=risks)
    live = gate_counts(gated)
    called = [s for o in gated for s in o.steps if s.calls]
    assert all(len(s.calls) == 1 for s in called)  # one call per step: step and call decisions coincide
    assert (live["ask_user"], live["observe_more"]) == (replay.ask_user, replay.observe_more)
    assert live["ask_user"] + live["observe_more"] > 0
    # the replay also counts the answers without a call (executed: nothing to hold)
    answers = sum(1 for o in ungated for s in o.steps if not s.calls and s.confidence is not None)
    assert live["execute"] == replay.executed - answers


def test_the_async_session_gates_the_same_way() -> None:
    import asyncio

    ran: list[str] = []
    with _runtime(ran) as rt:
        s = rt.session("async")
        s.gate = ThresholdPolicy()
        turn = asyncio.run(s.ahandle(_message(("delete", {"x": "a"})), confidence=0.2))
        assert turn.observations[0].error is not None
        assert turn.observations[0].error.details["gate"] == "ask_user"
        assert ran == []
