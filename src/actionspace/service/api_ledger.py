"""``/api/ledger``: entries of the commit ledger, and a person's reconciliation of unknown commits."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query

from actionspace.policy.principal import Principal
from actionspace.runtime import Runtime
from actionspace.service.auth import require
from actionspace.service.deps import runtime_of
from actionspace.service.errors import BAD_BODY, ERRORS, ApiError
from actionspace.service.models import ErrorResponse, LedgerEntryView, ResolveBody

__all__ = ["ledger_router"]

Rt = Annotated[Runtime, Depends(runtime_of)]
State = Literal["accepted", "dispatched", "committed", "failed", "unknown", "unknown_commit"]


def ledger_router() -> APIRouter:
    router = APIRouter(prefix="/api/ledger", tags=["ledger"], responses=ERRORS)

    @router.get("", response_model=list[LedgerEntryView], summary="Ledger entries, latest update first")
    def list_entries(
        rt: Rt,
        _: Annotated[Principal, Depends(require("ledger:read"))],
        state: Annotated[State | None, Query(description="Only entries in this state.")] = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> list[dict[str, Any]]:
        return [e.to_dict() for e in rt.ledger.list(state=state, limit=limit)]

    @router.post(
        "/{key}/resolve",
        response_model=LedgerEntryView,
        responses={
            **BAD_BODY,
            404: {"model": ErrorResponse, "description": "No such entry."},
            409: {"model": ErrorResponse, "description": "The entry is not an unknown commit."},
        },
        summary="Reconcile an unknown_commit by hand: committed or not_committed",
    )
    def resolve(
        key: str,
        body: ResolveBody,
        rt: Rt,
        principal: Annotated[Principal, Depends(require("ledger:resolve"))],
    ) -> dict[str, Any]:
        outcome = "committed" if body.outcome == "committed" else "failed"
        reason = body.note or f"reconciled through the API as {body.outcome}"
        try:
            entry = rt.resolve(key, outcome=outcome, by=principal.id, reason=reason)
        except KeyError as exc:
            raise ApiError(404, f"no ledger entry {key!r}") from exc
        except ValueError as exc:
            raise ApiError(409, str(exc), category="conflict") from exc
        return entry.to_dict()

    return router
