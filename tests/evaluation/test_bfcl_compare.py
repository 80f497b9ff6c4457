from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Mapping
from typing import Any

import pytest

from actionspace.evaluation import runner
from actionspace.evaluation._bfcl_compare import bfcl_reference, compare_with_bfcl, explain
from actionspace.evaluation.mutated import MutatedPolicy
from actionspace.evaluation.outcomes import TaskOutcome
from actionspace.evaluation.policies import ScriptedPolicy
from actionspace.evaluation.suite import Suite, bfcl_suite

CATEGORIES = ("simple_python", "parallel", "irrelevance")


def _message(*calls: tuple[str, Mapping[str, Any]]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
            for i, (name, args) in enumerate(calls)
        ],
    }


@pytest.fixture(scope="module")
def suite() -> Suite:
    return bfcl_suite(list(CATEGORIES))


@pytest.fixture(scope="module")
def ground_truth(suite: Suite) -> tuple[list[TaskOutcome], list[dict[str, Any]]]:
    outcomes = runner.evaluate(suite, runner.ground_truth_policy(suite))
    return outcomes, compare_with_bfcl(suite, outcomes)


@pytest.fixture(scope="module")
def scripted(suite: Suite) -> dict[str, dict[str, Any]]:
    """Hand-written outputs for five tasks, compared; disagreements by task id."""
    scripts = {
        # BFCL's checker wants an integer for `base`; our judge compares numbers by value
        "simple_python_0": [_message(("calculate_triangle_area", {"base": 10.0, "height": 5}))],
        # a wrong value: both reject
        "simple_python_1": [_message(("math.factorial", {"number": 6}))],
        # one of two parallel calls dropped: both reject
        "parallel_0": [_message(("spotify.play", {"artist": "Taylor Swift", "duration": 20}))],
        # a call where none is right: both reject
        "irrelevance_1": [_message(("determine_body_mass_index", {"weight": 70, "height": 1.8}))],
        # arguments that are not JSON: BFCL's decoder fails, which its irrelevance rule counts as right
        "irrelevance_0": [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c0", "type": "function", "function": {"name": "x", "arguments": "{oops"}}
                ],
            }
        ],
    }
    small = dataclasses.replace(suite, tasks=tuple(suite.task(t) for t in scripts))
    outcomes = runner.evaluate(small, ScriptedPolicy(scripts))
    assert len(outcomes) == len(scripts)
    return {d["task_id"]: d for d in compare_with_bfcl(small, outcomes)}


def test_ground_truth_where_both_accept_lists_no_disagreement(
    ground_truth: tuple[list[TaskOutcome], list[dict[str, Any]]],
) -> None:
    outcomes, disagreements = ground_truth
    listed = {d["task_id"] for d in disagreements}
    assert "simple_python_0" not in listed
    assert "parallel_0" not in listed
    assert not [d for d in disagreements if d["category"] == "irrelevance"]
    assert len(listed) < len(outcomes) // 20


def test_ground_truth_disagreements_are_bfcl_rejections_with_an_explanation(
    ground_truth: tuple[list[TaskOutcome], list[dict[str, Any]]],
) -> None:
    _, disagreements = ground_truth
    by_id = {d["task_id"]: d for d in disagreements}
    assert all(d["ours"] is True and d["bfcl"] is False for d in disagreements)
    assert set(by_id["simple_python_17"]) == {
        "task_id", "category", "ours", "bfcl", "bfcl_error", "ours_reason", "explanation",
    }  # fmt: skip
    assert "missing_required" in by_id["simple_python_17"]["bfcl_error"]
    assert by_id["simple_python_17"]["explanation"] == (
        "required in BFCL's function doc, optional in its possible answer"
    )
    assert "dict_value" in by_id["simple_python_96"]["bfcl_error"]
    assert by_id["simple_python_96"]["explanation"].startswith("nested answer")


def test_parallel_disagreement_is_explained_beyond_cannot_find_match(
    ground_truth: tuple[list[TaskOutcome], list[dict[str, Any]]],
) -> None:
    _, disagreements = ground_truth
    (row,) = [d for d in disagreements if d["task_id"] == "parallel_88"]
    assert "cannot_find_match" in row["bfcl_error"]
    assert row["explanation"] != "BFCL only says cannot_find_match"
    assert "missing_required" in row["bfcl_error"]


def test_outputs_both_reject_are_not_listed(scripted: dict[str, dict[str, Any]]) -> None:
    assert "simple_python_1" not in scripted
    assert "parallel_0" not in scripted
    assert "irrelevance_1" not in scripted


def test_float_for_an_integer_is_listed_as_int_float_coercion(scripted: dict[str, dict[str, Any]]) -> None:
    row = scripted["simple_python_0"]
    assert (row["ours"], row["bfcl"]) == (True, False)
    assert "type_error" in row["bfcl_error"]
    assert row["explanation"] == "type coercion int/float"


def test_unparseable_output_in_an_irrelevance_task_is_right_only_for_bfcl(
    scripted: dict[str, dict[str, Any]],
) -> None:
    row = scripted["irrelevance_0"]
    assert (row["ours"], row["bfcl"]) == (False, True)
    assert row["explanation"] == "BFCL counts output that does not parse as no call"


def test_explain_reports_a_bare_cannot_find_match_as_such() -> None:
    row = {
        "category": "parallel",
        "ours": True,
        "bfcl": False,
        "bfcl_error": "parallel_function_checker_no_order:cannot_find_match: Could not find a match.",
    }
    assert explain(row, [{"f": {}}]) == "BFCL only says cannot_find_match"


def test_explain_names_our_stricter_value_comparison_when_only_we_reject() -> None:
    row = {
        "category": "simple_python",
        "ours": False,
        "bfcl": True,
        "ours_reason": "f: x='a' is not one of ['b']",
    }
    assert explain(row, [{"f": {"x": "a"}}]) == "our value comparison is stricter"


def test_the_checker_runs_in_process_without_bfcls_model_handlers(
    ground_truth: tuple[list[TaskOutcome], list[dict[str, Any]]],
) -> None:
    assert "bfcl_eval.eval_checker.ast_eval.ast_checker" in sys.modules
    assert not [m for m in sys.modules if m.startswith("bfcl_eval.model_handler")]


def test_where_both_reject_a_mutated_parallel_call_bfcl_says_cannot_find_match_and_we_name_the_layer(
    suite: Suite,
) -> None:
    parallel = dataclasses.replace(suite, tasks=tuple(t for t in suite.tasks if t.origin == "bfcl:parallel"))
    outcomes = runner.evaluate(parallel, MutatedPolicy(parallel, "wrong_type"))
    summary = bfcl_reference(parallel, outcomes)["summary"]
    assert summary["compared"] == len(parallel.tasks) == 200
    assert summary["disagree"] == 0
    assert summary["both_reject"]["bfcl"] == {"cannot_find_match": 200}
    assert summary["both_reject"]["ours"] == {"args:invalid_arguments": 200}
