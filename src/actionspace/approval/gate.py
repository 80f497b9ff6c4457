"""The approval gate: a ``needs_approval`` verdict either finds its decision or files a request."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from actionspace._canonical import args_digest
from actionspace._unicode import text_for_postgres
from actionspace.approval.requests import (
    DEFINITION,
    LABEL,
    ApprovalRequest,
    ApprovalStore,
    ListsApproved,
    ListsOfRuns,
    new_request_id,
    proposer_of,
)
from actionspace.catalog.spec import ToolSpec
from actionspace.errors import ActionError
from actionspace.policy.labels import Label
from actionspace.types import SYSTEM_CLOCK, Clock
from actionspace.validation.items import preview_items
from actionspace.validation.verdicts import NeedsApproval

__all__ = ["Answered", "Approvals", "Keep", "file_request", "find_decision", "gate", "held"]

Record = Callable[[str, Mapping[str, Any]], None]
Answered = Callable[[], bool]
"""Whether the ledger answers the call from its record (committed, ``unknown_commit``, failed for
good), sending nothing; read only for a repeat under an approval that has expired."""
Keep = Callable[[], None]
"""Stores what the call recorded so far (through its ``Record``) where another process reads it,
durably; raises when it could not."""

_CHANGED = "definition_changed_since"
"""Key of a request's details naming the request of the same call filed for another definition."""


def _effects(spec: ToolSpec, arguments: Mapping[str, Any]) -> list[str]:
    out = []
    for template in spec.writes:
        try:
            out.append(template.format(**arguments))
        except (KeyError, IndexError, ValueError):
            out.append(template)
    return out


def gate(
    store: ApprovalStore,
    *,
    run_id: str,
    node_id: str,
    spec: ToolSpec,
    arguments: Mapping[str, Any],
    provenance: Mapping[str, str],
    verdict: NeedsApproval,
    record: Record,
    proposed_by: Mapping[str, Any] | None = None,
    clock: Clock = SYSTEM_CLOCK,
    definition: str | None = None,
    label: Label | None = None,
    keep: Keep | None = None,
    answered: Answered | None = None,
) -> ApprovalRequest | ActionError:
    """The approved request this exact call may run under (now consumed), or the error to return.

    An approval binds ``(run, name@version, argument digest)``, the principal who proposed the
    call (``proposed_by``: its id and tenant) and the tool as it was shown (``definition``: its
    definition hash, ``discovery.runs.definition_hash``; None when not known): any change of
    argument is another digest, so the changed call needs its own approval, another principal's
    call needs its own, and so does the call of a tool whose definition changed under the same
    version label. Expired approvals are not honoured, and an approval is used once: a repeat of
    the node it let through runs again only as the ledger's replay (a call with side effects),
    never as a second run of a read. Once the approval has expired, such a repeat goes on only when
    ``answered`` (the ledger of the call's idempotency key) says the ledger answers it from its
    record, sending nothing; a repeat the ledger would send (its attempt failed, or a later gate
    stopped it before it was sent) asks again. ``label``: the call's label, recorded in a request it
    files; ``keep``: what stores the call's events before a request is filed (see :func:`file_request`).
    """
    digest = args_digest(dict(arguments))
    found = find_decision(
        store,
        run_id=run_id,
        node_id=node_id,
        tool=spec.key,
        digest=digest,
        clock=clock,
        replays=spec.has_side_effects,
        proposer=proposed_by,
        definition=definition,
        answered=answered,
    )
    if found is not None:
        return found
    full_provenance = {name: provenance.get(name, "model_inferred") for name in arguments}
    request = ApprovalRequest(
        id=new_request_id(),
        run_id=run_id,
        node_id=node_id,
        tool=spec.key,
        args_digest=digest,
        arguments=dict(arguments),
        provenance=full_provenance,
        effects=tuple(_effects(spec, arguments)),
        reason=verdict.reason,
        details={**verdict.details, **preview_items(spec, arguments)},
    )
    return file_request(
        store,
        request,
        record,
        reason=verdict.reason,
        proposed_by=proposed_by,
        definition=definition,
        label=label,
        keep=keep,
    )


def find_decision(
    store: ApprovalStore,
    *,
    run_id: str,
    node_id: str,
    tool: str,
    digest: str,
    rule: str | None = None,
    record: Record | None = None,
    effects: bool = True,
    clock: Clock = SYSTEM_CLOCK,
    replays: bool = True,
    proposer: Mapping[str, Any] | None = None,
    definition: str | None = None,
    answered: Answered | None = None,
) -> ApprovalRequest | ActionError | None:
    """What the requests already filed for this exact call decide, or None when there is none yet.

    Returns the approved request the call may run under (consumed now; with ``replays``, a consumed
    one for the same node is returned as it is, so the ledger replays the action),
    ``permission_denied`` for a denied request, ``needs_approval`` for one still pending, or
    ``transient`` (nothing sent) when the store does not answer. ``rule``: only requests filed for
    that ``approval_rule`` count (None: those filed without one, by the approval gate), so one
    rule's decision never stands in for another's. ``record``: when given, consuming an approval is
    traced as ``approval_decided``. ``effects``: as in :func:`held`. ``clock``: where expiry reads
    the time. ``replays``: the call goes through the ledger (it has side effects), which answers a
    repeat of a node with what the node did; without it a consumed approval approves nothing more.
    ``answered``: whether the ledger answers this node from its record, sending nothing; a consumed
    approval that has expired is returned only when it does (without ``answered``, never), so a
    node whose send failed, or was never made, is not sent under an expired approval: it asks again.
    ``proposer`` (``Principal.to_dict()`` of the caller): only requests proposed by the same
    principal (id and tenant) count, so a decision never carries over to another principal's call.
    ``definition`` (the tool's definition hash): only requests filed for that definition count, so a
    decision never carries over to a tool changed since (a request that recorded none, or a
    ``definition`` of None, is judged as before).
    """
    now = clock.time()
    try:
        filed = store.find(run_id, tool, digest)
    except Exception as exc:  # the store did not answer (locked, gone): nothing is sent
        return ActionError.unsent("the approval store could not be read", exc)
    # A consumed approval of this very node first: a repeat of an action that ran is the ledger's
    # replay, never held by (nor consuming) the request of an identical call of another node.
    filed = sorted(filed, key=lambda r: not (replays and r.status == "consumed" and r.node_id == node_id))
    for request in filed:
        if request.details.get("approval_rule") != rule or not _same_proposer(request, proposer):
            continue
        if not _same_definition(request, definition):
            continue
        if request.status == "consumed":
            if replays and request.node_id == node_id and _replays(request, now, answered):
                return request  # a repeat of the very action it approved: the ledger replays it
            continue
        if request.honoured(now):
            taken = request.evolve(status="consumed", node_id=node_id)
            try:
                used = store.update(request.id, ("approved",), taken)
            except Exception as exc:  # consumed or not, asking again finds it for this very node
                return ActionError.unsent("the approval store could not consume the approval", exc)
            if used is not None:
                if record is not None:
                    consumed = {"request_id": used.id, "status": "consumed", "by": used.decided_by}
                    record("approval_decided", consumed)
                return used
            # another caller (another process resuming the run) consumed it since it was read
            try:
                now_is = store.get(request.id)
            except Exception as exc:
                return ActionError.unsent("the approval store could not be read", exc)
            if now_is is not None and now_is.status == "consumed" and replays and now_is.node_id == node_id:
                return now_is  # for this very action: the ledger lets one of the two send it
        elif request.status == "denied":
            return ActionError.of(
                "permission_denied",
                f"denied by {request.decided_by}: {request.decision_reason or 'no reason given'}",
                details={"request_id": request.id, "decided_by": request.decided_by},
            )
        elif request.status == "pending":
            return held(request, effects=effects)
    return None


def _replays(request: ApprovalRequest, now: float, answered: Answered | None) -> bool:
    """True when a repeat of the node ``request`` (consumed) approved may go on to the ledger: the
    approval is still valid, or the ledger answers the node from its record (``answered``)."""
    if request.expires_at is None or now < request.expires_at:
        return True
    if answered is None:
        return False
    try:
        return answered()
    except Exception:  # the ledger did not answer: the call might be sent, so it is not let through
        return False


def _same_proposer(request: ApprovalRequest, proposer: Mapping[str, Any] | None) -> bool:
    """True when ``request`` was proposed by ``proposer`` (or either of them is not known)."""
    recorded = request.details.get("proposed_by")
    if proposer is None or not isinstance(recorded, Mapping):
        return True
    return proposer_of(recorded) == proposer_of(proposer)


def _same_definition(request: ApprovalRequest, definition: str | None) -> bool:
    """True when ``request`` was filed for the tool as ``definition`` describes it (or either of
    them is not known)."""
    return definition is None or request.definition is None or request.definition == definition


def _earlier_definition(
    store: ApprovalStore,
    request: ApprovalRequest,
    definition: str,
    rule: str | None,
    proposer: Mapping[str, Any] | None,
) -> str | None:
    """The id of the newest request of the same call, rule and proposer filed for another
    definition of the tool; None when there is none (or the store does not answer: the call is
    held all the same, only its message names no earlier request)."""
    try:
        filed = store.find(request.run_id, request.tool, request.args_digest)
    except Exception:
        return None
    for earlier in filed:
        same = earlier.details.get("approval_rule") == rule and _same_proposer(earlier, proposer)
        if same and not _same_definition(earlier, definition):
            return earlier.id
    return None


def file_request(
    store: ApprovalStore,
    request: ApprovalRequest,
    record: Record,
    *,
    reason: str,
    rule: str | None = None,
    effects: bool = True,
    proposed_by: Mapping[str, Any] | None = None,
    definition: str | None = None,
    label: Label | None = None,
    keep: Keep | None = None,
) -> ActionError:
    """Store ``request`` as pending, trace ``approval_requested`` and return the error that holds the
    call (``transient``, nothing sent, when the store does not take it).

    The store may answer with the pending request the same proposer filed for the same call under
    the same rule; the error names that one (another proposer's request is never named).
    ``reason`` is what the event records; ``rule``, when given, is recorded as well.
    ``effects``: as in :func:`held`. ``proposed_by`` (``Principal.to_dict()``) is kept in the
    request's details: a call resumed after the decision runs as that principal, re-authorized.
    ``definition`` (the tool's definition hash) is kept there too (:data:`DEFINITION`): only a call
    of the tool as it was shown then runs under the decision. When a request of the same call was
    filed for another definition, the new one names it (``definition_changed_since``), and so does
    the error. ``label`` (the call's label: the run's context joined with its inputs' labels) is kept
    there as :data:`LABEL`, so the request's values are shown only to viewers who may read it
    however late the run's trace is written.

    ``keep``, when given, makes a request on disk imply its evidence on disk: ``approval_requested``
    is recorded first and ``keep`` stores it with every event the call recorded before (its
    ``proposed``, with the values its arguments derive from), durably, before the request is
    filed. A process killed right after the request is saved so leaves what a later process
    resuming the call judges it on. When ``keep`` fails nothing is filed (``transient``); when the
    store answers with another pending request, ``approval_requested`` is recorded again, naming
    it; when the store fails, the event names a request that was never filed, followed by the
    call's ``transient`` observation.
    """
    details = {k: v for k, v in request.details.items() if k not in (DEFINITION, _CHANGED)}
    if label is not None:
        details[LABEL] = label.to_dict()
    if proposed_by is not None:
        details["proposed_by"] = dict(proposed_by)
    if definition is not None:
        details[DEFINITION] = definition
        earlier = _earlier_definition(store, request, definition, rule, proposed_by)
        if earlier is not None:
            details[_CHANGED] = earlier
    request = request.evolve(details=details)
    requested: dict[str, Any] = {
        "request_id": request.id,
        "tool": request.tool,
        "reason": reason,
        "args_digest": request.args_digest,
        **({DEFINITION: definition} if definition is not None else {}),
        **({"rule": rule} if rule is not None else {}),
    }
    if keep is not None:
        record("approval_requested", requested)
        try:
            keep()
        except Exception as exc:  # its evidence is not stored: a request filed now could not be resumed
            return ActionError.unsent("the trace could not store the call's events before its request", exc)
    try:
        stored = store.create(request)
    except Exception as exc:
        return ActionError.unsent("the approval store could not file the request", exc)
    if keep is None or stored.id != request.id:
        record("approval_requested", {**requested, "request_id": stored.id})
    return held(stored, effects=effects)


def held(request: ApprovalRequest, *, effects: bool = True) -> ActionError:
    """The ``needs_approval`` error for a pending request: its id, the call, its provenance, details.

    ``effects``: include the resources the call would write (default True). The proposer is named
    by id and tenant only: error details are shown to the model, which must not learn the
    principal's scopes (the request itself keeps them, to resume the call as that principal).
    """
    earlier = request.details.get(_CHANGED)
    changed = (
        f" ({request.tool} has changed since request {earlier} was filed: its description, schemas"
        " or annotations are not what was shown then, so this call needs an approval of its own)"
        if isinstance(earlier, str)
        else ""
    )
    return ActionError.of(
        "needs_approval",
        f"held for approval: {request.reason}{changed}",
        details={
            "request_id": request.id,
            "arguments": dict(request.arguments),
            "provenance": dict(request.provenance),
            **({"effects": list(request.effects)} if effects else {}),
            **_shown(request.details),
        },
    )


def _shown(details: Mapping[str, Any]) -> dict[str, Any]:
    """A request's ``details`` as the model may read them: ``proposed_by`` without its scopes."""
    shown = dict(details)
    proposer = shown.get("proposed_by")
    if isinstance(proposer, Mapping):
        shown["proposed_by"] = {k: v for k, v in proposer.items() if k != "scopes"}
    return shown


class Approvals:
    """``rt.approvals``: list pending requests and decide them (the decision is traced)."""

    def __init__(
        self,
        store: ApprovalStore,
        record: Callable[[str, str, Mapping[str, Any]], None],
        *,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.store = store
        self._record = record
        self.clock = clock
        """Where decisions and expiry read the time (see ``actionspace.types.Clock``)."""

    def list_approved(
        self, *, expired: bool, limit: int = 100, now: float | None = None
    ) -> list[ApprovalRequest]:
        """At most ``limit`` approvals, newest first, that have expired at ``now`` (default: by
        :attr:`clock`) when ``expired``, else those still valid; stored ``approved`` either way
        (expiry is not written).

        A store that answers this in its query (:class:`~actionspace.approval.requests.ListsApproved`)
        is exact; another one's newest :data:`_APPROVED_SCAN` approvals are read and filtered.
        """
        now = self.clock.time() if now is None else now
        if isinstance(self.store, ListsApproved):
            return self.store.list_approved(expired=expired, now=now, limit=limit)
        read = self.store.list(status="approved", limit=max(limit, _APPROVED_SCAN))
        return [r for r in read if _expired(r, now) == expired][:limit]

    def of_runs(self, run_ids: Sequence[str], *, status: str | None = None) -> list[ApprovalRequest]:
        """Every request of the runs ``run_ids`` (only those in ``status`` if given), newest first.

        A store that answers this in its query (:class:`~actionspace.approval.requests.ListsOfRuns`)
        is asked for these runs only; another one is read whole, so the answer is exact either way
        however many requests other runs hold.
        """
        ids = [r for r in dict.fromkeys(run_ids) if _storable(r)]  # else no store holds such a run
        if not ids:
            return []
        if isinstance(self.store, ListsOfRuns):
            return self.store.list_of_runs(ids, status=status)
        wanted, n = set(ids), _APPROVED_SCAN
        while len(read := self.store.list(status=status, limit=n)) >= n:
            n *= 4
        return [r for r in read if r.run_id in wanted]

    def list(self, status: str | None = "pending", *, limit: int = 100) -> list[ApprovalRequest]:
        return self.store.list(status=status, limit=limit)

    def get(self, request_id: str) -> ApprovalRequest | None:
        if not _storable(request_id):
            return None  # no store holds such an id: no request has it
        return self.store.get(request_id)

    def approve(
        self, request_id: str, *, by: str, reason: str | None = None, ttl_s: float | None = 3600.0
    ) -> ApprovalRequest:
        """Approve a pending request; the approval expires after ``ttl_s`` seconds (None: never).

        Raises ``ValueError`` for a ``ttl_s`` that is not a positive, finite number (NaN would never
        compare as expired nor as valid; use None for an approval that never expires).
        """
        if ttl_s is not None and not (isinstance(ttl_s, int | float) and 0 < ttl_s < math.inf):
            raise ValueError(f"ttl_s must be a positive, finite number of seconds or None, not {ttl_s!r}")
        now = self.clock.time()
        expires = now + ttl_s if ttl_s is not None else None
        return self._decide(request_id, "approved", by, reason, expires)

    def deny(self, request_id: str, *, by: str, reason: str | None = None) -> ApprovalRequest:
        return self._decide(request_id, "denied", by, reason, None)

    def _decide(
        self, request_id: str, status: str, by: str, reason: str | None, expires: float | None
    ) -> ApprovalRequest:
        from actionspace._crash import point

        for field, text in (("by", by), ("reason", reason)):
            if text is not None and not _storable(text):
                raise ValueError(f"{field} must be text a store can hold (no U+0000, no unpaired surrogate)")
        request = self.get(request_id)
        if request is None:
            raise KeyError(f"no approval request {request_id!r}")
        decided = request.evolve(
            status=status,
            decided_by=by,
            decided_at=self.clock.time(),
            decision_reason=reason,
            expires_at=expires,
        )
        point("during_approval_decision")
        stored = self.store.update(request_id, ("pending",), decided)
        if stored is None:
            current = self.store.get(request_id)
            raise ValueError(f"request {request_id} is {current.status if current else 'gone'}, not pending")
        self._record(
            request.run_id,
            "approval_decided",
            {"request_id": request_id, "status": status, "by": by, "reason": reason},
        )
        return stored


_APPROVED_SCAN = 10_000
"""Most approvals read from a store that does not list by expiry, to fill one listing."""


def _expired(request: ApprovalRequest, now: float) -> bool:
    return request.expires_at is not None and now >= request.expires_at


def _storable(text: object) -> bool:
    """``text`` is a string every store writes as it is (no U+0000, no unpaired surrogate)."""
    return isinstance(text, str) and text_for_postgres(text) == text
