"""A BFCL multi-turn play stops at a turn whose call the runtime closed before sending it, as the
other runners do: nothing more can be sent, so no later turn is asked for, the step is ``not_sent``
(undecided at ``exec``) and the task, never played to its end, has no verdict."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.catalog.spec import ToolSpec
from actionspace.evaluation import _runner_multiturn
from actionspace.evaluation._runner_multiturn import evaluate_multiturn
from actionspace.evaluation.metrics import summarize
from actionspace.evaluation.policies import PolicyView, Proposal, ScriptedPolicy
from actionspace.evaluation.runner import ground_truth_policy
from actionspace.evaluation.suite import Suite, bfcl_suite
from actionspace.validation.validator import ValidationContext

WAIT_S = 10.0
TASK = "multi_turn_base_0"
"""Turn 0: cd, mkdir, mv; turn 1: cd then grep; turns 2 and 3 follow."""


@pytest.fixture(scope="module")
def suite() -> Suite:
    return bfcl_suite(("multi_turn_base",))


def _closing_at(tool: str, monkeypatch: pytest.MonkeyPatch) -> list[Runtime]:
    """Have the task's runtime closed (from another thread, as a shutdown does) while ``tool`` is
    validated, so that call is never sent; returns the runtimes the runner made."""
    made: list[Runtime] = []

    class Kept(Runtime):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    def close_now(ctx: ValidationContext, args: Mapping[str, Any]) -> None:
        closing = threading.Thread(target=made[-1].close)
        closing.start()
        closing.join(WAIT_S)
        assert not closing.is_alive()

    built = _runner_multiturn._specs

    def specs(classes: Sequence[str], instances: Mapping[str, Any]) -> list[ToolSpec]:
        return [
            dataclasses.replace(s, validators=(*s.validators, close_now)) if s.name == tool else s
            for s in built(classes, instances)
        ]

    monkeypatch.setattr(_runner_multiturn, "Runtime", Kept)
    monkeypatch.setattr(_runner_multiturn, "_specs", specs)
    return made


def test_a_call_never_sent_ends_the_play_at_its_turn_undecided(
    suite: Suite, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = _closing_at("grep", monkeypatch)
    truth = ground_truth_policy(suite)
    asked: list[int] = []

    def answer(view: PolicyView) -> Proposal:
        asked.append(view.turn)
        return truth.propose(view)

    outcome = evaluate_multiturn("bfcl", suite.task(TASK), ScriptedPolicy(answer))

    assert len(made) == 1
    assert asked == [0, 1]
    assert [s.exec_state for s in outcome.steps] == ["ok", "not_sent"]
    last = outcome.steps[-1]
    assert (last.error_category, last.sent, last.failed, last.erred) == ("cancelled", False, False, False)
    assert outcome.layer("exec") is None
    assert outcome.task_ok is None
    assert outcome.details["not_sent_turn"] == 1
    assert outcome.details["state_checks"] == [True]
    assert "failed_turn" not in outcome.details
    metrics = summarize([outcome], suite="bfcl", policy="truth")
    assert metrics["exec_outcomes"]["not_sent"] == 1
    assert metrics["layers"]["task"]["cumulative"]["n"] == 0


def test_a_play_that_sends_every_call_still_checks_every_turn(suite: Suite) -> None:
    outcome = evaluate_multiturn("bfcl", suite.task(TASK), ground_truth_policy(suite))

    assert [s.exec_state for s in outcome.steps] == ["ok"] * 4
    assert outcome.task_ok is True
    assert outcome.details["state_checks"] == [True] * 4
    assert "not_sent_turn" not in outcome.details
