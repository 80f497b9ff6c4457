"""Calibration of a policy's tool-choice confidence, and a risk-dependent threshold policy.

Both work on the steps of :class:`~actionspace.evaluation.outcomes.TaskOutcome` records that report
a ``confidence``; a step counts as *correct* when its ``select_ok`` is True (a step whose selection
was not reached counts as wrong).

- :func:`reliability` bins the (confidence, correct) pairs into equal-width bins and computes the
  expected calibration error, ECE = Σ_b (n_b / N) · |accuracy_b − mean confidence_b|
  (Naeini, Cooper & Hauskrecht, "Obtaining Well Calibrated Probabilities Using Bayesian Binning",
  AAAI 2015; Guo et al., "On Calibration of Modern Neural Networks", ICML 2017, eq. 3).
- :class:`ThresholdPolicy` decides per step whether to ``execute`` the chosen call, to
  ``observe_more`` (run read-only tools first to gain evidence) or to ``ask_user``, with a higher
  bar the riskier the chosen tool's effect; :func:`evaluate_thresholds` replays that decision over
  recorded outcomes and reports what it would have cost and saved.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from actionspace.evaluation.outcomes import StepOutcome, TaskOutcome

__all__ = [
    "Decision",
    "ThresholdPolicy",
    "ThresholdReport",
    "confidence_pairs",
    "evaluate_thresholds",
    "reliability",
    "step_effect",
]

Decision = Literal["execute", "observe_more", "ask_user"]
ToolEffect = Literal["none", "read", "write", "external"]
_RANK: dict[str, int] = {"none": 0, "read": 1, "write": 2, "external": 3}
NO_CALL = "<none>"


def confidence_pairs(outcomes: Iterable[TaskOutcome]) -> list[tuple[float, bool]]:
    """(confidence, correct) for every step that reports a confidence, in order.

    ``correct`` is ``step.select_ok is True``.
    """
    return [
        (float(step.confidence), step.select_ok is True)
        for outcome in outcomes
        for step in outcome.steps
        if step.confidence is not None
    ]


def _check_confidence(value: float) -> float:
    if math.isnan(value) or not 0.0 <= value <= 1.0:
        raise ValueError(f"confidence must be within [0, 1], got {value!r}")
    return value


def reliability(pairs: Sequence[tuple[float, bool]], *, n_bins: int = 10) -> dict[str, Any]:
    """The reliability diagram and ECE of (confidence, correct) pairs.

    Bins are ``n_bins`` equal-width intervals of [0, 1] (default 10); bin *i* holds confidences in
    ``[i/n, (i+1)/n)``, the last one also holds 1.0. Returns ``{"bins": [{"low", "high", "count",
    "confidence", "accuracy"}], "ece"}``: ``confidence`` and ``accuracy`` are the bin's means (None
    for an empty bin), ``ece`` is None when there are no pairs.

    Raises ValueError when ``n_bins`` < 1 or a confidence lies outside [0, 1].
    """
    if n_bins < 1:
        raise ValueError(f"n_bins must be at least 1, got {n_bins}")
    counts = [0] * n_bins
    conf_sums = [0.0] * n_bins
    hits = [0] * n_bins
    for raw, correct in pairs:
        c = _check_confidence(float(raw))
        i = min(int(c * n_bins), n_bins - 1)
        # c·n can round across a boundary either way; keep c within [i/n, (i+1)/n) as reported
        if c < i / n_bins:
            i -= 1
        elif i < n_bins - 1 and c >= (i + 1) / n_bins:
            i += 1
        counts[i] += 1
        conf_sums[i] += c
        hits[i] += 1 if correct else 0
    total = sum(counts)
    bins: list[dict[str, Any]] = []
    ece = 0.0
    for i in range(n_bins):
        count = counts[i]
        confidence = conf_sums[i] / count if count else None
        accuracy = hits[i] / count if count else None
        if confidence is not None and accuracy is not None:
            ece += count / total * abs(accuracy - confidence)
        bins.append(
            {
                "low": i / n_bins,
                "high": (i + 1) / n_bins,
                "count": count,
                "confidence": confidence,
                "accuracy": accuracy,
            }
        )
    return {"bins": bins, "ece": ece if total else None}


@dataclass(frozen=True, slots=True, kw_only=True)
class ThresholdPolicy:
    """Minimum confidence to execute a call, by the effect of the tool it calls.

    A step whose confidence reaches the threshold of its riskiest call's effect is executed. Below
    it, a write or external call whose confidence still reaches the ``read`` threshold is held back
    while read-only tools gather more evidence (``observe_more``); anything lower goes to the user
    (``ask_user``). A step with no call, or only effect-``none`` calls, uses the ``read`` threshold.
    """

    read: float = 0.5
    """Confidence (0–1) needed to run a read-only call; default 0.5."""
    write: float = 0.8
    """Confidence (0–1) needed to run a call that writes state; default 0.8."""
    external: float = 0.95
    """Confidence (0–1) needed to run a call with external effects (mail, payment); default 0.95."""

    def __post_init__(self) -> None:
        for name in ("read", "write", "external"):
            _check_confidence(float(getattr(self, name)))

    def to_dict(self) -> dict[str, float]:
        return {"read": self.read, "write": self.write, "external": self.external}

    def threshold(self, effect: str, risk: str = "low") -> float:
        """The threshold for ``effect`` (``none`` and ``read`` share one; unknown means external).

        The risk class raises the bar: a ``high``-risk write is held to the ``external`` threshold.
        """
        rank = _risk_class(effect, risk)
        return (self.read, self.read, self.write, self.external)[rank]

    def decide(self, confidence: float, effect: str, risk: str = "low") -> Decision:
        """``execute``, ``observe_more`` or ``ask_user`` for a call of ``effect`` at ``confidence``.

        Also the run-time gate of a session (``Session.gate``): ``ask_user`` asks for confirmation,
        ``observe_more`` refuses the call and lets the model look further.
        """
        c = _check_confidence(float(confidence))
        if c >= self.threshold(effect, risk):
            return "execute"
        if _risk_class(effect, risk) >= _RANK["write"] and c >= self.read:
            return "observe_more"
        return "ask_user"

    @classmethod
    def from_calibration(
        cls,
        outcomes: Iterable[TaskOutcome],
        *,
        effects: Mapping[str, str],
        target: Mapping[str, float] | None = None,
    ) -> ThresholdPolicy:
        """Thresholds read off recorded outcomes: per class, the lowest confidence at which the
        steps of that class at or above it were right at least ``target`` of the time.

        ``target`` maps ``read`` / ``write`` / ``external`` to the accuracy wanted (default 0.9,
        0.95, 0.99). A class without enough evidence (no confidence reaches the target) keeps the
        strictest threshold, 1.0 (only certain calls run); the thresholds never decrease with risk.
        """
        wanted = {"read": 0.9, "write": 0.95, "external": 0.99, **dict(target or {})}
        by_class: dict[str, list[tuple[float, bool]]] = {"read": [], "write": [], "external": []}
        for outcome in outcomes:
            for step in outcome.steps:
                if step.confidence is None:
                    continue
                rank = _RANK.get(step_effect(step, effects), _RANK["external"])
                klass = "read" if rank <= 1 else "write" if rank == 2 else "external"
                by_class[klass].append((float(step.confidence), step.select_ok is True))
        chosen: dict[str, float] = {}
        floor = 0.0
        for klass in ("read", "write", "external"):
            chosen[klass] = max(floor, _lowest_threshold(by_class[klass], wanted[klass]))
            floor = chosen[klass]
        return cls(read=chosen["read"], write=chosen["write"], external=chosen["external"])


def _risk_class(effect: str, risk: str) -> int:
    rank = _RANK.get(effect, _RANK["external"])
    if risk == "high" and rank >= _RANK["write"]:
        return _RANK["external"]
    return rank


def _lowest_threshold(pairs: Sequence[tuple[float, bool]], accuracy: float) -> float:
    """The lowest confidence t such that pairs at or above t are right at least ``accuracy``."""
    best = 1.0
    for t in sorted({c for c, _ in pairs}, reverse=True):
        above = [ok for c, ok in pairs if c >= t]
        if sum(above) / len(above) >= accuracy:
            best = t
    return best


@dataclass(frozen=True, slots=True, kw_only=True)
class ThresholdReport:
    """What a :class:`ThresholdPolicy` would have done on the steps that report a confidence."""

    steps: int
    """Steps judged (those with a confidence)."""
    executed: int
    observe_more: int
    ask_user: int
    correct_executed: int
    """Executed steps whose selection was right."""
    wrong_avoided: int
    """Steps with a wrong selection that were not executed."""
    correct_deferred: int
    """Steps with a right selection that were held back (the price of the thresholds)."""

    @property
    def coverage(self) -> float | None:
        """Share of judged steps executed; None without steps."""
        return self.executed / self.steps if self.steps else None

    @property
    def accuracy(self) -> float | None:
        """Share of executed steps whose selection was right; None when nothing was executed."""
        return self.correct_executed / self.executed if self.executed else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "steps": self.steps,
            "executed": self.executed,
            "observe_more": self.observe_more,
            "ask_user": self.ask_user,
            "coverage": self.coverage,
            "accuracy": self.accuracy,
            "correct_executed": self.correct_executed,
            "wrong_avoided": self.wrong_avoided,
            "correct_deferred": self.correct_deferred,
        }


def step_effect(step: StepOutcome, effects: Mapping[str, str]) -> str:
    """The riskiest effect among the step's calls: ``none`` without calls, ``external`` if unknown."""
    worst = "none"
    for call in step.calls:
        effect = effects.get(str(call.get("name", NO_CALL)), "external")
        if _RANK.get(effect, _RANK["external"]) > _RANK.get(worst, 0):
            worst = effect if effect in _RANK else "external"
    return worst


def _riskiest(step: StepOutcome, effects: Mapping[str, str], risks: Mapping[str, str]) -> tuple[str, str]:
    """(effect, risk) of the step's call with the highest risk class; ``("none", "low")`` without calls."""
    worst = ("none", "low")
    for call in step.calls:
        name = str(call.get("name", NO_CALL))
        pair = (effects.get(name, "external"), risks.get(name, "low"))
        if _risk_class(*pair) > _risk_class(*worst):
            worst = pair
    return worst


def evaluate_thresholds(
    outcomes: Iterable[TaskOutcome],
    policy: ThresholdPolicy,
    *,
    effects: Mapping[str, str],
    risks: Mapping[str, str] | None = None,
) -> ThresholdReport:
    """Replay ``policy`` over every step of ``outcomes`` that reports a confidence.

    ``effects`` maps tool name → effect (``none``/``read``/``write``/``external``, as declared in the
    catalog); a tool missing from it is treated as ``external``, the strictest case. ``risks`` maps
    tool name → risk class (default: none known, ``low``): the step is judged by its riskiest call,
    as the run-time gate of a session judges each call.
    """
    counts: dict[Decision, int] = {"execute": 0, "observe_more": 0, "ask_user": 0}
    correct_executed = wrong_avoided = correct_deferred = 0
    for outcome in outcomes:
        for step in outcome.steps:
            if step.confidence is None:
                continue
            decision = policy.decide(step.confidence, *_riskiest(step, effects, risks or {}))
            counts[decision] += 1
            correct = step.select_ok is True
            if decision == "execute":
                correct_executed += correct
            elif correct:
                correct_deferred += 1
            else:
                wrong_avoided += 1
    return ThresholdReport(
        steps=sum(counts.values()),
        executed=counts["execute"],
        observe_more=counts["observe_more"],
        ask_user=counts["ask_user"],
        correct_executed=correct_executed,
        wrong_avoided=wrong_avoided,
        correct_deferred=correct_deferred,
    )
