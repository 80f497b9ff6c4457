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

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from actionspace._unicode import text_for_postgres
from actionspace.adapters._bridge import Bridge
from actionspace.adapters._marks import marks
from actionspace.adapters._pydantic_denials import DEFERRED
from actionspace.approval.requests import ApprovalRequest
from actionspace.types import Observation

__all__ = ["EDITED", "model_arguments", "supersede", "unheld"]

EDITED: Final = "edited"
"""Key of a consumed request's ``details``: ``{"request_id": ..., "arguments": ...}``, the edited
call's request (None: the edit was never held on one) and the arguments the person gave in place of
the model's; with ``"refused": {"category", "message"}`` when the runtime refused the edit."""

_KEPT_CHARS: Final = 2000
"""Longest JSON text of a refused edit's arguments kept as they are (longer: the text, cut)."""


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


def unheld(
    bridge: Bridge,
    obs: Observation,
    edit: Any,
    conversation: str | None,
    call_id: str | None,
    decided: ApprovalRequest | None,
) -> None:
    """Settle as consumed the request shown for the model's call ``call_id`` of ``conversation``
    (``decided``, the one ``decide`` approved, and any still pending deferred for that call) when
    the person's edit of it (arguments ``edit``) was never held: ``obs`` is what became of the
    edit, which ran (no approval of its own needed) or was refused. Blocking (store I/O); best
    effort: a store that fails leaves such a request as it was (decide it in ``rt.approvals``)."""
    try:
        run_id = bridge.session.run_id
        found: dict[str, ApprovalRequest] = {}
        if decided is not None and decided.run_id == run_id:
            found[decided.id] = decided
        if call_id is not None:
            mark = f"{conversation or ''}:{call_id}"
            for request in bridge.rt.approvals.of_runs([run_id], status="pending"):
                if mark in marks(request, DEFERRED):
                    found[request.id] = request
        for request in found.values():
            if request.tool.rpartition("@")[0] == obs.tool:
                _end(bridge, request, obs, edit)
    except Exception:  # the store failed: what was not settled stays as it was
        return


def _end(bridge: Bridge, request: ApprovalRequest, obs: Observation, edit: Any) -> None:
    now = bridge.rt.approvals.clock.time()
    record: dict[str, Any] = {"request_id": None, "arguments": _kept(edit)}
    event: dict[str, Any] = {"request_id": request.id, "status": "consumed", EDITED: None}
    if obs.error is not None:
        category = obs.error.category
        record["refused"] = {"category": category, "message": text_for_postgres(obs.error.message[:300])}
        event["refused"] = category
        reason = f"approved with edited arguments, which ended {category}: nothing ran on this answer"
    else:
        reason = "approved with edited arguments, which needed no approval of their own"
    pending = request.status == "pending"
    consumed = request.evolve(
        status="consumed",
        details={**request.details, EDITED: record},
        decided_by=bridge.approver if pending else request.decided_by,
        decided_at=now if pending else request.decided_at,
        decision_reason=reason if pending else request.decision_reason,
        expires_at=now,  # nothing more runs on it: the model's own call proposed again is asked anew
    )
    stored = bridge.rt.approvals.store.update(request.id, ("pending", "approved"), consumed)
    if stored is None:  # decided meanwhile (by a person in rt.approvals): theirs stands
        return
    bridge.rt.record(request.run_id, "approval_decided", {**event, "by": stored.decided_by})


def _kept(edit: Any) -> Any:
    """``edit`` as a request's details keep it: as given when it is JSON of at most
    :data:`_KEPT_CHARS` characters, else its text (JSON, or its repr), cut there."""
    try:
        text = json.dumps(edit, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return text_for_postgres(repr(edit)[:_KEPT_CHARS])
    return edit if len(text) <= _KEPT_CHARS else text_for_postgres(text[:_KEPT_CHARS])
