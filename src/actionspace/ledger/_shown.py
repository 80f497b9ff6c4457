"""What a settled action shows its caller: a stored outcome replayed, a new one shaped.

Kept apart from the commit protocol (:mod:`actionspace.ledger.commit`), which uses them for every
outcome it returns.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from actionspace.errors import ActionError, said_safely
from actionspace.ledger.entries import LedgerEntry
from actionspace.outcomes import Outcome, Succeeded
from actionspace.types import Observation

__all__ = ["noted", "observed", "replay"]

Observe = Callable[[Outcome], Observation]
Fail = Callable[[ActionError], Observation]


def replay(entry: LedgerEntry, fail: Fail) -> Observation:
    """What a repeated call of a settled action gets: the original outcome, never a second send."""
    if entry.state == "committed" and entry.observation is not None:
        obs = Observation.from_dict(entry.observation)
        return Observation(**{**_fields(obs), "diagnostics": {**obs.diagnostics, "replayed": True}})
    if entry.error is not None:
        return fail(ActionError.from_dict(entry.error))
    return fail(ActionError.of("internal", f"ledger entry {entry.key} is {entry.state} without its outcome"))


def noted(obs: Observation, **notes: Any) -> Observation:
    """The observation with how its outcome was established added to ``diagnostics``."""
    return Observation(**{**_fields(obs), "diagnostics": {**obs.diagnostics, **notes}})


def _fields(obs: Observation) -> dict[str, Any]:
    return {name: getattr(obs, name) for name in obs.__dataclass_fields__}


def observed(observe: Observe, outcome: Succeeded) -> Observation:
    """``observe(outcome)`` of a send that committed. When the result cannot be shaped (the
    artifact store failed while keeping a large one, a trim rule or the result's own iterator
    raised), the observation is a note saying so: the effect happened, so the entry commits and a
    new proposal of the action replays the note instead of finding it ``dispatched``."""
    try:
        return observe(outcome)
    except Exception as exc:
        why = f"{type(exc).__name__}: {said_safely(exc, 300)}"
        note = f"the tool succeeded and its effect is committed; its result cannot be shown ({why})"
        return observe(Succeeded(note, outcome.attempts))
