"""The runner judges each layer through the real runtime; a mutated output drops exactly its layer."""

from __future__ import annotations

import json
from typing import Any

import pytest

from actionspace.evaluation.outcomes import TaskOutcome
from actionspace.evaluation.policies import PolicyView, Proposal, ScriptedPolicy
from actionspace.evaluation.runner import evaluate, ground_truth_policy
from actionspace.evaluation.suite import ExpectedCall, Suite, Task

TOOLS: list[dict[str, Any]] = [
    {
        "name": "get_weather",
        "description": "Weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["C", "F"]}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
    {
        "name": "get_time",
        "description": "Local time in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
]


def _suite() -> Suite:
    return Suite(
        name="mini",
        tasks=(
            Task(
                id="w1",
                request="Weather in Paris?",
                tools=tuple(TOOLS),
                expected=(
                    (ExpectedCall(name="get_weather", arguments={"city": ("Paris",), "unit": ("C", "")}),),
                ),
            ),
            Task(
                id="p1",
                request="Weather and time in Rome",
                tools=tuple(TOOLS),
                expected=(
                    (
                        ExpectedCall(name="get_weather", arguments={"city": ("Rome",), "unit": ("C", "")}),
                        ExpectedCall(name="get_time", arguments={"city": ("Rome",)}),
                    ),
                ),
            ),
            Task(id="n1", category="no_tool", request="Tell me a joke", tools=tuple(TOOLS), no_call=True),
        ),
    )


def _message(*calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for i, (n, a) in enumerate(calls)
        ],
    }


def _layers(outcome: TaskOutcome) -> list[bool | None]:
    return [outcome.layer(name) for name in ("parse", "select", "args", "exec", "task")]


def test_the_ground_truth_passes_every_layer_and_no_call_passes_a_negative_task() -> None:
    suite = _suite()
    outcomes = evaluate(suite, ground_truth_policy(suite))
    assert [o.task_id for o in outcomes] == ["w1", "p1", "n1"]
    assert all(_layers(o) == [True] * 5 for o in outcomes)
    assert outcomes[1].chosen == (("get_time", "get_time"), ("get_weather", "get_weather"))


@pytest.mark.parametrize(
    ("raw", "layers", "category"),
    [
        (
            '<tool_call>{"name": "get_weather", "arguments": {"city": "Par',
            [False, None, None, None, None],
            "parse_error",
        ),
        (_message(("get_time", {"city": "Paris"})), [True, False, None, None, None], None),
        (_message(("get_weather", {"city": "Lyon"})), [True, True, False, None, None], None),
        (
            _message(("get_weather", {"city": "Paris", "unit": "K"})),
            [True, True, False, None, None],
            "invalid_arguments",
        ),
    ],
    ids=["truncated", "wrong_tool", "wrong_value", "value_outside_enum"],
)
def test_a_mutated_output_drops_exactly_its_layer(
    raw: Any, layers: list[bool | None], category: str | None
) -> None:
    suite = _suite().select(categories=["normal"])
    policy = ScriptedPolicy({"w1": [raw]})
    [outcome, _] = evaluate(suite, policy)
    assert _layers(outcome) == layers
    assert outcome.steps[0].error_category == category


def test_an_extra_call_in_a_negative_task_fails_select() -> None:
    suite = _suite()
    policy = ScriptedPolicy({"n1": [_message(("get_time", {"city": "Oslo"}))]})
    outcome = next(o for o in evaluate(suite, policy) if o.task_id == "n1")
    assert _layers(outcome)[:2] == [True, False]
    assert outcome.chosen == (("<none>", "get_time"),)


def test_a_dropped_parallel_call_fails_select() -> None:
    suite = _suite()
    policy = ScriptedPolicy({"p1": [_message(("get_weather", {"city": "Rome"}))]})
    outcome = next(o for o in evaluate(suite, policy) if o.task_id == "p1")
    assert _layers(outcome)[:2] == [True, False]


def test_an_argument_the_schema_rejects_fails_exec_with_its_category() -> None:
    suite = Suite(
        name="typed",
        tasks=(
            Task(
                id="t",
                request="x",
                tools=(
                    {
                        "name": "count",
                        "description": "Count.",
                        "parameters": {
                            "type": "object",
                            "properties": {"n": {"type": "integer", "maximum": 3}},
                        },
                    },
                ),
                expected=((ExpectedCall(name="count", arguments={"n": (5,)}),),),
            ),
        ),
    )
    [outcome] = evaluate(suite, ground_truth_policy(suite))
    assert _layers(outcome) == [True, True, True, False, False]
    assert outcome.steps[0].error_category == "invalid_arguments"


def test_ablations_run_the_same_tasks_with_one_factor_changed() -> None:
    suite = _suite()

    def policy(view: PolicyView) -> Proposal | None:
        names = {t["function"]["name"] for t in view.tools}
        if view.task_id != "w1":
            return None
        name = "get_weather" if "get_weather" in names else sorted(names)[0]
        return Proposal(raw=_message((name, {"city": "Paris"})))

    outcomes = evaluate(
        suite.select(categories=["normal"]), ScriptedPolicy(policy), variants=("baseline", "names_hidden")
    )
    baseline = next(o for o in outcomes if o.task_id == "w1" and o.variant == "baseline")
    hidden = next(o for o in outcomes if o.task_id == "w1" and o.variant == "names_hidden")
    assert baseline.layer("task") is True
    assert hidden.variant == "names_hidden" and hidden.layer("parse") is True


@pytest.mark.parametrize(
    ("kind", "layer"),
    [
        ("wrong_tool", "select"),
        ("dropped_call", "select"),
        ("extra_call", "select"),
        ("drop_required", "args"),
        ("wrong_type", "args"),
        ("unknown_argument", "args"),
        ("out_of_enum", "args"),
    ],
)
def test_each_mutation_drops_exactly_its_layer_with_the_runtime_s_diagnosis(kind: str, layer: str) -> None:
    from actionspace.evaluation.mutated import MutatedPolicy, mutation_summary

    suite = _suite()
    policy = MutatedPolicy(suite, kind)
    outcomes = evaluate(suite, policy)
    summary = mutation_summary(policy, outcomes)
    assert summary["applied"] >= 1
    assert summary["dropped_at"] == {layer: summary["applied"]} and summary["exact"]
    if layer == "args":
        assert summary["categories"] == {"invalid_arguments": summary["applied"]}
    untouched = [o for o in outcomes if o.task_id not in policy.applied]
    assert all(o.layer("task") is True for o in untouched)
    assert {o.task_id for o in outcomes if o.details.get("mutation") == kind} == policy.applied


def test_a_counterfactual_request_needs_the_changed_argument() -> None:
    suite = _suite().select(categories=["normal"])

    def reads_the_request(view: PolicyView) -> Proposal | None:
        text = str(view.messages[0]["content"])
        city = text.split(" in ")[-1].rstrip("?")
        return Proposal(raw=_message(("get_weather", {"city": city})))

    def ignores_it(view: PolicyView) -> Proposal | None:
        return Proposal(raw=_message(("get_weather", {"city": "Paris"})))

    follows = evaluate(suite, ScriptedPolicy(reads_the_request), variants=("counterfactual",))
    stuck = evaluate(suite, ScriptedPolicy(ignores_it), variants=("counterfactual",))
    assert [o.task_id for o in follows] == ["w1", "p1"]
    assert follows[0].layer("args") is True
    assert stuck[0].layer("args") is False
    assert "Rome" not in str(follows[1].steps[0].calls)  # the changed city went to the call


def _answer_suite() -> Suite:
    search = {
        "name": "search",
        "description": "Search the web.",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
    }
    task = Task(id="a1", request="Who founded ByteDance?", tools=(search,), answers=("Zhang Yiming",))
    return Suite(name="answers", tasks=(task,))


def _reply(content: str, *calls: dict[str, Any]) -> dict[str, Any]:
    tool_calls = [
        {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": c["name"], "arguments": json.dumps(c["args"])},
        }
        for i, c in enumerate(calls)
    ]
    return {"role": "assistant", "content": content, "tool_calls": tool_calls or None}


def test_an_answer_task_passes_on_the_right_answer_with_or_without_calls() -> None:
    suite = _answer_suite()
    (truth,) = evaluate(suite, ground_truth_policy(suite))
    assert truth.task_ok and truth.layer("select") is True
    searched = ScriptedPolicy(
        {"a1": [_reply("Zhang Yiming.", {"name": "search", "args": {"q": "ByteDance"}})]}
    )
    (outcome,) = evaluate(suite, searched)
    assert outcome.task_ok and outcome.layer("exec") is True


def test_an_answer_task_fails_at_the_layer_that_went_wrong() -> None:
    suite = _answer_suite()
    wrong = ScriptedPolicy({"a1": [_reply("Liang Rubo")]})
    assert evaluate(suite, wrong)[0].task_ok is False
    unknown = ScriptedPolicy({"a1": [_reply("Zhang Yiming", {"name": "browse", "args": {"q": "x"}})]})
    outcome = evaluate(suite, unknown)[0]
    assert outcome.layer("select") is False and outcome.task_ok is None
    bad_args = ScriptedPolicy({"a1": [_reply("Zhang Yiming", {"name": "search", "args": {"q": 3}})]})
    outcome = evaluate(suite, bad_args)[0]
    assert outcome.layer("select") is True and outcome.layer("args") is False
    assert outcome.steps[0].error_category == "invalid_arguments"


def _many(n: int) -> Suite:
    cities = ("Paris", "Oslo", "Lima", "Kyiv")
    tasks = tuple(
        Task(
            id=f"t{i}",
            category="no_tool" if i % 5 == 0 else "normal",
            request=f"Weather in {cities[i % 4]}?",
            tools=tuple(TOOLS),
            no_call=i % 5 == 0,
            expected=((ExpectedCall(name="get_weather", arguments={"city": (cities[i % 4],)}),),)
            if i % 5
            else (),
        )
        for i in range(n)
    )
    return Suite(name="many", tasks=tasks)


def test_tasks_split_over_processes_give_the_same_outcomes_in_the_same_order() -> None:
    suite = _many(450)
    policy = ScriptedPolicy(
        {
            f"t{i}": [{"name": "get_weather", "arguments": {"city": "Oslo" if i % 7 == 0 else "Paris"}}]
            for i in range(450)
            if i % 3
        }
    )
    seen: list[TaskOutcome | None] = []
    split = evaluate(suite, policy, workers=2, progress=seen.append)
    alone = evaluate(suite, policy)
    assert [o.to_dict() for o in split] == [o.to_dict() for o in alone]
    assert len(seen) == 450 and sorted(o.task_id for o in seen if o) == sorted(o.task_id for o in alone)
    assert {o.layer("args") for o in alone} == {True, False, None}  # the outcomes differ from task to task


def test_a_policy_with_state_is_not_split_over_processes() -> None:
    asked: list[str] = []

    def model(view: PolicyView) -> Proposal | None:
        asked.append(view.task_id)
        return None

    evaluate(_many(450), ScriptedPolicy(model), workers=2)
    assert len(asked) == 450  # every task asked this process's policy


def test_a_mutated_run_split_over_processes_reports_the_same_mutations() -> None:
    from actionspace.evaluation.mutated import MutatedPolicy, mutation_summary

    suite = _many(450)
    split_policy, alone_policy = MutatedPolicy(suite, "wrong_type"), MutatedPolicy(suite, "wrong_type")
    split = evaluate(suite, split_policy, workers=2)
    alone = evaluate(suite, alone_policy)
    assert not split_policy.applied  # the workers mutated; what they did came back in the outcomes
    assert [o.to_dict() for o in split] == [o.to_dict() for o in alone]
    summary = mutation_summary(split_policy, split)
    assert summary == mutation_summary(alone_policy, alone)
    assert summary["applied"] == len(alone_policy.applied) > 0
