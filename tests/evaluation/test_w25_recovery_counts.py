"""A step counts as a recovery only when it got right what the step before got wrong: calls that run
without error but pick a tool no expected call asked for are no recovery."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from actionspace.evaluation.metrics import summarize
from actionspace.evaluation.policies import PolicyView, Proposal, ScriptedPolicy
from actionspace.evaluation.runner import evaluate
from actionspace.evaluation.suite import Suite
from actionspace.evaluation.support_desk import support_desk_environment, support_desk_suite


def _calls(*calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for i, (n, a) in enumerate(calls)
        ],
    }


def _steps(*proposals: dict[str, Any]) -> ScriptedPolicy:
    """The same proposals, step by step, in the first user turn; then the answer."""

    def answer(view: PolicyView) -> Proposal | None:
        if (view.user_turn or 0) > 0 or view.step >= len(proposals):
            return None
        return Proposal(raw=proposals[view.step])

    return ScriptedPolicy(answer)


def _archive_task() -> tuple[Suite, str]:
    suite = support_desk_suite()
    task = suite.task("desk_archive_0")
    return Suite(name=suite.name, tasks=(task,)), str(task.expected[0][0].arguments["ticket_id"][0])


def test_a_wrong_tool_that_runs_after_an_error_is_no_recovery(tmp_path: Path) -> None:
    suite, ticket = _archive_task()
    policy = _steps(
        _calls(("archive_ticket", {"ticket_id": 12345})),  # invalid_arguments: an id is text
        _calls(("delete_ticket", {"ticket_id": ticket})),  # runs, but nothing asked for a delete
    )
    (outcome,) = evaluate(suite, policy, runtime_factory=support_desk_environment, trace_dir=tmp_path)
    first, second = outcome.steps[:2]
    assert first.error_category == "invalid_arguments"
    assert second.select_ok is False and second.error_category is None
    assert second.recovered is False
    assert summarize([outcome], suite="desk", policy="p")["recovery"]["recovered"] == 0


def test_the_right_call_after_an_error_is_a_recovery(tmp_path: Path) -> None:
    suite, ticket = _archive_task()
    policy = _steps(
        _calls(("archive_ticket", {"ticket_id": 12345})),
        _calls(("archive_ticket", {"ticket_id": ticket})),
    )
    (outcome,) = evaluate(suite, policy, runtime_factory=support_desk_environment, trace_dir=tmp_path)
    first, second = outcome.steps[:2]
    assert first.error_category == "invalid_arguments"
    assert (second.select_ok, second.args_ok, second.exec_ok, second.recovered) == (True, True, True, True)
    # the right tool was chosen at every step: only the first step's arguments were wrong
    assert outcome.layer("select") is True and outcome.layer("args") is False
    assert summarize([outcome], suite="desk", policy="p")["recovery"] == {
        "errors": 1,
        "recovered": 1,
        "rate": 1.0,
    }
