"""Run-time confidence gating, measured: what a gate decided and what it changed.

A session with a gate (``Session.gate``, e.g. a
:class:`~actionspace.evaluation.calibration.ThresholdPolicy`) decides per call from the proposal's
confidence; the decisions are ``gate_decided`` events in the trace and ``StepOutcome.gate`` in the
outcomes. :func:`gate_counts` sums them; :func:`compare_gating` sets an ungated and a gated run of
the same policy on the same tasks side by side:

- ``wrong_writes_avoided``: side-effect incidents of the ungated run that the gated run did not have
  (counted per task, as the difference of incidents, never below zero);
- ``questions_asked``: calls held as ``ask_user`` (confirmation asked);
- ``looked_further``: calls refused as ``observe_more``;
- ``right_calls_held``: held calls of steps whose selection was right (the price of the gate);
- ``p_exec`` / ``p_task`` and incidents of both runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from actionspace.evaluation.metrics import layer_rates
from actionspace.evaluation.outcomes import TaskOutcome

__all__ = ["compare_gating", "gate_counts"]


def gate_counts(outcomes: Sequence[TaskOutcome]) -> dict[str, int]:
    """Decisions over every gated call: ``execute``, ``ask_user``, ``observe_more``, and
    ``right_calls_held`` (held calls in steps whose selection was right)."""
    counts = {"execute": 0, "ask_user": 0, "observe_more": 0, "right_calls_held": 0}
    for outcome in outcomes:
        for step in outcome.steps:
            for decision in step.gate:
                counts[decision] = counts.get(decision, 0) + 1
                if decision != "execute" and step.select_ok is True:
                    counts["right_calls_held"] += 1
    return counts


def _run(outcomes: Sequence[TaskOutcome]) -> dict[str, Any]:
    layers = layer_rates(outcomes)
    return {
        "n": len(outcomes),
        "p_exec": layers["exec"]["cumulative"]["rate"],
        "p_task": layers["task"]["cumulative"]["rate"],
        "incidents": sum(len(o.incidents) for o in outcomes),
    }


def compare_gating(
    ungated: Sequence[TaskOutcome], gated: Sequence[TaskOutcome], *, policy: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The gated run beside the ungated one (see the module docstring); ``policy``: the thresholds."""
    before = {o.task_id: len(o.incidents) for o in ungated}
    avoided = sum(max(0, before.get(o.task_id, 0) - len(o.incidents)) for o in gated)
    counts = gate_counts(gated)
    return {
        "policy": dict(policy or {}),
        "ungated": _run(ungated),
        "gated": _run(gated),
        "wrong_writes_avoided": avoided,
        "questions_asked": counts["ask_user"],
        "looked_further": counts["observe_more"],
        "executed": counts["execute"],
        "right_calls_held": counts["right_calls_held"],
    }
