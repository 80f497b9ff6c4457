"""Layered metrics: hand-computed examples, known interval values and properties of every rate."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.evaluation.calibration import confidence_pairs, reliability
from actionspace.evaluation.metrics import newcombe, rate, summarize, wilson
from actionspace.evaluation.outcomes import LAYERS, Category, StepOutcome, TaskOutcome

OK = StepOutcome(index=0, parse_ok=True, select_ok=True, args_ok=True, exec_ok=True)


def _step(index: int = 0, **fields: Any) -> StepOutcome:
    base: dict[str, Any] = {"parse_ok": True, "select_ok": True, "args_ok": True, "exec_ok": True}
    base.update(fields)
    return StepOutcome(index=index, **base)


def _outcomes() -> list[TaskOutcome]:
    t1 = TaskOutcome(
        suite="s",
        task_id="t1",
        steps=(_step(tokens=10, confidence=0.9, expected_tools=("a",), recovered=True),),
        task_ok=True,
        chosen=(("a", "a"),),
        extra_calls=1,
    )
    t2 = TaskOutcome(
        suite="s",
        task_id="t2",
        steps=(
            _step(0, exec_ok=False, error_category="invalid_argument", tokens=5, expected_tools=("a",)),
            _step(1, recovered=True, tokens=7, expected_tools=("b",)),
        ),
        task_ok=False,
        chosen=(("a", "a"), ("b", "b")),
        incidents=("duplicate_effect",),
    )
    t3 = TaskOutcome(
        suite="s",
        task_id="t3",
        category="near_name",
        steps=(
            _step(0, select_ok=False, args_ok=None, exec_ok=None, error_category="unknown_tool"),
            _step(1, select_ok=True),
        ),
        chosen=(("a", "b"),),
        incidents=("write_in_negative_task", "duplicate_effect"),
        extra_calls=2,
    )
    t4 = TaskOutcome(
        suite="s",
        task_id="t4",
        category="no_tool",
        steps=(_step(parse_ok=False, select_ok=None, args_ok=None, exec_ok=None, confidence=0.2),),
        chosen=(("b", "<none>"),),
    )
    return [t1, t2, t3, t4]


def _passed_n(entry: dict[str, Any]) -> tuple[int, int]:
    return entry["passed"], entry["n"]


def test_wilson_interval_of_eight_in_ten_matches_the_published_value() -> None:
    low, high = wilson(8, 10)
    assert low == pytest.approx(0.4902, abs=5e-5)
    assert high == pytest.approx(0.9433, abs=5e-5)


def test_wilson_interval_is_exactly_zero_and_one_at_the_extremes() -> None:
    assert wilson(0, 10)[0] == 0.0
    assert wilson(10, 10)[1] == 1.0
    assert wilson(0, 10)[1] == pytest.approx(0.2775, abs=5e-5)


def test_wilson_rejects_impossible_counts() -> None:
    with pytest.raises(ValueError):
        wilson(3, 2)
    with pytest.raises(ValueError):
        wilson(0, 0)


@pytest.mark.parametrize(
    ("counts", "expected"),
    [
        ((56, 70, 48, 80), (0.0524, 0.3339)),
        ((9, 10, 3, 10), (0.1705, 0.8090)),
        ((5, 56, 0, 29), (-0.0381, 0.1926)),
    ],
)
def test_newcombe_interval_matches_the_published_examples(
    counts: tuple[int, int, int, int], expected: tuple[float, float]
) -> None:
    d, low, high = newcombe(*counts)
    assert d == pytest.approx(counts[0] / counts[1] - counts[2] / counts[3])
    assert low == pytest.approx(expected[0], abs=5e-5)
    assert high == pytest.approx(expected[1], abs=5e-5)


def test_rate_of_nothing_has_no_figures() -> None:
    assert rate(0, 0) == {"rate": None, "low": None, "high": None, "passed": 0, "n": 0}


def test_layers_are_conditional_on_the_previous_layer_and_cumulative_over_all_tasks() -> None:
    layers = summarize(_outcomes(), suite="s", policy="p")["layers"]
    assert list(layers) == list(LAYERS)
    conditional = {k: _passed_n(v["conditional"]) for k, v in layers.items()}
    cumulative = {k: _passed_n(v["cumulative"]) for k, v in layers.items()}
    assert conditional == {"parse": (3, 4), "select": (2, 3), "args": (2, 2), "exec": (1, 2), "task": (1, 1)}
    assert cumulative == {"parse": (3, 4), "select": (2, 4), "args": (2, 4), "exec": (1, 4), "task": (1, 4)}
    assert layers["select"]["conditional"]["rate"] == pytest.approx(2 / 3)
    assert layers["parse"]["cumulative"]["low"] == pytest.approx(wilson(3, 4)[0])


def test_breakdowns_group_tasks_by_category_and_by_expected_tool() -> None:
    metrics = summarize(_outcomes(), suite="s", policy="p")
    by_category = metrics["by_category"]
    assert list(by_category) == ["normal", "no_tool", "near_name"]
    assert [by_category[c]["n"] for c in by_category] == [2, 1, 1]
    assert _passed_n(by_category["normal"]["layers"]["task"]["cumulative"]) == (1, 2)
    by_tool = metrics["by_tool"]
    assert {k: v["n"] for k, v in by_tool.items()} == {"a": 3, "b": 2}
    assert _passed_n(by_tool["b"]["layers"]["parse"]["cumulative"]) == (1, 2)


def test_confusion_matrix_counts_expected_against_chosen_tools() -> None:
    confusion = summarize(_outcomes(), suite="s", policy="p")["confusion"]
    assert confusion["labels"] == ["<none>", "a", "b"]
    assert confusion["matrix"] == [[0, 0, 0], [0, 2, 1], [1, 0, 1]]


def test_steps_tokens_recovery_incidents_and_extra_calls_are_totalled() -> None:
    metrics = summarize(_outcomes(), suite="s", policy="p")
    assert metrics["n_tasks"] == 4
    assert metrics["steps"] == {"mean": 1.5, "max": 2}
    assert metrics["tokens"] == {"total": 22, "mean": 11.0}
    # t1's recovered flag follows no error, so only t2 (recovered) and t3 (not) count.
    assert metrics["recovery"] == {"errors": 2, "recovered": 1, "rate": 0.5}
    assert metrics["incidents"] == {
        "total": 3,
        "by_kind": {"duplicate_effect": 2, "write_in_negative_task": 1},
    }
    assert metrics["extra_calls"] == 3


def test_calibration_comes_from_the_steps_that_report_a_confidence() -> None:
    outcomes = _outcomes()
    calibration = summarize(outcomes, suite="s", policy="p")["calibration"]
    assert calibration == reliability(confidence_pairs(outcomes))
    assert calibration["ece"] == pytest.approx((0.1 + 0.2) / 2)


def test_without_tokens_the_token_figures_are_none() -> None:
    metrics = summarize([TaskOutcome(suite="s", task_id="x", steps=(OK,))], suite="s", policy="p")
    assert metrics["tokens"] == {"total": None, "mean": None}
    assert metrics["recovery"]["rate"] is None


def test_ablation_deltas_compare_the_variant_with_the_baseline_on_shared_tasks() -> None:
    baseline = _outcomes()[:2]
    variant = [
        TaskOutcome(suite="s", task_id="t1", variant="names_hidden", steps=(_step(select_ok=False),)),
        TaskOutcome(suite="s", task_id="t2", variant="names_hidden", steps=(OK,), task_ok=False),
        TaskOutcome(suite="s", task_id="t9", variant="names_hidden", steps=(OK,), task_ok=True),
        TaskOutcome(suite="s", task_id="zz", variant="enums_dropped", steps=(OK,), task_ok=True),
    ]
    metrics = summarize(baseline + variant, suite="s", policy="p")
    assert metrics["n_tasks"] == 2
    assert list(metrics["ablations"]) == ["names_hidden"]
    select = metrics["ablations"]["names_hidden"]["select"]
    d, low, high = newcombe(1, 2, 2, 2)
    assert select == {"baseline": 1.0, "variant": 0.5, "delta": d, "low": low, "high": high}
    assert select["delta"] == pytest.approx(-0.5)
    task = metrics["ablations"]["names_hidden"]["task"]
    assert (task["baseline"], task["variant"]) == (0.5, 0.0)


def test_summary_of_no_tasks_is_empty_but_complete_and_serialisable() -> None:
    metrics = summarize([], suite="s", policy="p")
    assert set(metrics) == {
        "suite", "policy", "n_tasks", "layers", "by_category", "by_tool", "confusion", "steps",
        "tokens", "recovery", "incidents", "extra_calls", "calibration", "ablations",
    }  # fmt: skip
    assert metrics["layers"]["parse"]["cumulative"]["rate"] is None
    assert metrics["calibration"]["ece"] is None
    assert json.loads(json.dumps(metrics)) == metrics


# ------------------------------------------------------------------ properties

_flag = st.one_of(st.none(), st.booleans())
_tools = st.sampled_from(["a", "b", "c", "<none>"])
_steps = st.builds(
    StepOutcome,
    index=st.just(0),
    parse_ok=st.booleans(),
    select_ok=_flag,
    args_ok=_flag,
    exec_ok=_flag,
    expected_tools=st.lists(_tools.filter(lambda t: t != "<none>"), max_size=2).map(tuple),
)
_categories: st.SearchStrategy[Category] = st.sampled_from(["normal", "no_tool", "near_name"])
_tasks = st.builds(
    TaskOutcome,
    suite=st.just("s"),
    task_id=st.sampled_from(["t1", "t2", "t3"]),
    category=_categories,
    variant=st.sampled_from(["baseline", "baseline", "names_hidden"]),
    steps=st.lists(_steps, max_size=3).map(tuple),
    task_ok=_flag,
    chosen=st.lists(st.tuples(_tools, _tools), max_size=3).map(tuple),
)


def _rate_dicts(metrics: dict[str, Any]) -> list[dict[str, Any]]:
    groups = [metrics["layers"]]
    groups += [g["layers"] for g in metrics["by_category"].values()]
    groups += [g["layers"] for g in metrics["by_tool"].values()]
    return [layer for group in groups for layer in group.values()]


@settings(max_examples=150, deadline=None)
@given(st.lists(_tasks, max_size=12))
def test_every_rate_lies_within_its_interval_and_cumulative_never_exceeds_conditional(
    outcomes: list[TaskOutcome],
) -> None:
    metrics = summarize(outcomes, suite="s", policy="p")
    for layer in _rate_dicts(metrics):
        for kind in ("conditional", "cumulative"):
            r = layer[kind]
            assert (r["rate"] is None) == (r["n"] == 0)
            if r["rate"] is not None:
                assert 0.0 <= r["low"] <= r["rate"] <= r["high"] <= 1.0
        cond, cum = layer["conditional"]["rate"], layer["cumulative"]["rate"]
        if cum is not None and cond is not None:
            assert cum <= cond
    cumulative = [metrics["layers"][name]["cumulative"]["passed"] for name in LAYERS]
    assert cumulative == sorted(cumulative, reverse=True)
    for per_layer in metrics["ablations"].values():
        for d in per_layer.values():
            assert -1.0 <= d["low"] <= d["delta"] <= d["high"] <= 1.0


@settings(max_examples=150, deadline=None)
@given(st.lists(_tasks, max_size=12))
def test_confusion_matrix_sums_to_the_number_of_chosen_pairs(outcomes: list[TaskOutcome]) -> None:
    confusion = summarize(outcomes, suite="s", policy="p")["confusion"]
    pairs = sum(len(o.chosen) for o in outcomes if o.variant == "baseline")
    assert sum(map(sum, confusion["matrix"])) == pairs
    assert len(confusion["matrix"]) == len(confusion["labels"])


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=1, max_value=2000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_interval_contains_the_estimate(counts: tuple[int, int]) -> None:
    passed, n = counts
    low, high = wilson(passed, n)
    assert 0.0 <= low <= passed / n <= high <= 1.0
