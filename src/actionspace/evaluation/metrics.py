"""Layered metrics over evaluated tasks: the ``metrics.json`` object the report is drawn from.

For each layer (``parse`` → ``select`` → ``args`` → ``exec`` → ``task``) two rates are given:

- *cumulative*: tasks that passed this layer and every earlier one, of all tasks;
- *conditional*: of the tasks that passed every earlier layer (those that reached this one), the
  share that passed this one too.

A task whose execution is undecided (a call waiting for approval, an unknown commit, or a call the
runtime closed before sending it: :data:`~actionspace.evaluation.outcomes.EXEC_UNDECIDED`) reached
``exec`` but is neither a success nor a failure there: it is left out of both rates of ``exec`` and
``task`` and counted in ``exec_outcomes``. A call the policy refused passes ``exec``; ``task``
judges what it left undone.

Each rate carries a Wilson score 95 % interval; ablation deltas carry Newcombe's hybrid score
interval for a difference of two proportions. The headline figures use the ``baseline`` outcomes
only; each other variant is compared with the baseline on the task ids both share.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from actionspace.evaluation.calibration import confidence_pairs, reliability
from actionspace.evaluation.outcomes import CATEGORIES, EXEC_UNDECIDED, LAYERS, Layer, TaskOutcome

__all__ = [
    "Z95",
    "ablations",
    "confusion",
    "exec_outcomes",
    "layer_rates",
    "newcombe",
    "rate",
    "summarize",
    "wilson",
]

Z95 = 1.959963984540054
"""The two-sided 95 % standard normal quantile."""

NO_CALL = "<none>"


def wilson(passed: int, n: int, *, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for ``passed`` successes out of ``n`` (default 95 %).

    With p = passed/n: (p + z²/2n ± z·√(p(1−p)/n + z²/4n²)) / (1 + z²/n)
    (E. B. Wilson, "Probable inference, the law of succession, and statistical inference",
    JASA 22, 1927; formula 3 of R. G. Newcombe, "Two-sided confidence intervals for the single
    proportion", Statistics in Medicine 17, 1998). Raises ValueError when n ≤ 0 or passed ∉ [0, n].
    """
    if n <= 0 or not 0 <= passed <= n:
        raise ValueError(f"need 0 <= passed <= n and n > 0, got passed={passed}, n={n}")
    p = passed / n
    z2 = z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    # The exact bounds at 0/n and n/n are 0 and 1; rounding must not move them past the estimate.
    low = 0.0 if passed == 0 else max(0.0, min(p, centre - half))
    high = 1.0 if passed == n else min(1.0, max(p, centre + half))
    return low, high


def newcombe(passed1: int, n1: int, passed2: int, n2: int, *, z: float = Z95) -> tuple[float, float, float]:
    """Difference p1 − p2 of two independent proportions with its hybrid score interval.

    Returns (d, low, high) where, with (l_i, u_i) the Wilson interval of p_i,
    low = d − √((p1 − l1)² + (u2 − p2)²) and high = d + √((u1 − p1)² + (p2 − l2)²)
    (method 10 of R. G. Newcombe, "Interval estimation for the difference between independent
    proportions: comparison of eleven methods", Statistics in Medicine 17, 1998). Raises ValueError
    when either n ≤ 0.
    """
    l1, u1 = wilson(passed1, n1, z=z)
    l2, u2 = wilson(passed2, n2, z=z)
    p1, p2 = passed1 / n1, passed2 / n2
    d = p1 - p2
    low = d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    high = d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return d, max(-1.0, low), min(1.0, high)


def rate(passed: int, n: int) -> dict[str, Any]:
    """``{"rate", "low", "high", "passed", "n"}``; the three figures are None when n == 0."""
    if n == 0:
        return {"rate": None, "low": None, "high": None, "passed": passed, "n": 0}
    low, high = wilson(passed, n)
    return {"rate": passed / n, "low": low, "high": high, "passed": passed, "n": n}


def _depth(outcome: TaskOutcome) -> int:
    """How many leading layers of ``LAYERS`` ``outcome`` passed (it passed ``LAYERS[:depth]``)."""
    for i, layer in enumerate(LAYERS):
        if outcome.layer(layer) is not True:
            return i
    return len(LAYERS)


_EXEC = LAYERS.index("exec")


def _undecided(outcome: TaskOutcome) -> bool:
    """It reached ``exec`` (passed every earlier layer) and its execution is undecided there."""
    return _depth(outcome) == _EXEC and outcome.exec_state in EXEC_UNDECIDED


def _decided(outcomes: Sequence[TaskOutcome], layer: Layer) -> list[TaskOutcome]:
    """The outcomes a rate of ``layer`` counts: at ``exec`` and after, the undecided are left out."""
    if LAYERS.index(layer) < _EXEC:
        return list(outcomes)
    return [o for o in outcomes if not _undecided(o)]


def layer_rates(outcomes: Sequence[TaskOutcome]) -> dict[str, dict[str, Any]]:
    """Per layer, in ``LAYERS`` order, its conditional and cumulative rate (undecided executions are
    left out from ``exec`` on)."""
    out: dict[str, dict[str, Any]] = {}
    for i, layer in enumerate(LAYERS):
        depths = [_depth(o) for o in _decided(outcomes, layer)]
        reached = sum(1 for d in depths if d >= i)
        passed = sum(1 for d in depths if d > i)
        out[layer] = {"conditional": rate(passed, reached), "cumulative": rate(passed, len(depths))}
    return out


def exec_outcomes(outcomes: Sequence[TaskOutcome]) -> dict[str, int]:
    """Tasks left out of the ``exec`` and ``task`` rates, by undecided state: ``pending`` and
    ``unknown_commit`` always, ``not_sent`` (the runtime closed before the call was sent) when any."""
    counts = Counter(o.exec_state for o in outcomes if _undecided(o))
    return {state: counts[state] for state in EXEC_UNDECIDED if state != "not_sent" or counts[state]}


def _expected_tools(outcome: TaskOutcome) -> list[str]:
    """The tools a task expects: every step's ``expected_tools`` and the expected side of ``chosen``."""
    names = {t for s in outcome.steps for t in s.expected_tools}
    names.update(expected for expected, _ in outcome.chosen)
    return sorted(names)


def _grouped(groups: dict[str, list[TaskOutcome]], order: Sequence[str]) -> dict[str, Any]:
    keys = [k for k in order if k in groups] + sorted(k for k in groups if k not in order)
    return {k: {"n": len(groups[k]), "layers": layer_rates(groups[k])} for k in keys}


def _by_category(outcomes: Sequence[TaskOutcome]) -> dict[str, Any]:
    groups: dict[str, list[TaskOutcome]] = {}
    for o in outcomes:
        groups.setdefault(o.category, []).append(o)
    return _grouped(groups, CATEGORIES)


def _by_tool(outcomes: Sequence[TaskOutcome]) -> dict[str, Any]:
    groups: dict[str, list[TaskOutcome]] = {}
    for o in outcomes:
        for tool in _expected_tools(o):
            groups.setdefault(tool, []).append(o)
    return _grouped(groups, ())


MAX_CONFUSION_LABELS = 60
"""A suite of thousands of tools keeps its matrix to the tools most involved in confusions."""


def confusion(outcomes: Iterable[TaskOutcome], *, max_labels: int = MAX_CONFUSION_LABELS) -> dict[str, Any]:
    """Rows: expected tool, columns: chosen tool, over every ``chosen`` pair; labels sorted.

    With more than ``max_labels`` tools, only those in the most frequent confusions (off-diagonal
    pairs) are kept, then the most used; ``"correct"`` counts every diagonal pair, ``"confusions"``
    lists every off-diagonal pair with its count, and ``"omitted_labels"`` how many were left out.
    """
    everything = Counter(pair for o in outcomes for pair in o.chosen)
    pairs = everything
    labels = sorted({name for pair in pairs for name in pair})
    omitted = 0
    if len(labels) > max_labels:
        weight: Counter[str] = Counter()
        for (expected, chosen), count in pairs.items():
            if expected != chosen:
                weight[expected] += 10 * count
                weight[chosen] += 10 * count
            else:
                weight[expected] += count
        kept = {name for name, _ in weight.most_common(max_labels)}
        omitted = len(labels) - len(kept)
        labels = sorted(kept)
        pairs = Counter({p: c for p, c in pairs.items() if p[0] in kept and p[1] in kept})
    off = sorted(
        ((e, c, n) for (e, c), n in everything.items() if e != c),
        key=lambda item: (-item[2], item[0], item[1]),
    )
    index = {name: i for i, name in enumerate(labels)}
    matrix = [[0] * len(labels) for _ in labels]
    for (expected, chosen), count in pairs.items():
        matrix[index[expected]][index[chosen]] += count
    correct = sum(n for (e, c), n in everything.items() if e == c)
    return {
        "labels": labels,
        "matrix": matrix,
        "correct": correct,
        "confusions": [list(item) for item in off[:500]],
        "omitted_labels": omitted,
    }


def _steps(outcomes: Sequence[TaskOutcome]) -> dict[str, Any]:
    counts = [len(o.steps) for o in outcomes]
    return {"mean": sum(counts) / len(counts) if counts else 0.0, "max": max(counts, default=0)}


def _tokens(outcomes: Sequence[TaskOutcome]) -> dict[str, Any]:
    """Total over steps that report tokens; mean per task among tasks with at least one such step."""
    per_task = [
        sum(s.tokens for s in o.steps if s.tokens is not None)
        for o in outcomes
        if any(s.tokens is not None for s in o.steps)
    ]
    if not per_task:
        return {"total": None, "mean": None}
    return {"total": sum(per_task), "mean": sum(per_task) / len(per_task)}


def _recovery(outcomes: Sequence[TaskOutcome]) -> dict[str, Any]:
    """Steps that followed a step with an error, and how many of them were successful recoveries.

    A wait for approval and an unknown commit are undecided, no error to recover from; a refusal
    by policy is (:attr:`~actionspace.evaluation.outcomes.StepOutcome.erred`)."""
    errors = recovered = 0
    for o in outcomes:
        for before, step in zip(o.steps, o.steps[1:], strict=False):
            if before.erred:
                errors += 1
                recovered += step.recovered
    return {"errors": errors, "recovered": recovered, "rate": recovered / errors if errors else None}


def _deviations(outcomes: Sequence[TaskOutcome]) -> dict[str, Any] | None:
    """Tasks that left the reference path, and what they spent from there (runtime-factory runs)."""
    played = [o for o in outcomes if "first_deviation" in o.details]
    if not played:
        return None
    costs = [o.details["recovery"] for o in played if o.details.get("recovery")]
    return {
        "tasks": len(played),
        "deviated": len(costs),
        "recovered": sum(1 for c in costs if c.get("recovered")),
        "extra_steps": sum(int(c.get("extra_steps") or 0) for c in costs),
        "tokens": sum(int(c.get("tokens") or 0) for c in costs),
        "seconds": sum(float(c.get("seconds") or 0.0) for c in costs),
    }


def _incidents(outcomes: Sequence[TaskOutcome]) -> dict[str, Any]:
    kinds = Counter(kind for o in outcomes for kind in o.incidents)
    return {"total": sum(kinds.values()), "by_kind": dict(sorted(kinds.items()))}


def _cumulative_passed(outcomes: Sequence[TaskOutcome], layer: Layer) -> int:
    upto = LAYERS.index(layer) + 1
    return sum(1 for o in outcomes if _depth(o) >= upto)


def ablations(outcomes: Sequence[TaskOutcome]) -> dict[str, Any]:
    """Per non-baseline variant and layer: baseline and variant cumulative rates and their delta.

    Only task ids present in both the variant and the baseline are compared; a variant sharing no
    task id with the baseline is left out. Variants appear in order of first occurrence.
    """
    baseline = [o for o in outcomes if o.variant == "baseline"]
    variants = list(dict.fromkeys(o.variant for o in outcomes if o.variant != "baseline"))
    out: dict[str, Any] = {}
    for variant in variants:
        runs = [o for o in outcomes if o.variant == variant]
        shared = {o.task_id for o in runs} & {o.task_id for o in baseline}
        base = [o for o in baseline if o.task_id in shared]
        runs = [o for o in runs if o.task_id in shared]
        if not shared:
            continue
        per_layer: dict[str, Any] = {}
        for layer in LAYERS:
            runs_n, base_n = _decided(runs, layer), _decided(base, layer)
            if not runs_n or not base_n:
                continue
            passed_v, passed_b = _cumulative_passed(runs_n, layer), _cumulative_passed(base_n, layer)
            delta, low, high = newcombe(passed_v, len(runs_n), passed_b, len(base_n))
            per_layer[layer] = {
                "baseline": passed_b / len(base_n),
                "variant": passed_v / len(runs_n),
                "delta": delta,
                "low": low,
                "high": high,
            }
        out[variant] = per_layer
    return out


def summarize(
    outcomes: Sequence[TaskOutcome], *, suite: str, policy: str, n_bins: int = 10
) -> dict[str, Any]:
    """The metrics dict for ``outcomes`` of ``suite`` under ``policy`` (JSON-serialisable).

    Headline figures (layers, breakdowns, confusion, steps, tokens, recovery, incidents, extra
    calls, calibration with ``n_bins`` equal-width bins, default 10) cover the ``baseline`` outcomes;
    ``ablations`` compares every other variant with them.
    """
    base = [o for o in outcomes if o.variant == "baseline"]
    return {
        "suite": suite,
        "policy": policy,
        "n_tasks": len(base),
        "layers": layer_rates(base),
        **({"exec_outcomes": u} if any((u := exec_outcomes(base)).values()) else {}),
        "by_category": _by_category(base),
        "by_tool": _by_tool(base),
        "confusion": confusion(base),
        "steps": _steps(base),
        "tokens": _tokens(base),
        "recovery": _recovery(base),
        **({"deviation": d} if (d := _deviations(base)) is not None else {}),
        "incidents": _incidents(base),
        "extra_calls": sum(o.extra_calls for o in base),
        "calibration": reliability(confidence_pairs(base), n_bins=n_bins),
        "ablations": ablations(outcomes),
    }


def public_metrics(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """The machine-readable form written to ``metrics.json`` and printed by ``eval --json``.

    ``{"suite", "policy", "n", "layers": {"p_parse" … "p_task"} (cumulative rates),
    "conditional": {same keys}, "by_category": {category: {"n", "layers", "conditional"}},
    "disagreements": [...], "detail": <the full summary with intervals, tools, confusion, calibration,
    ablations>}``. Rates are None where nothing was measured.
    """

    def flat(layers: Mapping[str, Any], kind: str) -> dict[str, float | None]:
        return {f"p_{name}": (layers.get(name) or {}).get(kind, {}).get("rate") for name in LAYERS}

    layers = metrics.get("layers") or {}
    return {
        "suite": metrics.get("suite"),
        "policy": metrics.get("policy"),
        "n": metrics.get("n_tasks", 0),
        "layers": flat(layers, "cumulative"),
        "conditional": flat(layers, "conditional"),
        "by_category": {
            category: {
                "n": group.get("n", 0),
                "layers": flat(group.get("layers") or {}, "cumulative"),
                "conditional": flat(group.get("layers") or {}, "conditional"),
            }
            for category, group in (metrics.get("by_category") or {}).items()
        },
        "disagreements": list(metrics.get("disagreements") or []),
        **{
            key: metrics[key]
            for key in (
                "mutation",
                "thresholds",
                "reference_checker",
                "gating",
                "bfcl_leaderboard",
                "traces",
                "deviation",
                "incidents",
                "exec_outcomes",
            )
            if key in metrics
        },
        "detail": dict(metrics),
    }
