"""Calls held for a person's approval, judged from real runs: pending is no failure, a later grant
that runs the call is a success, a denial is the policy's answer and no execution failure."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from actionspace import Runtime
from actionspace.evaluation._runner_env import Environment, EnvironmentInput
from actionspace.evaluation.metrics import layer_rates, summarize
from actionspace.evaluation.outcomes import TaskOutcome
from actionspace.evaluation.policies import PolicyView, Proposal, ScriptedPolicy
from actionspace.evaluation.report import render_html
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

Decide = Callable[[Runtime, str], None]


def _play(tmp_path: Path, decide: Decide | None) -> TaskOutcome:
    """One task paying bob 5 through a tool that needs approval; ``decide`` runs after the first
    proposal was held (None: nobody decides) and the policy then proposes the call again."""
    runtimes: list[Runtime] = []
    paid: list[tuple[str, int]] = []

    def factory(given: EnvironmentInput) -> Environment:
        rt = Runtime(given.store)

        @rt.tool(effect="write", risk="high", requires_approval=True)
        def pay(to: str, amount: int) -> str:
            """Pay an amount to someone."""
            paid.append((to, amount))
            return "paid"

        runtimes.append(rt)
        return Environment(runtime=rt, state=paid)

    def answer(view: PolicyView) -> Proposal | None:
        if view.step == 0:
            return Proposal(raw=CALL)
        if view.step == 1 and decide is not None:
            (pending,) = runtimes[-1].approvals.list()
            decide(runtimes[-1], pending.id)
            return Proposal(raw=CALL)
        return None

    task = Task(
        id="pay_bob",
        request="Pay bob 5.",
        tools=(PAY,),
        expected=((ExpectedCall(name="pay", arguments={"to": ("bob",), "amount": (5,)}),),),
    )
    (outcome,) = evaluate(
        Suite(name="approvals", tasks=(task,)),
        ScriptedPolicy(answer),
        runtime_factory=factory,
        trace_dir=tmp_path,
    )
    return outcome


def _approve(rt: Runtime, request_id: str) -> None:
    rt.approvals.approve(request_id, by="alice", reason="fine")


def _deny(rt: Runtime, request_id: str) -> None:
    rt.approvals.deny(request_id, by="alice", reason="no")


def test_a_call_run_after_its_approval_passes_exec(tmp_path: Path) -> None:
    outcome = _play(tmp_path, _approve)
    assert [s.error_category for s in outcome.steps][:2] == ["needs_approval", None]
    assert outcome.layer("exec") is True
    rates = layer_rates([outcome])
    assert rates["exec"]["cumulative"]["rate"] == 1.0


def test_a_call_still_waiting_for_approval_is_pending_not_failed(tmp_path: Path) -> None:
    outcome = _play(tmp_path, None)
    assert outcome.steps[0].error_category == "needs_approval"
    assert outcome.layer("exec") is None
    assert outcome.exec_state == "pending"
    metrics = summarize([outcome], suite="approvals", policy="scripted")
    exec_rate = metrics["layers"]["exec"]
    assert exec_rate["conditional"]["n"] == 0  # nothing decided at exec: no rate, no failure
    assert exec_rate["cumulative"]["rate"] is None
    assert metrics["exec_outcomes"] == {"pending": 1, "unknown_commit": 0}


def test_a_denied_call_is_a_refusal_not_an_execution_failure(tmp_path: Path) -> None:
    outcome = _play(tmp_path, _deny)
    assert outcome.steps[-1].error_category == "permission_denied"
    assert outcome.exec_state == "refused"
    metrics = summarize([outcome], suite="approvals", policy="scripted")
    exec_rate = metrics["layers"]["exec"]["conditional"]
    assert (exec_rate["passed"], exec_rate["n"]) == (1, 1)  # the runtime did what it must
    assert metrics["layers"]["task"]["cumulative"]["rate"] == 0.0  # the payment it needed was not made
    assert "exec_outcomes" not in metrics


NOTE = {
    "name": "note",
    "description": "Write a note.",
    "parameters": {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
        "additionalProperties": False,
    },
}


def _pay_and_note(tmp_path: Path, *, note_fails: bool) -> TaskOutcome:
    """One message calling ``pay`` (held for approval, never decided) and ``note`` (ok or failing)."""

    def factory(given: EnvironmentInput) -> Environment:
        rt = Runtime(given.store)

        @rt.tool(effect="write", risk="high", requires_approval=True)
        def pay(to: str, amount: int) -> str:
            """Pay an amount to someone."""
            return "paid"

        @rt.tool(effect="write")
        def note(text: str) -> str:
            """Write a note."""
            if note_fails:
                raise RuntimeError("disk full")
            return "noted"

        return Environment(runtime=rt)

    both: dict[str, Any] = {**CALL, "tool_calls": [*CALL["tool_calls"], _note_call()]}

    def answer(view: PolicyView) -> Proposal | None:
        return Proposal(raw=both) if view.step == 0 else None

    task = Task(
        id="pay_and_note",
        request="Pay bob 5 and note it.",
        tools=(PAY, NOTE),
        expected=(
            (
                ExpectedCall(name="pay", arguments={"to": ("bob",), "amount": (5,)}),
                ExpectedCall(name="note", arguments={"text": ("paid bob",)}),
            ),
        ),
    )
    (outcome,) = evaluate(
        Suite(name="approvals", tasks=(task,)),
        ScriptedPolicy(answer),
        runtime_factory=factory,
        trace_dir=tmp_path,
    )
    return outcome


def _note_call() -> dict[str, Any]:
    return {
        "id": "c2",
        "type": "function",
        "function": {"name": "note", "arguments": json.dumps({"text": "paid bob"})},
    }


def test_a_message_with_a_held_call_and_an_ok_call_is_pending(tmp_path: Path) -> None:
    outcome = _pay_and_note(tmp_path, note_fails=False)
    assert outcome.exec_state == "pending"
    assert outcome.layer("exec") is None


def test_a_message_with_a_held_call_and_a_failed_call_fails_exec(tmp_path: Path) -> None:
    outcome = _pay_and_note(tmp_path, note_fails=True)
    assert outcome.steps[0].error_category not in {"needs_approval", None}
    assert outcome.exec_state == "failed"
    assert outcome.layer("exec") is False
    conditional = layer_rates([outcome])["exec"]["conditional"]
    assert (conditional["passed"], conditional["n"]) == (0, 1)


def test_a_call_refused_by_the_budget_is_refused_at_exec_not_failed(tmp_path: Path) -> None:
    def factory(given: EnvironmentInput) -> Environment:
        rt = Runtime(given.store, budgets=Budget(calls=0))

        @rt.tool(effect="write")
        def note(text: str) -> str:
            """Write a note."""
            return "noted"

        return Environment(runtime=rt)

    message = {"role": "assistant", "content": None, "tool_calls": [_note_call()]}
    task = Task(
        id="note",
        request="Note that bob was paid.",
        tools=(NOTE,),
        expected=((ExpectedCall(name="note", arguments={"text": ("paid bob",)}),),),
    )
    policy = ScriptedPolicy(lambda view: Proposal(raw=message) if view.step == 0 else None)
    (outcome,) = evaluate(
        Suite(name="budget", tasks=(task,)), policy, runtime_factory=factory, trace_dir=tmp_path
    )
    assert outcome.steps[0].error_category == "budget_exceeded"
    assert (outcome.layer("args"), outcome.layer("exec"), outcome.exec_state) == (True, True, "refused")
    metrics = summarize([outcome], suite="budget", policy="scripted")
    assert "exec_outcomes" not in metrics
    assert metrics["layers"]["task"]["cumulative"]["rate"] == 0.0  # the note it needed was not written


def test_an_output_cut_off_mid_call_fails_parse_and_nothing_after() -> None:
    weather = {"name": "get_weather", "description": "Weather.", "parameters": NOTE["parameters"]}
    cut = {
        "role": "assistant",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"text": "Par'},
            }
        ],
    }
    task = Task(
        id="w",
        request="Weather?",
        tools=(weather,),
        expected=((ExpectedCall(name="get_weather", arguments={"text": ("Paris",)}),),),
    )
    (outcome,) = evaluate(Suite(name="cut", tasks=(task,)), ScriptedPolicy(lambda view: Proposal(raw=cut)))
    assert (outcome.steps[0].parse_ok, outcome.steps[0].error_category) == (False, "parse_error")
    rates = layer_rates([outcome])
    assert [rates[layer]["conditional"]["n"] for layer in ("parse", "select", "exec")] == [1, 0, 0]
    assert (rates["task"]["cumulative"]["passed"], rates["task"]["cumulative"]["n"]) == (0, 1)


def test_the_worked_example_of_the_evaluation_page_holds() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "evaluation.md").read_text(encoding="utf-8")
    section = page.split("## What each layer counts", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, re.S)
    exec(compile(block, "evaluation.md", "exec"), {"__name__": "worked_example"})


def test_the_report_lists_the_tasks_left_out_of_the_exec_rate(tmp_path: Path) -> None:
    metrics = summarize([_play(tmp_path, None)], suite="approvals", policy="scripted")
    html = render_html(metrics)
    assert '<tr id="exec-pending"><th>pending at exec (not rated)</th>' in html
    assert 'data-value="1"' in html.split('id="exec-pending"', 1)[1].split("</tr>", 1)[0]
