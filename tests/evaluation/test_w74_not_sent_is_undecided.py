"""A call the runtime closed before sending it (``cancelled``, ``details["sent"]`` False) ran nothing:
the metrics read it as undecided at ``exec`` (``not_sent``), as monitoring counts it in no failure
figure; a cancellation of a call that was sent stays an execution failure."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.errors import ActionError
from actionspace.evaluation._runner_env import Environment, EnvironmentInput
from actionspace.evaluation.metrics import summarize
from actionspace.evaluation.outcomes import StepOutcome, TaskOutcome, deciding_error, never_sent
from actionspace.evaluation.policies import Proposal, ScriptedPolicy
from actionspace.evaluation.runner import evaluate
from actionspace.evaluation.suite import ExpectedCall, Suite, Task
from actionspace.types import Observation
from actionspace.validation.validator import ValidationContext

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
NOT_SENT = ActionError.of("cancelled", "closed before it began", details={"sent": False})


def _closed_before_sending(tmp_path: Path) -> tuple[TaskOutcome, list[str]]:
    """Pay bob 5 on a runtime that closes while the call is validated: the tool never runs."""
    paid: list[str] = []

    def factory(given_input: EnvironmentInput) -> Environment:
        rt = Runtime(given_input.store)

        def close_now(ctx: ValidationContext, args: Mapping[str, Any]) -> None:
            closing = threading.Thread(target=rt.close)
            closing.start()
            closing.join(10.0)
            assert not closing.is_alive()

        @rt.tool(effect="write", validators=(close_now,))
        def pay(to: str, amount: int) -> str:
            """Pay an amount to someone."""
            paid.append(to)
            return "paid"

        return Environment(runtime=rt)

    policy = ScriptedPolicy(lambda view: Proposal(raw=CALL) if view.step == 0 else None)
    (outcome,) = evaluate(
        Suite(name="closing", tasks=(TASK,)), policy, runtime_factory=factory, trace_dir=tmp_path
    )
    return outcome, paid


def test_a_call_closed_before_it_was_sent_is_undecided_at_exec_and_counted_as_not_sent(
    tmp_path: Path,
) -> None:
    outcome, paid = _closed_before_sending(tmp_path)

    assert paid == []
    step = outcome.steps[0]
    assert (step.args_ok, step.exec_ok, step.error_category) == (True, False, "cancelled")
    assert step.sent is False
    assert step.exec_state == "not_sent"
    assert not step.failed and not step.erred
    assert outcome.layer("exec") is None
    metrics = summarize([outcome], suite="closing", policy="scripted")
    assert metrics["layers"]["exec"]["cumulative"]["n"] == 0
    assert metrics["exec_outcomes"] == {"pending": 0, "unknown_commit": 0, "not_sent": 1}
    assert metrics["recovery"]["errors"] == 0
    assert outcome.details["first_deviation"] is None


def _step(category: str | None, *, sent: bool = True) -> StepOutcome:
    return StepOutcome(
        index=0, select_ok=True, args_ok=True, exec_ok=category is None, error_category=category, sent=sent
    )


def _task(task_id: str, step: StepOutcome) -> TaskOutcome:
    return TaskOutcome(suite="s", task_id=task_id, steps=(step,), task_ok=step.exec_ok)


def test_a_cancelled_call_that_was_sent_stays_an_execution_failure_and_old_steps_read_as_sent() -> None:
    sent = _task("sent", _step("cancelled"))
    not_sent = _task("not_sent", _step("cancelled", sent=False))
    assert sent.exec_state == "failed"
    metrics = summarize([sent, not_sent], suite="s", policy="p")
    assert (
        metrics["layers"]["exec"]["cumulative"]["passed"],
        metrics["layers"]["exec"]["cumulative"]["n"],
    ) == (
        0,
        1,
    )
    assert metrics["exec_outcomes"]["not_sent"] == 1
    assert "exec_outcomes" not in summarize([sent], suite="s", policy="p")
    old = StepOutcome.from_dict({"index": 0, "exec_ok": False, "error_category": "cancelled"})
    assert old.sent is True and old.exec_state == "failed"


def test_a_step_keeps_not_sent_through_its_dict_and_writes_no_key_when_sent() -> None:
    step = _step("cancelled", sent=False)
    assert step.to_dict()["sent"] is False
    assert StepOutcome.from_dict(step.to_dict()) == step
    assert "sent" not in _step("cancelled").to_dict()


def test_never_sent_reads_the_closed_runtime_and_the_removed_plan_node_only() -> None:
    assert never_sent(NOT_SENT)
    assert never_sent(ActionError.of("cancelled", "removed", details={"phase": "not_dispatched"}))
    assert not never_sent(ActionError.of("cancelled", "cut while it ran"))
    assert not never_sent(ActionError.of("transient", "store refused", details={"sent": False}))


_ERRORS = st.one_of(
    st.none(),
    st.sampled_from(
        [
            NOT_SENT,
            ActionError.of("needs_approval", "held"),
            ActionError.of("unknown_commit", "lost"),
            ActionError.of("permission_denied", "no"),
            ActionError.of("transient", "again"),
            ActionError.of("cancelled", "cut while it ran"),
            ActionError.of("permanent", "gone"),
        ]
    ),
)


@given(st.lists(_ERRORS, max_size=6))
def test_a_call_never_sent_decides_a_step_only_when_no_call_of_it_failed(
    errors: list[ActionError | None],
) -> None:
    observations = [
        Observation.failure(e, call_id=f"c{i}", tool="t")
        if e is not None
        else Observation(call_id=f"c{i}", tool="t")
        for i, e in enumerate(errors)
    ]
    decided = deciding_error(observations)
    failures = [e for e in errors if e is not None and e.category in ("transient", "permanent", "cancelled")]
    failures = [e for e in failures if not never_sent(e)]
    present = [e for e in errors if e is not None]
    if failures:
        assert decided is failures[0]
    else:
        assert decided is (present[0] if present else None)
