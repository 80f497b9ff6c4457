"""Pydantic AI: a call approved with other arguments (``ToolApproved(override_args=...)``).

Pydantic AI hands the tool the person's arguments in place of the model's, and keeps the model's
call in the message history. The edited call is another action (another argument digest): it is
held on a request of its own, which the answer approves. The request the person was shown for the
model's call (marked deferred for that call, adapters/_pydantic_denials.py, or named by
``GovernedToolset.decide``) is then settled as ``consumed`` by the edited call: the answer was
used, for the edit, recorded under :data:`EDITED` in its details. It is not left pending (listed
forever, and a later denial would refuse an identical call), not denied (which would refuse the
model's call proposed again), and never honoured for the model's arguments: consumed by another
node, with its validity ended, no call of the model's arguments runs on it, and one proposed again
is asked about anew.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from actionspace.adapters._bridge import Bridge
from actionspace.adapters._marks import marks
from actionspace.adapters._pydantic_denials import DEFERRED
from actionspace.approval.requests import ApprovalRequest

__all__ = ["EDITED", "model_arguments", "supersede"]

EDITED: Final = "edited"
"""Key of a consumed request's ``details``: ``{"request_id": ..., "arguments": ...}``, the edited
call's request and the arguments the person gave in place of the model's."""


def model_arguments(messages: Sequence[Any], call_id: str | None) -> tuple[bool, Any]:
    """(found, arguments) of the model's call ``call_id`` as its message holds them (the newest
    message holding it); (False, None) when no message does."""
    if call_id is None:
        return False, None
    for message in reversed(messages):
        for part in getattr(message, "parts", ()):
            if getattr(part, "part_kind", None) == "tool-call" and part.tool_call_id == call_id:
                return True, part.args
    return False, None


def supersede(
    bridge: Bridge,
    held: str,
    conversation: str | None,
    call_id: str | None,
    decided: ApprovalRequest | None,
) -> None:
    """Settle as consumed by the edited call held on ``held`` the request shown for the model's
    call ``call_id`` of ``conversation``: ``decided`` (the one ``decide`` approved) and any still
    pending that was deferred for that call. Blocking (store I/O); best effort: a store that fails
    leaves such a request as it was (pending: decide it in ``rt.approvals``)."""
    try:
        ran = bridge.rt.approvals.get(held)
        if ran is None:
            return
        mark = None if call_id is None else f"{conversation or ''}:{call_id}"
        shown = _shown(bridge, ran, mark, decided)
        for request in shown:
            _consume(bridge, request, ran)
    except Exception:  # the store failed: what was not settled stays as it was
        return


def _shown(
    bridge: Bridge, ran: ApprovalRequest, mark: str | None, decided: ApprovalRequest | None
) -> list[ApprovalRequest]:
    """The requests of the model's call: other than ``ran``'s call, in its run, of its tool."""
    found: dict[str, ApprovalRequest] = {}
    if decided is not None:
        found[decided.id] = decided
    if mark is not None:
        for request in bridge.rt.approvals.of_runs([ran.run_id], status="pending"):
            if mark in marks(request, DEFERRED):
                found[request.id] = request
    return [
        r
        for r in found.values()
        if r.id != ran.id
        and r.run_id == ran.run_id
        and r.tool == ran.tool
        and r.args_digest != ran.args_digest
    ]


def _consume(bridge: Bridge, request: ApprovalRequest, ran: ApprovalRequest) -> None:
    now = bridge.rt.approvals.clock.time()
    edit: Mapping[str, Any] = {"request_id": ran.id, "arguments": dict(ran.arguments)}
    pending = request.status == "pending"
    reason = f"approved with edited arguments ({ran.id})"
    consumed = request.evolve(
        status="consumed",
        node_id=ran.node_id,  # consumed by the node that ran: the model's own node never replays on it
        details={**request.details, EDITED: dict(edit)},
        decided_by=ran.decided_by if pending else request.decided_by,
        decided_at=now if pending else request.decided_at,
        decision_reason=reason if pending else request.decision_reason,
        expires_at=now,  # nothing more runs on it
    )
    stored = bridge.rt.approvals.store.update(request.id, ("pending", "approved"), consumed)
    if stored is None:  # decided meanwhile (by a person in rt.approvals): theirs stands
        return
    event = {"request_id": request.id, "status": "consumed", "by": stored.decided_by, EDITED: ran.id}
    bridge.rt.record(request.run_id, "approval_decided", event)
