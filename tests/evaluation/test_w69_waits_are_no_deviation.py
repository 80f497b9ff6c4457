"""A call waiting for approval, or refused by policy, is no deviation from the reference path and no
error to recover from: the runner's recovery bookkeeping reads exec states the way the metrics do."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.evaluation._runner_env import Environment, EnvironmentInput
from actionspace.evaluation.metrics import summarize
from actionspace.evaluation.outcomes import StepOutcome, TaskOutcome
from actionspace.evaluation.policies import PolicyView, Proposal, ScriptedPolicy
from actionspace.evaluation.runner import evaluate
from actionspace.evaluation.suite import ExpectedCall, Suite, Task
from actionspace.policy.budget import Budget

PAY = {
    "name": "pay",
    "description": "Pay an amount to someone.",
    "parameters": {
        "type": "object",
        "properties": {"to": {"type": "string"}, "amount": {"type": "integer"}},
        "required": ["to", "amount"],
        "additionalProperties": False,
    },
}
CALL: dict[str, Any] = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {
            "id": "c1",
            "type": "function",
            "function": {"name": "pay", "arguments": json.dumps({"to": "bob", "amount": 5})},
        }
    ],
}
TASK = Task(
    id="pay_bob",
    request="Pay bob 5.",
    tools=(PAY,),
    expected=((ExpectedCall(name="pay", arguments={"to": ("bob",), "amount": (5,)}),),),
)

Decide = Callable[[Runtime, str], None]


def _play(tmp_path: Path, decide: Decide | None, *, fails: bool = False) -> TaskOutcome:
    """Pay bob 5 through a tool held for approval; ``decide`` runs after the first proposal was held
    (None: nobody decides), then the policy proposes the call again."""
    runtimes: list[Runtime] = []

    def factory(given_input: EnvironmentInput) -> Environment:
        rt = Runtime(given_input.store)

        @rt.tool(effect="write", risk="high", requires_approval=True)
        def pay(to: str, amount: int) -> str:
            """Pay an amount to someone."""
            if fails:
                raise RuntimeError("the bank is down")
            return "paid"

        runtimes.append(rt)
        return Environment(runtime=rt)

    def answer(view: PolicyView) -> Proposal | None:
        if view.step == 0:
            return Proposal(raw=CALL, tokens=10)
        if view.step == 1 and decide is not None:
            (pending,) = runtimes[-1].approvals.list()
            decide(runtimes[-1], pending.id)
            return Proposal(raw=CALL, tokens=10)
        return None

    (outcome,) = evaluate(
        Suite(name="approvals", tasks=(TASK,)),
        ScriptedPolicy(answer),
        runtime_factory=factory,
        trace_dir=tmp_path,
    )
    return outcome


def _approve(rt: Runtime, request_id: str) -> None:
    rt.approvals.approve(request_id, by="alice", reason="fine")


def _deny(rt: Runtime, request_id: str) -> None:
    rt.approvals.deny(request_id, by="alice", reason="no")


def test_a_call_held_for_approval_then_run_is_no_deviation_and_no_recovery(tmp_path: Path) -> None:
    outcome = _play(tmp_path, _approve)
    assert [s.error_category for s in outcome.steps][:2] == ["needs_approval", None]
    assert outcome.details["first_deviation"] is None
    assert outcome.details["recovery"] is None
    assert outcome.steps[1].recovered is False  # nothing went wrong to recover from
    metrics = summarize([outcome], suite="approvals", policy="scripted")
    assert metrics["deviation"]["deviated"] == 0
    assert metrics["recovery"] == {"errors": 0, "recovered": 0, "rate": None}


def test_a_call_still_waiting_for_approval_is_no_deviation(tmp_path: Path) -> None:
    outcome = _play(tmp_path, None)
    assert outcome.exec_state == "pending"
    assert outcome.details["first_deviation"] is None
    assert summarize([outcome], suite="approvals", policy="scripted")["deviation"]["deviated"] == 0


def test_a_denied_approval_is_a_refusal_and_no_deviation(tmp_path: Path) -> None:
    outcome = _play(tmp_path, _deny)
    assert outcome.exec_state == "refused"
    assert outcome.details["first_deviation"] is None


def test_an_approved_call_that_then_fails_deviates_at_that_step(tmp_path: Path) -> None:
    outcome = _play(tmp_path, _approve, fails=True)
    assert outcome.steps[0].error_category == "needs_approval"
    assert outcome.steps[1].exec_state == "failed"
    assert outcome.details["first_deviation"] == 1
    assert outcome.details["recovery"]["tokens"] == 10  # spent from the failing step on


def test_a_call_refused_by_the_budget_is_no_deviation(tmp_path: Path) -> None:
    def factory(given_input: EnvironmentInput) -> Environment:
        rt = Runtime(given_input.store, budgets=Budget(calls=0))

        @rt.tool(effect="write")
        def pay(to: str, amount: int) -> str:
            """Pay an amount to someone."""
            return "paid"

        return Environment(runtime=rt)

    policy = ScriptedPolicy(lambda view: Proposal(raw=CALL) if view.step == 0 else None)
    (outcome,) = evaluate(
        Suite(name="budget", tasks=(TASK,)), policy, runtime_factory=factory, trace_dir=tmp_path
    )
    assert (outcome.steps[0].error_category, outcome.exec_state) == ("budget_exceeded", "refused")
    assert outcome.details["first_deviation"] is None


UNDECIDED = ("needs_approval", "unknown_commit")
ASKS_THE_MODEL = ("transient", "conflict", "permission_denied", "policy_violation", "budget_exceeded")


@given(
    st.lists(
        st.tuples(st.sampled_from((*UNDECIDED, *ASKS_THE_MODEL, None)), st.booleans()),
        min_size=1,
        max_size=6,
    )
)
def test_the_recovery_rate_counts_no_step_after_a_wait_or_an_unknown_commit(
    steps: list[tuple[str | None, bool]],
) -> None:
    judged = tuple(
        StepOutcome(
            index=i,
            select_ok=True,
            args_ok=True,
            exec_ok=category is None,
            error_category=category,
            recovered=recovered,
        )
        for i, (category, recovered) in enumerate(steps)
    )
    outcome = TaskOutcome(suite="s", task_id="t", steps=judged)
    recovery = summarize([outcome], suite="s", policy="p")["recovery"]
    after_failure = [after for before, after in itertools.pairwise(steps) if before[0] in ASKS_THE_MODEL]
    assert recovery["errors"] == len(after_failure)
    assert recovery["recovered"] == sum(1 for _, recovered in after_failure if recovered)
