"""BFCL multi-turn tasks played turn by turn against their backends, judged by layer and by BFCL state."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from actionspace.errors import ActionspaceError
from actionspace.evaluation._runner_multiturn import evaluate_multiturn
from actionspace.evaluation.outcomes import LAYERS, TaskOutcome
from actionspace.evaluation.policies import PolicyView, Proposal, ScriptedPolicy
from actionspace.evaluation.runner import evaluate, ground_truth_policy, runnable
from actionspace.evaluation.suite import Suite, bfcl_suite

FOUR = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")

RESOLUTION_EMPTY = {
    f"multi_turn_{c}_{n}" for c in ("base", "miss_func", "miss_param", "long_context") for n in (23, 196)
}
"""Ground truth ``resolve_ticket(..., resolution='')``: a required argument whose only option is
``''`` — the ground-truth policy must send the empty string, not leave the argument out."""
TOOL_BEFORE_ITS_TURN = {"multi_turn_miss_func_49"}
"""BFCL's ground truth calls ``tail`` in turn 1 although the entry holds it back until turn 3."""


@pytest.fixture(scope="module")
def suite() -> Suite:
    return bfcl_suite(FOUR)


def _passed_all(outcome: TaskOutcome) -> bool:
    return all(outcome.layer(layer) is True for layer in LAYERS)


def _edited(suite: Suite, edit: Callable[[PolicyView, dict[str, Any]], dict[str, Any]]) -> ScriptedPolicy:
    """The ground truth with ``edit`` applied to each turn's assistant message."""
    truth = ground_truth_policy(suite)

    def answer(view: PolicyView) -> Proposal:
        proposal = truth.propose(view)
        if proposal.empty:
            return proposal
        assert isinstance(proposal.raw, Mapping)
        return Proposal(raw=edit(view, dict(proposal.raw)))

    return ScriptedPolicy(answer)


def test_the_ground_truth_passes_every_layer_of_every_multi_turn_task_but_one_bfcl_data_fault(
    suite: Suite,
) -> None:
    assert all(runnable(t) for t in suite.tasks)

    outcomes = evaluate(suite, ground_truth_policy(suite))

    assert len(outcomes) == 800
    failed = {o.task_id for o in outcomes if not _passed_all(o)}
    assert failed == TOOL_BEFORE_ITS_TURN
    clean = [o for o in outcomes if o.task_id not in failed]
    assert sum(o.task_ok is True for o in clean) / len(clean) == 1.0
    assert all(len(o.steps) == suite.task(o.task_id).turns for o in outcomes)
    by_id = {o.task_id: o for o in outcomes}
    for task_id in RESOLUTION_EMPTY:
        calls = [c for s in by_id[task_id].steps for c in s.calls if c["name"] == "resolve_ticket"]
        assert calls and all(c["arguments"]["resolution"] == "" for c in calls)
        assert by_id[task_id].task_ok is True
    skipped = by_id["multi_turn_miss_func_49"]
    assert skipped.steps[1].error_category == "unknown_tool"
    assert skipped.task_ok is True  # ``tail`` only reads, so the state still matches


def test_a_dropped_call_fails_that_turns_select_layer_and_its_state_check(suite: Suite) -> None:
    def drop_mkdir(view: PolicyView, message: dict[str, Any]) -> dict[str, Any]:
        if view.turn == 0:
            message["tool_calls"] = [c for c in message["tool_calls"] if c["function"]["name"] != "mkdir"]
        return message

    outcome = evaluate_multiturn("bfcl", suite.task("multi_turn_base_0"), _edited(suite, drop_mkdir))

    assert outcome.steps[0].select_ok is False
    assert outcome.steps[0].args_ok is None
    assert [s.select_ok for s in outcome.steps[1:]] == [True, True, True]
    assert outcome.layer("select") is False
    assert outcome.task_ok is False
    assert outcome.details["failed_turn"] == 0
    assert outcome.details["state_checks"][0] is False
    assert ("mkdir", "<none>") in outcome.chosen


def test_a_wrong_argument_value_fails_args_and_the_state_check(suite: Suite) -> None:
    def rename_dir(view: PolicyView, message: dict[str, Any]) -> dict[str, Any]:
        for call in message["tool_calls"]:
            if view.turn == 0 and call["function"]["name"] == "mkdir":
                call["function"]["arguments"] = json.dumps({"dir_name": "scratch"})
        return message

    outcome = evaluate_multiturn("bfcl", suite.task("multi_turn_base_0"), _edited(suite, rename_dir))

    first = outcome.steps[0]
    assert first.select_ok is True
    assert first.args_ok is False
    assert first.exec_ok is None
    assert outcome.layer("args") is False
    assert outcome.task_ok is False
    assert outcome.details["failed_turn"] == 0


def test_the_chat_carries_each_call_and_its_observation_and_held_back_tools_appear_at_their_turn(
    suite: Suite,
) -> None:
    task = suite.task("multi_turn_miss_func_0")
    seen: list[PolicyView] = []
    truth = ground_truth_policy(suite)

    def record(view: PolicyView) -> Proposal:
        seen.append(view)
        return truth.propose(view)

    outcome = evaluate_multiturn("bfcl", task, ScriptedPolicy(record))

    assert _passed_all(outcome)
    names = [{t["function"]["name"] for t in v.tools} for v in seen]
    assert [("sort" in n) for n in names] == [False, False, False, True, True]
    first_turn_calls = len(task.expected[0])
    second = seen[1].messages
    assert second[0] == task.messages(0)[0]
    assert second[1]["role"] == "assistant"
    assert len(second[1]["tool_calls"]) == first_turn_calls
    tool_messages = second[2 : 2 + first_turn_calls]
    assert [m["role"] for m in tool_messages] == ["tool"] * first_turn_calls
    assert [m["tool_call_id"] for m in tool_messages] == [c["id"] for c in second[1]["tool_calls"]]
    assert all(json.loads(m["content"])["status"] == "ok" for m in tool_messages)
    assert second[-1] == task.messages(1)[0]


def test_variants_other_than_baseline_are_refused_for_multi_turn_tasks(suite: Suite) -> None:
    task = suite.task("multi_turn_base_0")

    with pytest.raises(ActionspaceError, match="no variant"):
        evaluate_multiturn("bfcl", task, ground_truth_policy(suite), variant="names_hidden")
    small = Suite(name="bfcl", tasks=(task,))
    outcomes = evaluate(small, ground_truth_policy(small), variants=("baseline", "names_hidden"))
    assert [(o.task_id, o.variant) for o in outcomes] == [("multi_turn_base_0", "baseline")]
