"""``/api/ledger``: entries of the commit ledger, and a person's reconciliation of unknown commits.

Entries are shown as the token's principal may see them: an entry of a run that held secret (or
reader-restricted) data has its values redacted (see :mod:`actionspace.trace.redact_ledger`), and
the digests of its values too (``args_digest``, the observation's ``content_hash``): a reader could
hash guesses of a low-entropy value and confirm one. Its ``key`` stays, naming the entry. A resolve
answers the entry as the token's read shows it: redacted so to a token without ``ledger:read``.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from fastapi import APIRouter, Depends, Query

from actionspace._unicode import value_for_utf8
from actionspace.ledger.entries import LedgerEntry
from actionspace.policy.principal import Principal
from actionspace.runtime import Runtime
from actionspace.service.auth import require
from actionspace.service.deps import runtime_of
from actionspace.service.errors import BAD_BODY, ERRORS, ApiError
from actionspace.service.models import ErrorResponse, LedgerEntryView, ResolveBody
from actionspace.service.scoping import RunTenants, may_see
from actionspace.service.tenant_lists import ledger_page
from actionspace.service.views import entry_without_digests
from actionspace.trace.redact_ledger import hidden_runs, redact_entry

__all__ = ["ledger_router"]

Rt = Annotated[Runtime, Depends(runtime_of)]
READ_SCOPE: Final = "ledger:read"
_NO_RUN: Final = ""
"""The run whose tenant a missing entry's lookup reads, for its cost only: the answer is 404
whatever it finds."""
State = Literal["accepted", "dispatched", "committed", "failed", "unknown", "unknown_commit"]


def ledger_router() -> APIRouter:
    router = APIRouter(prefix="/api/ledger", tags=["ledger"], responses=ERRORS)

    @router.get("", response_model=list[LedgerEntryView], summary="Ledger entries, latest update first")
    def list_entries(
        rt: Rt,
        who: Annotated[Principal, Depends(require(READ_SCOPE))],
        state: Annotated[State | None, Query(description="Only entries in this state.")] = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> list[dict[str, Any]]:
        entries = ledger_page(rt, who, state, limit)  # a tenant's asked of the store for it
        return value_for_utf8(_as_seen(entries, rt, who))  # UTF-8 whole

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
        found = rt.ledger.get(key)
        # A key is a digest of (run, node, tool, arguments): a token could compute one from a guess
        # and ask. A missing entry is answered as another tenant's is, after the same reads (a
        # tenant looked up, of no run), so neither the answer nor the work tells one from the other.
        tenant = RunTenants(rt.trace)(_NO_RUN if found is None else found.run_id)
        if found is None or not may_see(principal, tenant):
            raise ApiError(404, f"no ledger entry {key!r}")
        outcome = "committed" if body.outcome == "committed" else "failed"
        reason = body.note or f"reconciled through the API as {body.outcome}"
        try:
            entry = rt.resolve(key, outcome=outcome, by=principal.id, reason=reason)
        except KeyError as exc:
            raise ApiError(404, f"no ledger entry {key!r}") from exc
        except ValueError as exc:
            raise ApiError(409, str(exc), category="conflict") from exc
        # answered as this token's read would show it: one without ledger:read sees no value
        return value_for_utf8(_as_seen([entry], rt, principal, reads=principal.allows(READ_SCOPE))[0])

    return router


def _as_seen(
    entries: list[LedgerEntry], rt: Runtime, who: Principal, *, reads: bool = True
) -> list[dict[str, Any]]:
    """Each entry's ``to_dict()``; redacted, digests of its values too, where its run holds what
    ``who`` may not read, or every entry when ``reads`` is false (``who`` may not read the ledger)."""
    hidden = hidden_runs(rt.trace, (e.run_id for e in entries), who) if reads else None
    return [
        entry_without_digests(redact_entry(e.to_dict()))
        if hidden is None or e.run_id in hidden
        else e.to_dict()
        for e in entries
    ]
