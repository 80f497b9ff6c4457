"""Reliability bins, ECE and the risk-dependent threshold policy."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.evaluation.calibration import (
    ThresholdPolicy,
    confidence_pairs,
    evaluate_thresholds,
    reliability,
    step_effect,
)
from actionspace.evaluation.outcomes import StepOutcome, TaskOutcome


def _call(name: str) -> dict[str, Any]:
    return {"name": name, "arguments": {}}


def test_reliability_bins_hold_mean_confidence_and_accuracy_and_ece_weights_them_by_count() -> None:
    pairs = [(0.95, True), (0.95, False), (0.15, False), (0.05, True)]
    result = reliability(pairs)
    bins = result["bins"]
    assert len(bins) == 10
    assert (bins[0]["low"], bins[0]["high"], bins[9]["high"]) == (0.0, 0.1, 1.0)
    assert [b["count"] for b in bins] == [1, 1, 0, 0, 0, 0, 0, 0, 0, 2]
    assert bins[9]["confidence"] == pytest.approx(0.95)
    assert bins[9]["accuracy"] == 0.5
    assert bins[1]["accuracy"] == 0.0
    assert bins[4]["confidence"] is None and bins[4]["accuracy"] is None
    # (2·|0.5 − 0.95| + |0 − 0.15| + |1 − 0.05|) / 4
    assert result["ece"] == pytest.approx(0.5)


def test_a_confidence_of_one_falls_in_the_last_bin() -> None:
    bins = reliability([(1.0, True), (0.0, False)], n_bins=4)["bins"]
    assert [b["count"] for b in bins] == [1, 0, 0, 1]


def test_a_confidence_just_below_a_boundary_stays_in_the_lower_bin() -> None:
    below = math.nextafter(0.45, 0.0)
    bins = reliability([(below, True)], n_bins=20)["bins"]
    assert bins[8]["count"] == 1
    assert bins[8]["low"] <= below <= bins[8]["high"]


def test_reliability_without_pairs_has_no_ece() -> None:
    result = reliability([])
    assert result["ece"] is None
    assert all(b["count"] == 0 for b in result["bins"])


def test_out_of_range_confidence_and_bin_count_are_rejected() -> None:
    with pytest.raises(ValueError):
        reliability([(1.2, True)])
    with pytest.raises(ValueError):
        reliability([(float("nan"), True)])
    with pytest.raises(ValueError):
        reliability([], n_bins=0)
    with pytest.raises(ValueError):
        ThresholdPolicy(read=-0.1)


def test_pairs_come_from_steps_with_a_confidence_and_correct_means_the_selection_passed() -> None:
    outcome = TaskOutcome(
        suite="s",
        task_id="t",
        steps=(
            StepOutcome(index=0, confidence=0.7, select_ok=True),
            StepOutcome(index=1, confidence=None, select_ok=True),
            StepOutcome(index=2, confidence=0.4, select_ok=None),
            StepOutcome(index=3, confidence=0.3, select_ok=False),
        ),
    )
    assert confidence_pairs([outcome]) == [(0.7, True), (0.4, False), (0.3, False)]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.floats(0.0, 1.0), st.booleans()), max_size=60),
    st.integers(min_value=1, max_value=20),
)
def test_ece_lies_in_the_unit_interval_and_bins_count_every_pair(
    pairs: list[tuple[float, bool]], n_bins: int
) -> None:
    result = reliability(pairs, n_bins=n_bins)
    assert sum(b["count"] for b in result["bins"]) == len(pairs)
    if pairs:
        assert 0.0 <= result["ece"] <= 1.0
    for b in result["bins"]:
        if b["count"]:
            assert b["low"] <= b["confidence"] <= b["high"]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(1, 5)), min_size=1, max_size=5))
def test_ece_is_zero_when_accuracy_matches_confidence(groups: list[tuple[int, int]]) -> None:
    # Each group: confidence j/4 on 4·k steps, of which j·k are right, so accuracy equals confidence.
    pairs = [(j / 4, i < j * k) for j, k in groups for i in range(4 * k)]
    assert reliability(pairs)["ece"] == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize(
    ("confidence", "effect", "decision"),
    [
        (0.5, "read", "execute"),
        (0.49, "read", "ask_user"),
        (0.5, "none", "execute"),
        (0.8, "write", "execute"),
        (0.79, "write", "observe_more"),
        (0.4, "write", "ask_user"),
        (0.95, "external", "execute"),
        (0.9, "external", "observe_more"),
        (0.9, "unknown-effect", "observe_more"),
        (0.1, "external", "ask_user"),
    ],
)
def test_threshold_policy_raises_the_bar_with_the_risk_of_the_effect(
    confidence: float, effect: str, decision: str
) -> None:
    assert ThresholdPolicy(read=0.5, write=0.8, external=0.95).decide(confidence, effect) == decision


def test_a_step_takes_the_riskiest_effect_of_its_calls_and_unknown_tools_count_as_external() -> None:
    effects = {"get": "read", "put": "write"}
    assert step_effect(StepOutcome(index=0), effects) == "none"
    assert step_effect(StepOutcome(index=0, calls=(_call("get"), _call("put"))), effects) == "write"
    assert step_effect(StepOutcome(index=0, calls=(_call("get"), _call("mail"))), effects) == "external"


def test_threshold_evaluation_reports_coverage_accuracy_and_avoided_wrong_calls() -> None:
    def step(i: int, conf: float | None, ok: bool | None, *names: str) -> StepOutcome:
        return StepOutcome(index=i, confidence=conf, select_ok=ok, calls=tuple(_call(n) for n in names))

    outcome = TaskOutcome(
        suite="s",
        task_id="t",
        steps=(
            step(0, 0.6, True, "get"),  # execute, right
            step(1, 0.4, False, "get"),  # ask_user, wrong avoided
            step(2, 0.7, False, "put"),  # observe_more, wrong avoided
            step(3, 0.9, True, "put"),  # execute, right
            step(4, 0.9, True, "mail"),  # observe_more (unknown → external), right deferred
            step(5, 0.55, True),  # no call: read threshold, execute
            step(6, None, False, "put"),  # no confidence: not judged
            step(7, 0.3, None, "mail"),  # ask_user, wrong avoided
        ),
    )
    report = evaluate_thresholds([outcome], ThresholdPolicy(), effects={"get": "read", "put": "write"})
    assert report.to_dict() == {
        "steps": 7,
        "executed": 3,
        "observe_more": 2,
        "ask_user": 2,
        "coverage": pytest.approx(3 / 7),
        "accuracy": 1.0,
        "correct_executed": 3,
        "wrong_avoided": 3,
        "correct_deferred": 1,
    }


def test_threshold_evaluation_without_confidences_has_no_coverage_or_accuracy() -> None:
    outcome = TaskOutcome(suite="s", task_id="t", steps=(StepOutcome(index=0, select_ok=True),))
    report = evaluate_thresholds([outcome], ThresholdPolicy(), effects={})
    assert (report.steps, report.coverage, report.accuracy) == (0, None, None)
