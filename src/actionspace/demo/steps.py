"""The timeline of a plan-based scenario: one row per plan node (or outside action), in plan order."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from actionspace.plan import PlanResult
from actionspace.types import Observation

__all__ = ["PlanStep", "steps_of", "summarize"]

_DETAIL_CHARS = 160


@dataclass
class PlanStep:
    """What one node of one plan did, as the scenario's timeline shows it."""

    index: int
    plan: str
    """Which plan of the scenario (``verify``, ``write`` …); ``outside`` for an action of another actor."""
    node: str
    tool: str
    intent: str
    status: str
    category: str | None
    detail: str
    next_move: str
    observation: dict[str, Any] = field(repr=False, default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.index,
            "plan": self.plan,
            "node": self.node,
            "tool": self.tool,
            "intent": self.intent,
            "status": self.status,
            "category": self.category,
            "detail": self.detail,
            "next_move": self.next_move,
            "observation": self.observation,
        }


def summarize(obs: Observation) -> str:
    """One line: the error message (and its most useful field), or the data."""
    err = obs.error
    if err is None:
        text = str(obs.data)
    else:
        text = err.message
        if err.current_version is not None:
            text += f" | current_version {err.current_version}"
        if err.field_errors and err.field_errors[0].message not in text:
            text += " | " + ", ".join(f"{f.path}: {f.message}" for f in err.field_errors)
        if err.details.get("attempts"):
            text += f" | attempts {err.details['attempts']}"
    return text if len(text) <= _DETAIL_CHARS else text[: _DETAIL_CHARS - 3] + "..."


def steps_of(
    result: PlanResult,
    *,
    plan: str,
    start: int,
    intents: Mapping[str, str],
    next_moves: Mapping[str, str],
    describe: Callable[[Observation], str | None] | None = None,
) -> list[PlanStep]:
    """One step per node of ``result``, in the order the nodes were listed in ``intents``.

    ``next_moves`` maps a node id (or an error category) to what happens next. ``describe`` may
    word a successful observation for people (None falls back to :func:`summarize`).
    """
    out: list[PlanStep] = []
    for offset, node in enumerate(intents):
        obs = result.nodes[node]
        category = obs.error.category if obs.error else None
        out.append(
            PlanStep(
                index=start + offset,
                plan=plan,
                node=node,
                tool=obs.tool,
                intent=intents[node],
                status=obs.status,
                category=category,
                detail=(describe(obs) if describe is not None and obs.ok else None) or summarize(obs),
                next_move=next_moves.get(node, next_moves.get(category or "", "continue")),
                observation=obs.to_dict(),
            )
        )
    return out
