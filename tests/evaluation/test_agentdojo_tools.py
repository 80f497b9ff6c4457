"""AgentDojo's tools as actionspace tools: every tool labelled, every label consistent and documented."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agentdojo")

from agentdojo.agent_pipeline.ground_truth_pipeline import GroundTruthPipeline
from agentdojo.attacks.base_attacks import FixedJailbreakAttack
from agentdojo.attacks.important_instructions_attacks import ImportantInstructionsAttack
from agentdojo.task_suite.load_suites import get_suite

from actionspace import Runtime
from actionspace.evaluation._agentdojo_env import ATTACK_USER_NAME, Injector, load_environment
from actionspace.evaluation._agentdojo_tools import TOOL_LABELS, EnvironmentSlot, register_suite_tools
from actionspace.evaluation.agentdojo import DEFAULT_BENCHMARK_VERSION, SUITES

DOCS = Path(__file__).resolve().parents[2] / "docs" / "agentdojo.md"


def _suite(name: str) -> Any:
    return get_suite(DEFAULT_BENCHMARK_VERSION, name)


def _tool_names() -> set[str]:
    return {f.name for name in SUITES for f in _suite(name).tools}


def test_every_tool_of_the_four_suites_has_a_label_and_no_label_is_stale() -> None:
    assert _tool_names() == set(TOOL_LABELS)


def test_high_risk_arguments_are_real_arguments_of_their_tool() -> None:
    schemas = {f.name: f.parameters.model_json_schema() for n in SUITES for f in _suite(n).tools}
    for name, label in TOOL_LABELS.items():
        properties = set(schemas[name].get("properties", {}))
        assert set(label.high_risk_args) <= properties, name


def test_tools_that_reach_other_people_are_sinks_and_reads_are_not() -> None:
    for name, label in TOOL_LABELS.items():
        assert label.sink == (label.effect == "external"), name
        assert label.why, name


def test_the_docs_table_lists_every_tool_with_its_effect_and_integrity() -> None:
    rows = {
        cells[1].strip("` "): cells
        for line in DOCS.read_text(encoding="utf-8").splitlines()
        if line.startswith("| `") and len(cells := line.split("|")) > 4
    }
    for name, label in TOOL_LABELS.items():
        assert name in rows, name
        text = "|".join(rows[name])
        assert label.effect in text and label.integrity in text, name


def test_registered_tools_carry_their_labels_into_the_runtime() -> None:
    rt = Runtime("memory://", recover_on_start=False)
    specs = {s.name: s for s in register_suite_tools(rt, _suite("banking"), EnvironmentSlot())}
    send = specs["send_money"]
    assert send.effect == "external"
    assert send.labels.sink is True
    assert send.labels.high_risk_args == ("recipient", "amount")
    reader = specs["get_most_recent_transactions"]
    assert reader.labels.integrity == "untrusted"
    assert reader.labels.sink is False
    rt.close()


def test_the_environment_loader_builds_what_agentdojo_builds() -> None:
    suite = _suite("slack")
    injector = Injector(suite)
    vector = next(iter(injector.defaults))
    text = injector.injections(suite.user_tasks["user_task_1"], suite.injection_tasks["injection_task_1"])
    injections = {vector: next(iter(text.values()))}
    ours = load_environment(suite, injections, injector.defaults)
    theirs = suite.load_and_inject_default_environment(injections)
    assert ours.model_dump() == theirs.model_dump()
    assert ours.model_dump() != suite.load_and_inject_default_environment({}).model_dump()


def test_injections_equal_agentdojos_important_instructions_attack() -> None:
    suite = _suite("banking")
    attack = FixedJailbreakAttack(ImportantInstructionsAttack._JB_STRING, suite, GroundTruthPipeline(None))
    attack.user_name = ATTACK_USER_NAME
    injector = Injector(suite)
    injection = suite.injection_tasks["injection_task_0"]
    for user_id in ("user_task_0", "user_task_3", "user_task_12"):
        user = suite.user_tasks[user_id]
        assert injector.injections(user, injection) == attack.attack(user, injection)
        assert injector.injections(user, injection)  # every user task reads some vector
