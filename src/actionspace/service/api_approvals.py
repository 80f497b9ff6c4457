"""``/api/approvals``: the queue of held calls, and the decisions on them.

``?run=`` lists one run's requests, asked of the store for that run only (so a flood of newer
requests of other runs does not hide them). A decision names the token's principal as ``by``, and
answers the decided request as that token's read shows it: its values redacted when the token may
not read them (a label it lacks, or no ``approvals:read``).
Approving wakes the background run waiting on the request; an approval no run here waits on is
resumed by the runner (see ``runner.py``). A token sees and decides only its tenant's requests (see
:mod:`actionspace.service.scoping`); another tenant's answer 404. Under the four-eyes rule
(``distinct_approver``, see :mod:`actionspace.approval.four_eyes`) the principal that proposed a
call may not approve it: 403 ``permission_denied``, the request left pending; it may still deny it.

``expired`` is read from ``expires_at`` when a request is shown (:func:`~actionspace.service.views.as_read`):
an approval past it is shown, and filtered, as ``expired``, never as ``approved``; the store keeps it
``approved`` and the gate does not honour it. The store answers ``?status=approved`` and
``?status=expired`` in its query (expiry compared at the listing's time), so either is exact
however many approvals of the other are newer.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from fastapi import APIRouter, Body, Depends, Query

from actionspace._unicode import text_for_postgres
from actionspace.approval.four_eyes import refused_approval
from actionspace.approval.requests import ApprovalRequest
from actionspace.durable.approval import wake_decided
from actionspace.policy.principal import Principal
from actionspace.runtime import Runtime
from actionspace.service.auth import require
from actionspace.service.deps import runner_of, runtime_of
from actionspace.service.errors import BAD_BODY, ERRORS, ApiError
from actionspace.service.models import ApprovalView, DecisionBody, ErrorResponse
from actionspace.service.runner import BackgroundRuns
from actionspace.service.scoping import RunTenants, may_see, request_tenant
from actionspace.service.tenant_lists import approvals_page
from actionspace.service.views import approval_view, as_read, clearance, hidden_requests, withheld_label

__all__ = ["approvals_router"]

Rt = Annotated[Runtime, Depends(runtime_of)]
Runner = Annotated[BackgroundRuns, Depends(runner_of)]
Decider = Annotated[Principal, Depends(require("approvals:decide"))]
DecisionBodyParam = Annotated[DecisionBody | None, Body()]
Status = Literal["pending", "approved", "denied", "expired", "consumed", "all"]
READ_SCOPE: Final = "approvals:read"

_DECISION_ERRORS: dict[int | str, dict[str, Any]] = {
    **BAD_BODY,
    404: {"model": ErrorResponse, "description": "No such request."},
    409: {"model": ErrorResponse, "description": "The request is no longer pending."},
}
_APPROVE_ERRORS: dict[int | str, dict[str, Any]] = {
    **_DECISION_ERRORS,
    403: {
        "model": ErrorResponse,
        "description": "The token's principal lacks the route's scope, may not see the values of the"
        " call (they are redacted for it), or (with the four-eyes rule on) proposed the call itself.",
    },
}


def approvals_router(*, distinct_approver: bool = False) -> APIRouter:
    """The approvals routes; ``distinct_approver`` (default False) refuses the proposer's own approval."""
    router = APIRouter(prefix="/api/approvals", tags=["approvals"], responses=ERRORS)

    @router.get("", response_model=list[ApprovalView], summary="Approval requests, newest first")
    def list_approvals(
        rt: Rt,
        who: Annotated[Principal, Depends(require(READ_SCOPE))],
        status: Annotated[Status, Query(description="Which requests; `all` for every status.")] = "pending",
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
        run: Annotated[str | None, Query(description="Only the requests of this run.")] = None,
    ) -> list[dict[str, Any]]:
        tenants = RunTenants(rt.trace)
        now = rt.approvals.clock.time()
        if run is not None:
            requests = [
                r for r in _requests_of_run(rt, run, status, now) if may_see(who, request_tenant(r, tenants))
            ]
            requests = requests[:limit]
        else:  # a tenant's asked of the store for that tenant (see service/tenant_lists.py)
            requests = approvals_page(rt, who, status, limit, now)
        hidden = hidden_requests(rt.trace, requests, who)
        return [approval_view(r, hidden=r.id in hidden) for r in requests]

    def visible(rt: Runtime, request_id: str, who: Principal) -> ApprovalRequest:
        request = rt.approvals.get(request_id)
        if request is None or not may_see(who, request_tenant(request, RunTenants(rt.trace))):
            raise ApiError(404, f"no approval request {request_id!r}")
        return request

    @router.get(
        "/{request_id}",
        response_model=ApprovalView,
        responses={404: {"model": ErrorResponse, "description": "No such request."}},
        summary="One approval request",
    )
    def get_approval(
        request_id: str, rt: Rt, who: Annotated[Principal, Depends(require(READ_SCOPE))]
    ) -> dict[str, Any]:
        return _shown(rt, visible(rt, request_id, who), who)

    def decide(
        rt: Runtime, runner: BackgroundRuns, request_id: str, approve: bool, by: Principal, reason: str | None
    ) -> dict[str, Any]:
        request = visible(rt, request_id, by)  # another tenant's request is not this token's to decide
        if approve and distinct_approver:
            refused = refused_approval(request, by.id)
            if refused is not None:
                raise ApiError(403, refused.message, category=refused.category)
        if approve:
            _check_cleared(rt, request, by)
        try:
            if approve:
                decided = rt.approvals.approve(request_id, by=by.id, reason=reason)
            else:
                decided = rt.approvals.deny(request_id, by=by.id, reason=reason)
        except KeyError as exc:
            raise ApiError(404, f"no approval request {request_id!r}") from exc
        except ValueError as exc:
            raise ApiError(409, str(exc), category="conflict") from exc
        if runner.waiting_on(request_id):
            runner.notify(request_id)
        elif not wake_decided(rt.store_url, decided, rt.durable) and approve:
            runner.resume(decided)
        return _shown(rt, decided, by)

    def decision_route(action: Literal["approve", "deny"], summary: str) -> None:
        approving = action == "approve"

        def endpoint(
            request_id: str, rt: Rt, runner: Runner, principal: Decider, body: DecisionBodyParam = None
        ) -> dict[str, Any]:
            return decide(rt, runner, request_id, approving, principal, body.reason if body else None)

        router.post(
            f"/{{request_id}}/{action}",
            response_model=ApprovalView,
            responses=_APPROVE_ERRORS if approving else _DECISION_ERRORS,
            summary=summary,
            name=action,
        )(endpoint)

    decision_route("approve", "Approve a pending request (that exact call, once)")
    decision_route("deny", "Deny a pending request")
    return router


def _check_cleared(rt: Runtime, request: ApprovalRequest, by: Principal) -> None:
    """Refuse (403 ``permission_denied``) an approval by a principal the request's values are
    redacted for: it would approve a call it was never shown, so its approval would vouch for
    nothing. The message names the clearance it lacks; denying stays open to it."""
    withheld = withheld_label(rt.trace, request, by)
    if withheld is None:
        return
    raise ApiError(
        403,
        f"approval of request {request.id} refused: principal {by.id!r} may not see the values of the"
        f" call (labelled {withheld.confidentiality}), so it may not approve it; approving needs"
        f" {clearance(withheld)}. Denying it stays allowed.",
        category="permission_denied",
    )


def _shown(rt: Runtime, request: ApprovalRequest, who: Principal) -> dict[str, Any]:
    """The request as ``who`` may see it: redacted when it (its own label, or its run) holds what
    ``who`` may not read, or when ``who`` may not read requests at all (a decision's answer to a
    token with ``approvals:decide`` alone shows no value its read would not)."""
    shown = as_read(request, rt.approvals.clock.time())
    hidden = not who.allows(READ_SCOPE) or bool(hidden_requests(rt.trace, [request], who))
    return approval_view(shown, hidden=hidden)


def _requests_of_run(rt: Runtime, run_id: str, status: str, now: float) -> list[ApprovalRequest]:
    """The requests of ``run_id`` with ``status`` (``all``: any) as read at ``now``, newest first.

    The store is asked for this run's requests only, so they are found however many newer requests
    other runs filed. An id no store can hold names no run: nothing.
    """
    if not run_id or text_for_postgres(run_id) != run_id or "\x00" in run_id:
        return []
    read = (as_read(r, now) for r in rt.approvals.of_runs([run_id]))
    kept = [r for r in read if status == "all" or r.status == status]
    return sorted(kept, key=lambda r: r.created_at, reverse=True)
