"""The confidence gate of a session (``Session.gate``): a stage after validation that holds back,
as ``needs_approval``, a call its policy does not let run at the confidence the caller gave.

The gate judges whether a call may *run*. A call whose action the ledger already holds in its
run (committed, or sent and its outcome in doubt: the same node, proposed again in its turn) runs
nothing whatever the confidence: it goes on, to be replayed or answered ``unknown_commit``, and
the ``gate_decided`` event says the ledger answered it (``answered_by: "ledger"``). Asking the
user to confirm an action that was already sent would mislead both of them.
"""

from __future__ import annotations

import contextlib
import contextvars
import weakref
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from actionspace.errors import ActionError
from actionspace.ledger.entries import UNSETTLED, LedgerStore
from actionspace.pipeline import CallInput, Draft, Engine

__all__ = ["Confidence", "ConfidenceGate", "GatePolicy", "gating"]

Confidence = float | Mapping[str, float] | None
"""One confidence for every call of a model output, or call id → confidence; None: not given."""

_HELD_BY_LEDGER = frozenset({"committed", *UNSETTLED})
"""Ledger states of an action a new proposal of which is answered from the ledger, never sent."""


class GatePolicy(Protocol):
    """Decides what to do with a call from its confidence and its tool's effect and risk."""

    def decide(self, confidence: float, effect: str, risk: str = "low") -> str: ...


class ConfidenceGate:
    """The stage (after validation) that applies a session's :class:`GatePolicy`; one per engine."""

    def __init__(self, ledger: LedgerStore) -> None:
        self.ledger = ledger

    def __call__(self, inp: CallInput, draft: Draft) -> ActionError | None:
        entry = _GATING.get(None)
        if entry is None or entry[0] != inp.run.run_id or draft.spec is None:
            return None
        _, policy, given = entry
        spec = draft.spec
        value = given.get(inp.call.id or "") if isinstance(given, Mapping) else given
        risk = spec.risk or "low"
        event: dict[str, Any] = {"tool": spec.key, "effect": spec.effect, "risk": risk}
        if value is None:
            inp.rec.add("gate_decided", {**event, "confidence": None, "decision": "execute"})
            return None
        decision = policy.decide(float(value), spec.effect, risk)
        threshold = getattr(policy, "threshold", None)
        if callable(threshold):
            event["threshold"] = threshold(spec.effect, risk)
        decided = {**event, "confidence": float(value), "decision": decision}
        if decision != "execute" and self._answered_by_ledger(inp, draft):
            decided["answered_by"] = "ledger"
            decision = "execute"
        inp.rec.add("gate_decided", decided)
        if decision == "execute":
            return None
        ask = decision == "ask_user"
        return ActionError.of(
            "needs_approval",
            f"confidence {float(value):.2f} is too low to run {spec.name} ({spec.effect}, {spec.risk} risk): "
            + ("confirm with the user first" if ask else "gather more evidence, then propose again"),
            recovery=("confirm_with_user",) if ask else ("observe_more", "propose_again"),
            details={"gate": decision, "confidence": float(value), **event},
        )

    def _answered_by_ledger(self, inp: CallInput, draft: Draft) -> bool:
        """Whether the ledger holds this call's action, committed or in doubt, so it runs nothing.
        A side-effecting call's gates run off the event loop when the stores are not in memory."""
        if draft.spec is None or not draft.spec.has_side_effects:
            return False
        held = self.ledger.get_node(inp.run.run_id, draft.node)
        return held is not None and held.state in _HELD_BY_LEDGER


@contextlib.contextmanager
def gating(
    engine: Engine, ledger: LedgerStore, run_id: str, policy: GatePolicy, confidence: Confidence
) -> Iterator[None]:
    """Within it, the calls of run ``run_id`` handled in this context are judged by ``policy`` at
    ``confidence``; the engine's gate stage is added on first use."""
    if engine not in _GATES:
        stage = _GATES[engine] = ConfidenceGate(ledger)
        engine.add_stage(stage)
    # In this handling's context, not per run: another session of the run neither lifts it nor meets it
    token = _GATING.set((run_id, policy, confidence))
    try:
        yield
    finally:
        _GATING.reset(token)


_GATES: weakref.WeakKeyDictionary[Engine, ConfidenceGate] = weakref.WeakKeyDictionary()
_GATING: contextvars.ContextVar[tuple[str, GatePolicy, Confidence] | None] = contextvars.ContextVar("gating")
"""(run id, policy, confidence) in the context (task, thread) of a gated session's handling: only
the calls of that output are judged by it."""
