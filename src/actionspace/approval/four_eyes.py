"""The four-eyes rule: the principal that proposed a held call may not approve it (opt-in).

Separation of duties: a principal that may both start runs and decide approvals (the single admin
token of ``actionspace serve`` holds every scope) could otherwise approve a call its own run
proposed, so the approval would be one party's word. Under this rule an approval must come from
another principal. Principals are compared by ``id``: the ``id`` of the request's recorded
``proposed_by`` against the deciding principal's ``id`` (exact text; tenants are not compared, so
an equal id refuses in any tenant). A request whose proposer was not recorded (or was recorded
without an id) cannot show that the approver is someone else and is refused too.

Denying stays open to the proposer: withdrawing one's own call lets nothing run.

The rule tells principals apart, not people: one person holding two tokens of two principals is
outside what it can see. The service applies it with ``create_app(..., distinct_approver=True)``
(``actionspace serve --distinct-approver``); the command line ``actionspace approvals approve --by
NAME`` refuses a ``NAME`` equal to the recorded proposer's id unless given ``--allow-own-approval``,
and with ``--distinct-approver`` applies this rule whole (one line and exit 2 when refused); code
deciding through ``rt.approvals`` wraps it in :class:`DistinctApprover`.
"""

from __future__ import annotations

from collections.abc import Mapping

from actionspace.approval.gate import Approvals
from actionspace.approval.requests import ApprovalRequest, proposer_of
from actionspace.errors import ActionError, ApprovalRefused

__all__ = ["ApprovalRefused", "DistinctApprover", "refused_approval"]


def refused_approval(request: ApprovalRequest, by: str) -> ActionError | None:
    """``permission_denied`` when ``by`` (a principal id) may not approve ``request`` under the
    four-eyes rule: it is the id of the principal that proposed the call, or no proposer id was
    recorded. None when another principal's approval is allowed."""
    recorded = request.details.get("proposed_by")
    proposer = proposer_of(recorded)[0] if isinstance(recorded, Mapping) else ""
    if proposer and proposer != by:
        return None
    why = (
        f"principal {by!r} proposed this call and may not approve it"
        if proposer
        else "the request does not record who proposed the call, so no approver can be shown to be another"
    )
    return ActionError.of(
        "permission_denied",
        f"approval of request {request.id} refused: {why} (four-eyes rule: another principal must approve;"
        " denying it stays allowed)",
        recovery=("request_authorization",),
        details={"request_id": request.id, "rule": "distinct_approver", "principal": by},
    )


class DistinctApprover:
    """``rt.approvals`` under the four-eyes rule: :meth:`approve` raises :class:`ApprovalRefused`
    for the proposer's own approval; listing, reading and denying are those of the wrapped
    :class:`~actionspace.approval.gate.Approvals`."""

    def __init__(self, approvals: Approvals) -> None:
        self.approvals = approvals

    def list(self, status: str | None = "pending", *, limit: int = 100) -> list[ApprovalRequest]:
        return self.approvals.list(status, limit=limit)

    def get(self, request_id: str) -> ApprovalRequest | None:
        return self.approvals.get(request_id)

    def approve(
        self, request_id: str, *, by: str, reason: str | None = None, ttl_s: float | None = 3600.0
    ) -> ApprovalRequest:
        """As :meth:`Approvals.approve`; raises :class:`ApprovalRefused` (nothing recorded, the
        request stays pending) when ``by`` proposed the call, or its proposer is not recorded.
        Raises ``KeyError`` for an unknown request, as the wrapped approvals do."""
        request = self.approvals.get(request_id)
        if request is None:
            raise KeyError(f"no approval request {request_id!r}")
        refused = refused_approval(request, by)
        if refused is not None:
            raise ApprovalRefused(refused)
        return self.approvals.approve(request_id, by=by, reason=reason, ttl_s=ttl_s)

    def deny(self, request_id: str, *, by: str, reason: str | None = None) -> ApprovalRequest:
        """As :meth:`Approvals.deny`: the proposer may withdraw its own call."""
        return self.approvals.deny(request_id, by=by, reason=reason)
