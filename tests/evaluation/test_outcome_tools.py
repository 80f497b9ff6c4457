"""Every runner records name@version and schema hash of exactly the tools it offered."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from actionspace.catalog.spec import ToolSpec
from actionspace.demo.calendar import CalendarService
from actionspace.demo.scenario import build_runtime
from actionspace.evaluation import _runner_multiturn
from actionspace.evaluation._runner_demo import evaluate_demo
from actionspace.evaluation._runner_multiturn import evaluate_multiturn
from actionspace.evaluation.ablations import ABLATIONS
from actionspace.evaluation.policies import Policy, PolicyView, Proposal, ScriptedPolicy
from actionspace.evaluation.runner import _echo_spec, evaluate, ground_truth_policy
from actionspace.evaluation.suite import ExpectedCall, Suite, Task, bfcl_suite, demo_suite

WEATHER: dict[str, Any] = {
    "name": "get_weather",
    "description": "Weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
}
TIME: dict[str, Any] = {
    "name": "get_time",
    "description": "Local time in a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "zone": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
}


def _recorded(specs: Mapping[str, ToolSpec]) -> dict[str, dict[str, str]]:
    return {n: {"key": s.key, "schema_hash": s.schema_hash} for n, s in specs.items()}


def _recording(policy: Policy, seen: list[set[str]]) -> ScriptedPolicy:
    def answer(view: PolicyView) -> Proposal:
        seen.append({str(t["function"]["name"]) for t in view.tools})
        return policy.propose(view)

    return ScriptedPolicy(answer)


def _single_turn_suite() -> Suite:
    task = Task(
        id="w1",
        request="Weather in Paris?",
        tools=(WEATHER, TIME),
        expected=((ExpectedCall(name="get_weather", arguments={"city": ("Paris",)}),),),
    )
    return Suite(name="mini", tasks=(task,))


def test_a_single_turn_outcome_records_the_version_and_schema_hash_of_each_offered_tool() -> None:
    suite = _single_turn_suite()
    seen: list[set[str]] = []

    (outcome,) = evaluate(suite, _recording(ground_truth_policy(suite), seen))

    assert seen == [{"get_weather", "get_time"}]
    assert outcome.details["tools"] == _recorded(
        {"get_weather": _echo_spec(WEATHER), "get_time": _echo_spec(TIME)}
    )
    assert (
        outcome.details["tools"]["get_weather"]["schema_hash"]
        != (outcome.details["tools"]["get_time"]["schema_hash"])
    )


def test_an_ablation_records_the_tools_as_the_variant_showed_them() -> None:
    suite = _single_turn_suite()
    seen: list[set[str]] = []
    shown = ABLATIONS["names_hidden"].tools([dict(WEATHER), dict(TIME)], 0)

    policy = _recording(ground_truth_policy(suite), seen)

    (outcome,) = evaluate(suite, policy, variants=("names_hidden",))

    specs = {str(t["name"]): _echo_spec(t) for t in shown}
    assert set(specs) == seen[0] != {"get_weather", "get_time"}
    assert outcome.details["tools"] == _recorded(specs)


def test_a_demo_outcome_records_the_version_and_schema_hash_of_each_offered_tool(
    tmp_path: Path,
) -> None:
    suite = demo_suite()
    task = suite.task("demo_calendar_review")
    seen: list[set[str]] = []

    outcome = evaluate_demo("demo", task, _recording(ground_truth_policy(suite), seen))

    service = CalendarService(tmp_path / "calendar.db")
    rt = build_runtime(service, "memory://")
    try:
        specs = {name: rt.catalog.get(name) for name in seen[0]}
    finally:
        rt.close()
        service.close()
    assert specs and all(names == seen[0] for names in seen)
    assert outcome.details["tools"] == _recorded(specs)


@pytest.fixture(scope="module")
def multi_turn() -> Suite:
    return bfcl_suite(("multi_turn_miss_func",))


def test_a_multi_turn_outcome_records_the_union_of_the_tools_offered_over_its_turns(
    multi_turn: Suite,
) -> None:
    task = multi_turn.task("multi_turn_miss_func_0")
    seen: list[set[str]] = []

    outcome = evaluate_multiturn("bfcl", task, _recording(ground_truth_policy(multi_turn), seen))

    classes = tuple(task.initial_state["involved_classes"])
    catalog = {s.name: s for s in _runner_multiturn._SPECS[classes]}
    union = set().union(*seen)
    assert union != seen[0]  # a held-back tool joins at a later turn and must be recorded too
    assert outcome.details["tools"] == _recorded({n: catalog[n] for n in union})


def test_a_tool_offered_at_two_versions_over_the_turns_records_both() -> None:
    first = {"get_time": {"key": "get_time@1", "schema_hash": "aaaa"}}
    later = {
        "get_time": {"key": "get_time@2", "schema_hash": "bbbb"},
        "get_weather": {"key": "get_weather@1", "schema_hash": "cccc"},
    }
    merged = _runner_multiturn._union(_runner_multiturn._union({}, first), later)
    assert merged["get_weather"] == {"key": "get_weather@1", "schema_hash": "cccc"}
    assert merged["get_time"]["versions"] == [
        {"key": "get_time@1", "schema_hash": "aaaa"},
        {"key": "get_time@2", "schema_hash": "bbbb"},
    ]
    assert merged["get_time"]["key"] == "get_time@2"
    assert _runner_multiturn._union(merged, later) == merged


def test_an_agentdojo_pair_records_every_tool_its_runtime_could_call() -> None:
    from agentdojo.task_suite.load_suites import get_suite

    from actionspace.evaluation._agentdojo_replay import SuiteReplay
    from actionspace.evaluation.agentdojo import DEFAULT_BENCHMARK_VERSION

    replay = SuiteReplay("banking", benchmark_version=DEFAULT_BENCHMARK_VERSION)
    try:
        result = replay.benign("user_task_0")
        specs = {s.name: s for s in replay.runtime.catalog.offerable()}
    finally:
        replay.close()
    names = {t.name for t in get_suite(DEFAULT_BENCHMARK_VERSION, "banking").tools}
    assert set(specs) == names
    assert result.tools == _recorded(specs)
    assert result.to_dict()["tools"] == _recorded(specs)
