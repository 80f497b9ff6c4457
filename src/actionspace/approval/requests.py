"""Approval requests: a held call with its preview, and the decision bound to its argument digest.

A request is bound to ``(run_id, tool name@version, args_digest)``. Approving it lets exactly that
call run, once: the same tool with any other argument is another digest and needs its own
approval. Decisions expire; an expired approval is not honoured.

A request filed by the approval gate also records the definition hash of the tool as it was
shown (:attr:`ApprovalRequest.definition`): a decision stands only for that definition, so a tool
whose description, schemas or annotations changed under the same version label needs an approval
of its own. A request without one (stored before it was recorded) is judged as before.

A request also records the information-flow label of the call it holds (:data:`LABEL`: the run's
context joined with the labels of the call's inputs, ``Label.to_dict()`` as trace events carry
it), so whoever shows the request can tell who may read its values without waiting for the run's
trace to be written. A request without one (stored before it was recorded) is judged by its run.

A pending request is held for one proposer (id and tenant) under one approval rule and for one
definition (:attr:`ApprovalRequest.pending_key`): a store hands the pending request of a call back
to the same proposer proposing it again, never to another one, who files a request of its own.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal, Protocol, runtime_checkable

__all__ = [
    "DEFINITION",
    "LABEL",
    "ApprovalRequest",
    "ApprovalStatus",
    "ApprovalStore",
    "ListsApproved",
    "ListsOfRuns",
    "ListsTenantRequests",
    "holder",
    "new_request_id",
    "proposer_of",
]

ApprovalStatus = Literal["pending", "approved", "denied", "expired", "consumed"]

DEFINITION: Final = "definition_hash"
"""Key of a request's ``details`` holding the definition hash of the tool the request was filed for
(``discovery.runs.definition_hash``: everything shown of the tool, not its version label)."""


LABEL: Final = "label"
"""Key of a request's ``details`` holding the label of the call it holds (``Label.to_dict()``): its
values may be shown only to a viewer who may read that label (``policy.labels.may_read``)."""


def new_request_id() -> str:
    return f"apr_{uuid.uuid4().hex[:16]}"


def proposer_of(principal: Mapping[str, Any]) -> tuple[str, str | None]:
    """(id, tenant) of a recorded principal, as recorded: an empty id is no other principal's."""
    ident, tenant = principal.get("id"), principal.get("tenant")
    return "" if ident is None else str(ident), None if tenant is None else str(tenant)


def holder(details: Mapping[str, Any]) -> str:
    """Who a request with these ``details`` is held for, as text a store can index: its
    ``approval_rule``, the (id, tenant) of its ``proposed_by`` (null when not known) and, when
    recorded, the :data:`DEFINITION` it was filed for (a request filed without one keeps the
    two-element form it was stored with).

    ASCII JSON, so any text of an id, tenant or rule is stored as it is in every store.
    """
    recorded = details.get("proposed_by")
    who = list(proposer_of(recorded)) if isinstance(recorded, Mapping) else None
    held_for: list[Any] = [details.get("approval_rule"), who]
    definition = details.get(DEFINITION)
    if isinstance(definition, str):
        held_for.append(definition)
    return json.dumps(held_for, ensure_ascii=True, separators=(",", ":"), default=repr)


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequest:
    """A call waiting for (or carrying) a human decision."""

    id: str
    run_id: str
    node_id: str
    tool: str
    """``name@version``."""
    args_digest: str
    arguments: Mapping[str, Any]
    """The normalized call, defaults filled in: exactly what will run."""
    provenance: Mapping[str, str]
    """Per argument: ``user``, ``tool_result:<call>``, ``model_inferred`` or ``default``."""
    effects: Sequence[str] = ()
    """The resources the call would write (its ``writes`` templates filled in)."""
    reason: str = ""
    details: Mapping[str, Any] = field(default_factory=dict)
    status: ApprovalStatus = "pending"
    created_at: float = field(default_factory=time.time)
    decided_at: float | None = None
    decided_by: str | None = None
    decision_reason: str | None = None
    expires_at: float | None = None
    """Unix seconds after which an approval is no longer honoured."""

    @property
    def binding(self) -> tuple[str, str, str]:
        return (self.run_id, self.tool, self.args_digest)

    @property
    def pending_key(self) -> tuple[str, str, str, str]:
        """The binding and :func:`holder`: at most one request per key is pending."""
        return (self.run_id, self.tool, self.args_digest, holder(self.details))

    @property
    def definition(self) -> str | None:
        """The definition hash of the tool this request was filed for; None when not recorded (a
        request stored before it was, or filed by a caller that did not know it)."""
        value = self.details.get(DEFINITION)
        return value if isinstance(value, str) else None

    def evolve(self, **changes: Any) -> ApprovalRequest:
        return replace(self, **changes)

    def honoured(self, now: float | None = None) -> bool:
        """True for an approval that has not expired and not been used."""
        now = time.time() if now is None else now
        return self.status == "approved" and (self.expires_at is None or now < self.expires_at)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "run_id": self.run_id,
            "node_id": self.node_id,
            "tool": self.tool,
            "args_digest": self.args_digest,
            "arguments": dict(self.arguments),
            "provenance": dict(self.provenance),
            "effects": list(self.effects),
            "reason": self.reason,
            "details": dict(self.details),
            "status": self.status,
            "created_at": self.created_at,
            "decided_at": self.decided_at,
            "decided_by": self.decided_by,
            "decision_reason": self.decision_reason,
            "expires_at": self.expires_at,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ApprovalRequest:
        return cls(
            id=str(data["id"]),
            run_id=str(data["run_id"]),
            node_id=str(data["node_id"]),
            tool=str(data["tool"]),
            args_digest=str(data["args_digest"]),
            arguments=dict(data.get("arguments") or {}),
            provenance=dict(data.get("provenance") or {}),
            effects=tuple(data.get("effects") or ()),
            reason=str(data.get("reason", "")),
            details=dict(data.get("details") or {}),
            status=data.get("status", "pending"),
            created_at=float(data["created_at"]),
            decided_at=data.get("decided_at"),
            decided_by=data.get("decided_by"),
            decision_reason=data.get("decision_reason"),
            expires_at=data.get("expires_at"),
        )


@runtime_checkable
class ApprovalStore(Protocol):
    """Durable approval requests; same store URL as the ledger and the trace."""

    def create(self, request: ApprovalRequest) -> ApprovalRequest:
        """Store a pending request, or return the pending one with the same ``pending_key`` (the same
        call, approval rule and proposer); another proposer's pending request is never returned."""
        ...

    def get(self, request_id: str) -> ApprovalRequest | None: ...

    def find(self, run_id: str, tool: str, args_digest: str) -> list[ApprovalRequest]:
        """Requests with this binding, newest first."""
        ...

    def list(self, *, status: str | None = None, limit: int = 100) -> list[ApprovalRequest]: ...

    def update(
        self, request_id: str, expected: Sequence[str], request: ApprovalRequest
    ) -> ApprovalRequest | None:
        """Compare-and-set on ``status``; None when it had moved."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class ListsApproved(Protocol):
    """An approval store that lists approvals by whether they have expired, in its query (every
    store shipped here does): a listing of valid or of expired approvals is exact however many
    approvals the other way are newer. Expiry is read, never written: a store keeps such a request
    ``approved``."""

    def list_approved(self, *, expired: bool, now: float, limit: int = 100) -> list[ApprovalRequest]:
        """At most ``limit`` requests stored ``approved``, newest first: those whose ``expires_at``
        has passed at ``now`` (``now >= expires_at``) when ``expired``, else those it has not
        (no ``expires_at``, or ``now < expires_at``)."""
        ...


@runtime_checkable
class ListsOfRuns(Protocol):
    """An approval store that lists the requests of given runs in its query (every store shipped
    here does): what a run waits for is exact however many requests other runs hold."""

    def list_of_runs(self, run_ids: Sequence[str], *, status: str | None = None) -> list[ApprovalRequest]:
        """Every request of the runs ``run_ids`` (only those in ``status`` if given), newest first."""
        ...


@runtime_checkable
class ListsTenantRequests(Protocol):
    """An approval store that lists one tenant's requests in its query (every store shipped here
    does, once it knows the tenants of runs): a quiet tenant's page is found behind any number of
    other tenants' requests, at the cost of a page.

    A request's tenant is its proposer's (``details["proposed_by"]["tenant"]``, when recorded;
    null: none), else that of its run (of the run's first ``run_started``)."""

    def tenant_requests(
        self,
        tenant: str | None,
        *,
        status: str | None = None,
        limit: int = 100,
        expired: bool | None = None,
        now: float = 0.0,
    ) -> list[ApprovalRequest] | None:
        """At most ``limit`` requests of ``tenant`` (None: of no tenant), newest first: those in
        ``status`` if given; with ``status="approved"`` and ``expired`` given, only those whose
        ``expires_at`` has passed at ``now`` (``expired``) or has not (as ``list_approved``).
        None when the store cannot tell the tenants of its requests (its runs' trace is elsewhere):
        the caller filters another listing."""
        ...
