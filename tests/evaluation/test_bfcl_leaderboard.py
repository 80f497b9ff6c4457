"""BFCL's own categories and overall accuracy, ours beside BFCL's checker's."""

from __future__ import annotations

import ast
import json
import random
import zipfile
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from typer.testing import CliRunner

from actionspace.cli import _mount, app
from actionspace.evaluation._bfcl_data import WHEEL, default_cache_dir, fetch
from actionspace.evaluation._bfcl_leaderboard import (
    LEADERBOARD_CATEGORIES,
    WEIGHTS,
    bfcl_leaderboard,
    dataset_sizes,
    overall_accuracy,
)
from actionspace.evaluation.outcomes import StepOutcome, TaskOutcome
from actionspace.evaluation.suite import Suite, Task

_HELPER = "bfcl_eval/eval_checker/eval_runner_helper.py"
_FUNCTIONS = (
    "calculate_weighted_accuracy",
    "calculate_unweighted_accuracy",
    "calculate_percentage_weighted_accuracy",
)


def _helper_source() -> str:
    fetch()
    with zipfile.ZipFile(default_cache_dir() / WHEEL) as wheel:
        return wheel.read(_HELPER).decode("utf-8")


def _bfcl_functions() -> dict[str, Callable[..., dict[str, Any]]]:
    """BFCL's three accuracy functions, taken from the pinned wheel's source as shipped (the module
    itself imports pandas and BFCL's model registry, which are not installed)."""
    tree = ast.parse(_helper_source())
    picked: list[ast.stmt] = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in _FUNCTIONS]
    assert [n.name for n in picked if isinstance(n, ast.FunctionDef)] == list(_FUNCTIONS)
    namespace: dict[str, Any] = {}
    exec(compile(ast.Module(body=picked, type_ignores=[]), _HELPER, "exec"), namespace)
    return {name: namespace[name] for name in _FUNCTIONS}


def _sizes() -> dict[str, int]:
    return dataset_sizes(fetch())


def _bfcl_overall(scores: Mapping[str, tuple[float, int]]) -> float:
    """The overall figure composed as generate_leaderboard_csv composes it, with BFCL's functions."""
    f = _bfcl_functions()
    weighted, unweighted = f["calculate_weighted_accuracy"], f["calculate_unweighted_accuracy"]

    def score(name: str) -> dict[str, Any]:
        if name in scores:
            accuracy, count = scores[name]
            return {"accuracy": accuracy, "total_count": count, "display_accuracy": accuracy}
        # get_category_score: a category not evaluated is 0 over its dataset's entries, shown N/A
        return {"accuracy": 0, "total_count": _sizes()[name], "display_accuracy": "N/A"}

    simple = unweighted([score("simple_python"), score("simple_java"), score("simple_javascript")])
    non_live = unweighted(
        [simple, score("multiple"), score("parallel"), score("parallel_multiple")],
        display_na_if_category_missing=False,
    )
    live = weighted(
        [
            score("live_simple"),
            score("live_multiple"),
            score("live_parallel"),
            score("live_parallel_multiple"),
        ],
        display_na_if_category_missing=False,
    )
    multi_turn = unweighted(
        [score(f"multi_turn_{k}") for k in ("base", "miss_func", "miss_param", "long_context")],
        display_na_if_category_missing=False,
    )
    web = unweighted([score("web_search_base"), score("web_search_no_snippet")])
    memory = unweighted([score("memory_kv"), score("memory_vector"), score("memory_rec_sum")])
    agentic = unweighted([web, memory], display_na_if_category_missing=False)
    irrelevance = unweighted([score("irrelevance"), score("live_irrelevance")])
    total = f["calculate_percentage_weighted_accuracy"](
        [non_live, live, irrelevance, multi_turn, agentic],
        [10, 10, 10, 30, 40],
        display_na_if_category_missing=False,
    )
    return float(total["accuracy"])


@pytest.mark.parametrize("seed", range(5))
def test_the_overall_figure_equals_bfcls_own_functions_on_the_same_category_scores(seed: int) -> None:
    rng = random.Random(seed)
    names = [c for c in LEADERBOARD_CATEGORIES if c != "live_relevance"]
    dropped = set(rng.sample(names, 3)) if seed else set()
    scores = {c: (rng.random(), rng.randint(10, 500)) for c in names if c not in dropped}
    ours = overall_accuracy(scores, sizes=_sizes())["overall"]
    assert ours == pytest.approx(_bfcl_overall(scores), abs=1e-12)


def test_the_pinned_leaderboard_still_weighs_the_groups_as_documented() -> None:
    source = _helper_source()
    assert "[10, 10, 10, 30, 40]" in source
    assert list(WEIGHTS.values()) == [10, 10, 10, 30, 40]
    for name in LEADERBOARD_CATEGORIES:
        assert f'"{name}"' in source


def _outcome(task_id: str, ok: bool, **details: Any) -> TaskOutcome:
    step = StepOutcome(index=0, select_ok=ok, args_ok=ok if ok else None, exec_ok=ok if ok else None)
    return TaskOutcome(
        suite="bfcl", task_id=task_id, steps=(step,), task_ok=ok if ok else None, details=details
    )


def test_categories_follow_bfcl_and_bfcls_verdicts_come_from_its_checker() -> None:
    suite = Suite(
        name="bfcl",
        tasks=(
            Task(id="a", request="x", origin="bfcl:simple_python", no_call=False),
            Task(id="b", request="x", origin="bfcl:simple_python"),
            Task(id="m", request="x", origin="bfcl:memory"),
            Task(id="t", request=((),), origin="bfcl:multi_turn_base"),
        ),
    )
    outcomes = [
        _outcome("a", True),
        _outcome("b", True),
        _outcome("m", True),
        _outcome("t", False, state_checks=[True, False]),
    ]
    board = bfcl_leaderboard(suite, outcomes, {"a": True, "b": False, "m": True})
    assert board["categories"]["simple_python"] == {"n": 2, "ours": 1.0, "bfcl": 0.5}
    assert board["categories"]["memory_kv"] == {"n": 1, "ours": 1.0, "bfcl": 1.0}
    assert board["categories"]["multi_turn_base"] == {"n": 1, "ours": 0.0, "bfcl": 0.0}
    assert "memory_vector" in board["not_evaluated"] and "web_search_base" in board["not_evaluated"]
    assert board["version"] == "2026.3.23"
    # missing categories count as 0 in BFCL's overall, and are left out of the evaluated-only one
    assert board["bfcl"]["overall"] < board["bfcl_evaluated"]["overall"]


@pytest.mark.slow
def test_eval_json_carries_bfcl_category_rows_and_bfcls_overall_beside_ours() -> None:
    _mount()
    result = CliRunner().invoke(
        app, ["eval", "suite", "bfcl:simple_python,irrelevance", "--workers", "1", "--json"]
    )
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout[result.stdout.index("{") :])
    board = printed["bfcl_leaderboard"]
    assert set(board["categories"]) == {"simple_python", "irrelevance"}
    assert board["categories"]["simple_python"]["n"] == 400
    # BFCL's column counts exactly what its checker rejected, where we agree and where we do not
    checker = printed["reference_checker"]
    rejected = sum(checker["both_reject"]["bfcl"].values())
    rejected += sum(1 for d in printed["disagreements"] if d["bfcl"] is False)
    assert checker["compared"] == 400 + 240
    assert board["categories"]["simple_python"]["bfcl"] == pytest.approx(1 - rejected / 400)
    assert board["categories"]["irrelevance"] == {"n": 240, "ours": 1.0, "bfcl": 1.0}
    assert board["bfcl"]["overall"] == pytest.approx(
        _bfcl_overall({name: (row["bfcl"], row["n"]) for name, row in board["categories"].items()})
    )


def test_the_html_report_shows_the_bfcl_table_beside_the_disagreements() -> None:
    from actionspace.evaluation.report import render_html

    suite = Suite(name="bfcl", tasks=(Task(id="a", request="x", origin="bfcl:simple_python"),))
    board = bfcl_leaderboard(suite, [_outcome("a", True)], {"a": False})
    page = render_html({"suite": "bfcl", "policy": "p", "disagreements": [], "bfcl_leaderboard": board})
    assert "By BFCL's categories (bfcl-eval 2026.3.23)" in page
    assert "<th>simple_python</th><td>1</td><td>100.00 %</td><td>0.00 %</td>" in page
