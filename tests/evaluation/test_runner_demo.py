"""The demo's calendar tasks played step by step against a real calendar, judged by layer."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import date
from typing import Any

import pytest

from actionspace.demo.policy import script
from actionspace.errors import ActionspaceError
from actionspace.evaluation._runner_demo import WRITE_IN_NEGATIVE_TASK, evaluate_demo
from actionspace.evaluation.outcomes import LAYERS
from actionspace.evaluation.policies import PolicyView, Proposal, ScriptedPolicy
from actionspace.evaluation.runner import evaluate, ground_truth_policy, runnable
from actionspace.evaluation.suite import Suite, Task, demo_suite
from actionspace.types import Observation


@pytest.fixture(scope="module")
def suite() -> Suite:
    return demo_suite()


def _message(name: str, arguments: Mapping[str, Any], call_id: str = "call_0") -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
        ],
    }


def _booking(suite: Suite) -> dict[str, Any]:
    """The right ``create_event`` call of the calendar task, as the ground truth sends it."""
    proposal = ground_truth_policy(suite).propose(PolicyView(task_id="demo_calendar_review"))
    assert isinstance(proposal.raw, Mapping)
    return dict(proposal.raw)


def _arguments(message: Mapping[str, Any]) -> dict[str, Any]:
    arguments = json.loads(message["tool_calls"][0]["function"]["arguments"])
    assert isinstance(arguments, dict)
    return arguments


def test_every_demo_task_is_runnable_and_the_ground_truth_books_the_review_and_passes_the_negatives(
    suite: Suite,
) -> None:
    assert all(runnable(t) for t in suite.tasks)

    outcomes = {o.task_id: o for o in evaluate(suite, ground_truth_policy(suite))}

    assert set(outcomes) == {"demo_calendar_review", "demo_calendar_no_time", "demo_calendar_no_tool"}
    for outcome in outcomes.values():
        assert [outcome.layer(layer) for layer in LAYERS] == [True] * len(LAYERS)
        assert outcome.incidents == ()
    review = outcomes["demo_calendar_review"]
    assert [s.calls[0]["name"] for s in review.steps] == ["create_event"]
    assert review.chosen == (("create_event", "create_event"),)
    assert outcomes["demo_calendar_no_time"].steps[0].calls == ()


def test_a_wrong_argument_rejected_as_invalid_then_the_right_call_is_a_recovery_that_books_the_review(
    suite: Suite,
) -> None:
    right = _booking(suite)
    arguments = _arguments(right)
    swapped = {**arguments, "start": arguments["end"], "end": arguments["start"]}
    policy = ScriptedPolicy({"demo_calendar_review": [_message("create_event", swapped), right]})

    outcome = evaluate_demo(suite.name, suite.task("demo_calendar_review"), policy)

    first, second = outcome.steps
    assert (first.error_category, first.args_ok, first.exec_ok, first.recovered) == (
        "invalid_arguments",
        False,
        None,
        False,
    )
    assert (second.error_category, second.args_ok, second.exec_ok, second.recovered) == (
        None,
        True,
        True,
        True,
    )
    assert outcome.task_ok is True
    assert outcome.layer("args") is False  # the first attempt still counts against the args layer


def test_the_policy_sees_each_observation_as_a_tool_message_after_its_assistant_message(suite: Suite) -> None:
    seen: list[tuple[Mapping[str, Any], ...]] = []

    def answer(view: PolicyView) -> Proposal:
        seen.append(view.messages)
        return Proposal(raw=_message("get_user_profile", {})) if view.turn == 0 else Proposal()

    evaluate_demo(suite.name, suite.task("demo_calendar_review"), ScriptedPolicy(answer))

    assert [m["role"] for m in seen[1]] == ["user", "assistant", "tool"]
    observation = json.loads(seen[1][2]["content"])
    assert (observation["tool"], observation["status"], observation["data"]["user_id"]) == (
        "get_user_profile",
        "ok",
        "u-lin",
    )


def test_lookups_without_the_booking_pass_their_steps_but_fail_the_task_and_the_closing_answer(
    suite: Suite,
) -> None:
    policy = ScriptedPolicy(
        {"demo_calendar_review": [_message("list_team_members", {"team": "t-design-sh"})]}
    )

    outcome = evaluate_demo(suite.name, suite.task("demo_calendar_review"), policy)

    lookup, answer = outcome.steps
    assert (lookup.select_ok, lookup.args_ok, lookup.exec_ok) == (True, True, True)
    assert (answer.calls, answer.select_ok, answer.expected_tools) == ((), False, ("create_event",))
    assert outcome.task_ok is False


def test_booking_in_a_negative_task_fails_select_and_the_task_and_is_an_incident(suite: Suite) -> None:
    policy = ScriptedPolicy({"demo_calendar_no_time": [_booking(suite)]})

    outcome = evaluate_demo(suite.name, suite.task("demo_calendar_no_time"), policy)

    (step,) = outcome.steps
    assert (step.select_ok, step.exec_ok) == (False, None)
    assert outcome.task_ok is False
    assert outcome.incidents == (WRITE_IN_NEGATIVE_TASK,)
    assert outcome.chosen == (("<none>", "create_event"),)
    assert outcome.details["writes"] == ["create_event"]


def test_a_lookup_in_a_negative_task_fails_select_but_is_no_incident(suite: Suite) -> None:
    policy = ScriptedPolicy({"demo_calendar_no_tool": [_message("get_user_profile", {})]})

    outcome = evaluate_demo(suite.name, suite.task("demo_calendar_no_tool"), policy)

    assert [s.select_ok for s in outcome.steps] == [False]
    assert (outcome.task_ok, outcome.incidents) == (True, ())


def test_a_policy_that_never_stops_is_cut_at_max_steps(suite: Suite) -> None:
    policy = ScriptedPolicy(lambda view: _message("get_user_profile", {}, f"call_{view.turn}"))

    outcome = evaluate_demo(suite.name, suite.task("demo_calendar_review"), policy, max_steps=3)

    assert len(outcome.steps) == 3
    assert outcome.details["max_steps_reached"] is True
    assert outcome.task_ok is False


def test_a_task_that_is_not_a_demo_task_is_refused(suite: Suite) -> None:
    other = Task(id="plain", request="hi", no_call=True)

    with pytest.raises(ActionspaceError, match="not a demo calendar task"):
        evaluate_demo(suite.name, other, ScriptedPolicy({}))


def _demo_model(day: date) -> ScriptedPolicy:
    """The demo's scripted model as a policy: its history is rebuilt from the chat's tool messages."""
    turn = script(day)

    def answer(view: PolicyView) -> Proposal | None:
        history = [
            Observation.from_dict(json.loads(m["content"])) for m in view.messages if m["role"] == "tool"
        ]
        move = turn(history)
        return None if move is None else Proposal(raw=move[2])

    return ScriptedPolicy(answer)


def test_the_demos_own_scripted_model_books_the_review_after_recovering_from_its_mistakes(
    suite: Suite,
) -> None:
    task = suite.task("demo_calendar_review")
    day = date.fromisoformat(task.initial_state["calendar"]["day"])

    outcome = evaluate_demo(suite.name, task, _demo_model(day), max_steps=12)

    assert outcome.task_ok is True
    assert "max_steps_reached" not in outcome.details
    categories = [s.error_category for s in outcome.steps]
    assert categories[0] == "invalid_arguments"
    assert {"conflict", "permission_denied"} <= set(categories)
    assert sum(s.recovered for s in outcome.steps) >= 1
    assert outcome.steps[1].recovered is True  # the profile lookup after the rejected first booking
    booked = [s for s in outcome.steps if s.calls and s.calls[0]["name"] == "create_event"][-1]
    assert (booked.args_ok, booked.exec_ok, booked.recovered) == (True, True, True)
    assert [c["name"] for s in outcome.steps for c in s.calls][-2:] == ["get_event", "notify_attendees"]
    assert outcome.layer("args") is False
