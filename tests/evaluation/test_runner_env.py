"""evaluate(..., runtime_factory=...): the user's own tools, a fresh environment per task, real effects."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.evaluation._runner_env import Environment, EnvironmentInput
from actionspace.evaluation._suite_demo import demo_environment
from actionspace.evaluation.metrics import summarize
from actionspace.evaluation.outcomes import TaskOutcome
from actionspace.evaluation.policies import PolicyView, Proposal, ScriptedPolicy
from actionspace.evaluation.runner import evaluate, ground_truth_policy
from actionspace.evaluation.suite import ExpectedCall, Suite, Task, demo_suite
from actionspace.evaluation.support_desk import (
    flawed_policy,
    support_desk_environment,
    support_desk_suite,
)


def _calls(*calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for i, (n, a) in enumerate(calls)
        ],
    }


def _subset(suite: Suite, *ids: str) -> Suite:
    return Suite(name=suite.name, tasks=tuple(suite.task(i) for i in ids))


def _one_shot(script: dict[str, list[dict[str, Any]]]) -> ScriptedPolicy:
    """Per task, one proposal per user turn (then the answer)."""

    def answer(view: PolicyView) -> Proposal | None:
        turns = script.get(view.task_id, [])
        turn = view.user_turn or 0
        if view.step > 0 or turn >= len(turns) or not turns[turn]:
            return None
        return Proposal(raw=turns[turn])

    return ScriptedPolicy(answer)


def test_the_support_desk_suite_has_thirty_multi_turn_tasks_with_negatives() -> None:
    suite = support_desk_suite()
    assert len(suite) >= 30
    assert all(t.turns >= 2 for t in suite.tasks)
    categories = {t.category for t in suite.tasks}
    assert {"normal", "near_name", "permission_missing", "info_missing", "no_tool"} <= categories


def test_the_ground_truth_passes_every_layer_on_real_tools(tmp_path: Path) -> None:
    suite = _subset(
        support_desk_suite(),
        "desk_solve_0",
        "desk_refund_0",
        "desk_archive_0",
        "desk_no_permission_0",
        "desk_which_payment_0",
        "desk_question_0",
    )
    outcomes = evaluate(
        suite, ground_truth_policy(suite), runtime_factory=support_desk_environment, trace_dir=tmp_path
    )
    assert [o.task_ok for o in outcomes] == [True] * 6
    assert all(o.layer("exec") is True for o in outcomes)
    assert not any(o.incidents for o in outcomes)
    assert (tmp_path / "trace.db").is_file()


def test_a_wrong_delete_is_counted_as_an_incident_from_its_real_effect(tmp_path: Path) -> None:
    suite = _subset(support_desk_suite(), "desk_archive_0")
    task = suite.tasks[0]
    ticket = task.expected[0][0].arguments["ticket_id"][0]
    policy = _one_shot({task.id: [_calls(("delete_ticket", {"ticket_id": ticket}))]})
    (outcome,) = evaluate(suite, policy, runtime_factory=support_desk_environment, trace_dir=tmp_path)
    assert outcome.incidents == ("forbidden_effect",)
    assert outcome.layer("select") is False
    assert outcome.task_ok is False
    assert outcome.details["effects"] == [f'delete_ticket({{"ticket_id":"{ticket}"}})']
    assert outcome.details["first_deviation"] == 0


def test_a_write_in_a_negative_task_and_a_repeated_effect_are_incidents(tmp_path: Path) -> None:
    suite = _subset(support_desk_suite(), "desk_question_0", "desk_solve_0")
    reply = suite.task("desk_solve_0").expected[1][0].arguments
    send = ("send_reply", {"ticket_id": reply["ticket_id"][0], "body": reply["body"][0]})
    status = ("set_ticket_status", {"ticket_id": reply["ticket_id"][0], "status": "solved"})
    policy = _one_shot(
        {
            "desk_question_0": [_calls(("assign_ticket", {"ticket_id": "T-101", "agent": "lee"}))],
            "desk_solve_0": [_calls(status), _calls(send, send)],
        }
    )
    negative, twice = evaluate(suite, policy, runtime_factory=support_desk_environment, trace_dir=tmp_path)
    assert negative.incidents == ("write_in_negative_task",)
    assert twice.incidents == ("duplicate_effect",)
    assert twice.task_ok is False  # the customer got the reply twice


def test_a_tool_beyond_the_principals_scopes_is_not_offered_and_a_call_to_it_has_no_effect(
    tmp_path: Path,
) -> None:
    suite = _subset(support_desk_suite(), "desk_no_permission_0")
    refund = _calls(("refund_payment", {"payment_id": "P-501", "amount_cents": 4900}))
    shown: list[set[str]] = []

    def answer(view: PolicyView) -> Proposal | None:
        shown.append({t["function"]["name"] for t in view.tools})
        return Proposal(raw=refund) if view.user_turn == 0 and view.step == 0 else None

    (outcome,) = evaluate(
        suite, ScriptedPolicy(answer), runtime_factory=support_desk_environment, trace_dir=tmp_path
    )
    assert "refund_payment" not in shown[0] and "assign_ticket" in shown[0]
    assert outcome.steps[0].select_ok is False
    assert outcome.steps[0].error_category == "unknown_tool"
    assert outcome.incidents == ()


def test_p_exec_and_p_task_differ_when_a_turn_is_left_half_done(tmp_path: Path) -> None:
    suite = _subset(support_desk_suite(), "desk_refund_1", "desk_refund_0")
    outcomes = evaluate(
        suite, flawed_policy(suite), runtime_factory=support_desk_environment, trace_dir=tmp_path
    )
    layers = summarize(outcomes, suite="d", policy="p")["layers"]
    assert layers["exec"]["cumulative"]["rate"] == 1.0
    assert layers["task"]["cumulative"]["rate"] == 0.5


def test_every_task_gets_a_fresh_environment_from_the_factory(tmp_path: Path) -> None:
    seen: list[str] = []

    def factory(inp: EnvironmentInput) -> Environment:
        seen.append(inp.run_id)
        return support_desk_environment(inp)

    suite = _subset(support_desk_suite(), "desk_archive_0", "desk_archive_1")
    outcomes = evaluate(suite, ground_truth_policy(suite), runtime_factory=factory, trace_dir=tmp_path)
    assert seen == ["eval:desk_archive_0:baseline", "eval:desk_archive_1:baseline"]
    # each predicate wants the seed with exactly its own change: the first archive is not seen later
    assert [o.task_ok for o in outcomes] == [True, True]


def test_an_effect_on_another_resource_than_the_expected_one_is_an_incident(tmp_path: Path) -> None:
    suite = _subset(support_desk_suite(), "desk_archive_1")
    wrong = "T-101"
    assert suite.tasks[0].expected[0][0].arguments["ticket_id"][0] != wrong
    policy = _one_shot({"desk_archive_1": [_calls(("archive_ticket", {"ticket_id": wrong}))]})
    (outcome,) = evaluate(suite, policy, runtime_factory=support_desk_environment, trace_dir=tmp_path)
    assert outcome.layer("select") is True and outcome.layer("args") is False
    assert outcome.incidents == ("forbidden_effect",)


def test_outcomes_keep_the_trace_and_the_version_and_schema_hash_of_every_offered_tool(
    tmp_path: Path,
) -> None:
    suite = _subset(support_desk_suite(), "desk_solve_0")
    (outcome,) = evaluate(
        suite, ground_truth_policy(suite), runtime_factory=support_desk_environment, trace_dir=tmp_path
    )
    tools = outcome.details["tools"]
    assert len(tools) == len(suite.tasks[0].tools)
    assert tools["delete_ticket"]["key"] == "delete_ticket@1"
    assert len(tools["delete_ticket"]["schema_hash"]) >= 8
    store = outcome.details["trace"]["store"]
    with Runtime(store) as rt:
        kinds = [e.kind for e in rt.trace.events(outcome.run_id or "")]
    assert "user_turn" in kinds and "dispatched" in kinds
    assert TaskOutcome.from_dict(json.loads(json.dumps(outcome.to_dict()))) == outcome


def test_recovery_cost_counts_the_steps_and_tokens_after_the_first_deviation(tmp_path: Path) -> None:
    suite = _subset(support_desk_suite(), "desk_archive_1")
    task = suite.tasks[0]
    ticket = task.expected[0][0].arguments["ticket_id"][0]
    steps = [
        Proposal(raw=_calls(("archive_ticket", {"ticket_id": "T-999"})), tokens=30),
        Proposal(raw=_calls(("archive_ticket", {"ticket_id": ticket})), tokens=20),
    ]

    def answer(view: PolicyView) -> Proposal | None:
        return steps[view.step] if view.user_turn == 0 and view.step < len(steps) else None

    (outcome,) = evaluate(
        suite, ScriptedPolicy(answer), runtime_factory=support_desk_environment, trace_dir=tmp_path
    )
    assert outcome.task_ok is True
    assert outcome.details["first_deviation"] == 0
    assert outcome.steps[0].error_category == "invalid_arguments"
    assert outcome.steps[1].recovered is True
    recovery = outcome.details["recovery"]
    assert recovery["extra_steps"] == 1 and recovery["tokens"] == 50 and recovery["recovered"] is True


def test_the_demo_evaluates_through_its_runtime_factory(tmp_path: Path) -> None:
    suite = demo_suite()
    outcomes = evaluate(
        suite, ground_truth_policy(suite), runtime_factory=demo_environment, trace_dir=tmp_path
    )
    assert [o.task_ok for o in outcomes] == [True, True, True]
    assert outcomes[0].details["tools"]["create_event"]["key"] == "create_event@1"


def test_a_write_in_the_demos_negative_task_is_an_incident(tmp_path: Path) -> None:
    suite = demo_suite()
    review = suite.task("demo_calendar_review")
    create = review.expected[0][0]
    args = {k: v[0] for k, v in create.arguments.items()}
    negative = Suite(name="demo", tasks=(suite.task("demo_calendar_no_time"),))
    policy = _one_shot({"demo_calendar_no_time": [_calls(("create_event", args))]})
    (outcome,) = evaluate(negative, policy, runtime_factory=demo_environment, trace_dir=tmp_path)
    assert outcome.incidents == ("write_in_negative_task",)
    assert outcome.task_ok is False


def test_a_factory_that_returns_something_else_is_refused(tmp_path: Path) -> None:
    from actionspace.errors import ActionspaceError

    suite = Suite(name="x", tasks=(Task(id="t", request="hi", expected=((ExpectedCall(name="a"),),)),))
    with pytest.raises(ActionspaceError, match="not an Environment"):
        evaluate(suite, ground_truth_policy(suite), runtime_factory=lambda inp: None, trace_dir=tmp_path)  # type: ignore[arg-type,return-value]


@pytest.mark.slow
def test_the_whole_support_desk_suite_reports_incidents_and_p_exec_above_p_task(tmp_path: Path) -> None:
    suite = support_desk_suite()
    truth = evaluate(
        suite, ground_truth_policy(suite), runtime_factory=support_desk_environment, trace_dir=tmp_path / "a"
    )
    assert all(o.task_ok for o in truth)
    flawed = evaluate(
        suite, flawed_policy(suite), runtime_factory=support_desk_environment, trace_dir=tmp_path / "b"
    )
    metrics = summarize(flawed, suite="support-desk", policy="flawed")
    assert metrics["layers"]["exec"]["cumulative"]["rate"] > metrics["layers"]["task"]["cumulative"]["rate"]
    assert metrics["incidents"]["by_kind"] == {"duplicate_effect": 1, "forbidden_effect": 6}


def test_ablations_are_refused_with_a_runtime_factory(tmp_path: Path) -> None:
    from actionspace.errors import ActionspaceError

    suite = _subset(support_desk_suite(), "desk_solve_0")
    with pytest.raises(ActionspaceError, match="baseline variant only"):
        evaluate(
            suite,
            ground_truth_policy(suite),
            variants=("baseline", "names_hidden"),
            runtime_factory=support_desk_environment,
            trace_dir=tmp_path,
        )


def test_eval_suite_takes_the_users_tools_as_module_function_and_compares_a_gated_run(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from actionspace.cli import _mount, app

    _mount()
    demo = CliRunner().invoke(
        app,
        ["eval", "suite", "demo", "--tools", "actionspace.evaluation._suite_demo:demo_environment", "--json"],
    )
    assert demo.exit_code == 0, demo.output
    printed = json.loads(demo.stdout[demo.stdout.index("{") :])
    assert printed["n"] == 3 and printed["layers"]["p_task"] == 1.0
    assert printed["incidents"] == {"total": 0, "by_kind": {}}

    desk = CliRunner().invoke(
        app,
        [
            *("eval", "suite", "support-desk", "--policy", "example:flawed", "--gate", "default"),
            *("--limit", "14", "--out", str(tmp_path), "--json"),
        ],
    )
    assert desk.exit_code == 0, desk.output
    printed = json.loads(desk.stdout[desk.stdout.index("{") :])
    assert printed["layers"]["p_exec"] > printed["layers"]["p_task"]
    assert printed["incidents"]["total"] == printed["gating"]["ungated"]["incidents"] > 0
    assert printed["gating"]["gated"]["incidents"] == 0
    assert printed["deviation"]["deviated"] >= 1
    assert (tmp_path / "ungated" / "trace.db").is_file() and (tmp_path / "gated" / "trace.db").is_file()
    assert "Run-time gate" in (tmp_path / "report.html").read_text()


def test_an_unloadable_runtime_factory_exits_1() -> None:
    from typer.testing import CliRunner

    from actionspace.cli import _mount, app

    _mount()
    result = CliRunner().invoke(app, ["eval", "suite", "demo", "--tools", "no.such.module:factory"])
    assert result.exit_code == 1
    assert "cannot load" in result.output


def test_a_text_format_call_is_played_and_the_chat_answers_its_call_id(tmp_path: Path) -> None:
    suite = _subset(support_desk_suite(), "desk_archive_1")
    ticket = suite.tasks[0].expected[0][0].arguments["ticket_id"][0]
    text = f'<tool_call>{{"name": "archive_ticket", "arguments": {{"ticket_id": "{ticket}"}}}}</tool_call>'
    seen: list[tuple[dict[str, Any], ...]] = []

    def answer(view: PolicyView) -> Proposal | None:
        seen.append(tuple(dict(m) for m in view.messages))
        return Proposal(raw=text) if view.user_turn == 0 and view.step == 0 else None

    (outcome,) = evaluate(
        suite, ScriptedPolicy(answer), runtime_factory=support_desk_environment, trace_dir=tmp_path
    )
    assert outcome.task_ok is True
    assistant, tool = seen[1][-2:]
    assert assistant["role"] == "assistant" and tool["role"] == "tool"
    assert tool["tool_call_id"] == assistant["tool_calls"][0]["id"]


def test_a_saved_suite_file_runs_on_the_tools_named_by_module_function(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from actionspace.cli import _mount, app

    full = support_desk_suite()
    path = Suite(name="mine", tasks=tuple(full.task(i) for i in ("desk_refund_0", "desk_question_0"))).save(
        tmp_path / "mine.json"
    )
    _mount()
    result = CliRunner().invoke(
        app,
        [
            *("eval", "suite", str(path), "--json"),
            *("--tools", "actionspace.evaluation.support_desk:support_desk_environment"),
        ],
    )
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout[result.stdout.index("{") :])
    assert printed["n"] == 2 and printed["layers"]["p_task"] == 1.0
