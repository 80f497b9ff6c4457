"""``/api/runs``: list runs, read one with its plan DAG and events, start one in the background.

Events are shown as the caller may see them: an event recorded while its run held secret (or
reader-restricted) data has its values redacted unless the token's principal may read that label
(in the readers, or holding ``labels:secret``; see :mod:`actionspace.policy.redaction`). Runs of
another tenant are not listed and answer 404 (see :mod:`actionspace.service.scoping`). A listing
reads each run's aggregate counts and its start and finish events, never every event. Its order is
what a row shows (``last_at`` to the microsecond, then ``run_id``), and a page starts after the row
``before`` and ``before_id`` name, so paging lists every run once however many share a ``last_at``.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, HTTPException, Query
from pydantic import AwareDatetime

from actionspace._unicode import value_for_utf8
from actionspace.policy.principal import Principal
from actionspace.policy.redaction import redact_events
from actionspace.runtime import Runtime
from actionspace.service import scoping
from actionspace.service.auth import require
from actionspace.service.deps import held_bytes_of, live_runs_of, runner_of, runtime_of
from actionspace.service.errors import BAD_BODY, ERRORS, ApiError
from actionspace.service.models import (
    ErrorResponse,
    EventView,
    PlanRun,
    RunAccepted,
    RunDetail,
    RunRow,
    SubmitRun,
)
from actionspace.service.quotas import HeldBytes, LiveRuns, json_bytes
from actionspace.service.runner import BackgroundRuns
from actionspace.service.scoping import RunTenants, heads_of, may_see, sees_all
from actionspace.service.views import (
    RunsCursor,
    event_view,
    micros,
    pending_run_ids,
    plan_view,
    run_row,
    runs_page,
    shown_micros,
    without_digests,
)
from actionspace.trace.events import ClaimsRuns, RunSummary, TraceEvent, summarize
from actionspace.trace.store import ListsTenantRuns

__all__ = ["runs_router"]

_NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": ErrorResponse, "description": "No such run."}}

Rt = Annotated[Runtime, Depends(runtime_of)]
Runner = Annotated[BackgroundRuns, Depends(runner_of)]
Live = Annotated[LiveRuns, Depends(live_runs_of)]
Held = Annotated[HeldBytes, Depends(held_bytes_of)]


def runs_router() -> APIRouter:
    router = APIRouter(prefix="/api/runs", tags=["runs"], responses=ERRORS)

    @router.get("", response_model=list[RunRow], summary="Runs, latest activity first")
    def list_runs(
        rt: Rt,
        runner: Runner,
        who: Annotated[Principal, Depends(require("runs:read"))],
        limit: Annotated[int, Query(ge=1, le=500, description="Most rows returned.")] = 50,
        before: Annotated[
            AwareDatetime | None,
            Query(
                description="ISO-8601: only runs listed after this (page with the last row's last_at,"
                " and its run_id as before_id); alone, only runs last active before it."
            ),
        ] = None,
        before_id: Annotated[
            str | None,
            Query(
                description="With before: the last row's run_id, so runs sharing its last_at are listed"
                " (ignored without before)."
            ),
        ] = None,
        principal: Annotated[str | None, Query(description="Only runs started by this principal.")] = None,
    ) -> list[dict[str, Any]]:
        # A store that lists one tenant's runs is asked for the caller's only (each row is still
        # judged below); another one's runs are filtered here, read on as below.
        own = None if sees_all(who) else (who.tenant,)
        pushed = own is not None and isinstance(rt.trace, ListsTenantRuns)
        filtered = principal is not None or (own is not None and not pushed)
        tenants = RunTenants(rt.trace)
        # the cursor is what the last row showed: its last_at (to the microsecond) and its run id
        cursor = None if before is None else (micros(before), before_id)
        rows: dict[str, dict[str, Any] | None] = {}  # run id → its row; None when not listed

        def fetch(n: int, after: RunsCursor | None) -> list[RunSummary]:
            page = runs_page(rt.trace, limit=n, before=after, tenant=own if pushed else None)
            heads = heads_of(rt.trace, [s.run_id for s in page])  # the counts come from the aggregate
            seen = []
            for summary in page:
                tenants.remember(summary.run_id, heads[summary.run_id])
                rows[summary.run_id] = None
                if may_see(who, tenants(summary.run_id)):
                    seen.append(summary)
            # what the page's open runs wait for, asked of these runs only: exact however many
            # requests other runs (another tenant's flood) hold
            open_ids = [s.run_id for s in seen if not s.finished]
            waiting = pending_run_ids(rt.approvals.of_runs(open_ids, status="pending"))
            for summary in seen:
                row = run_row(summary, redact_events(heads[summary.run_id], who), runner.live, waiting)
                mine = principal is None or row["principal"] == principal
                rows[summary.run_id] = row if mine else None
            return page

        # Narrowed by tenant or principal, the listing reads on from the last run read, each read
        # four times larger up to MAX_SCAN runs, until its page is full or the store has no more
        # runs: however many newer runs another tenant has, the caller's own are found.
        step = min(limit * 4 if filtered else limit, scoping.MAX_SCAN)
        shown: list[dict[str, Any]] = []
        while True:
            page = fetch(step, cursor)
            shown += [row for s in page if (row := rows[s.run_id]) is not None]
            if len(shown) >= limit or len(page) < step:
                return shown[:limit]
            cursor = (shown_micros(page[-1].last_at), page[-1].run_id)
            step = min(step * 4, scoping.MAX_SCAN)  # a store may read its whole listing per read

    def run_events(rt: Runtime, run_id: str, who: Principal) -> list[TraceEvent]:
        """The run's events as recorded (unredacted), once ``who`` may see the run; else 404.

        The run's tenant is read from its head events first: another tenant's run is refused
        without being read whole, at the cost of a missing run's 404."""
        if not may_see(who, RunTenants(rt.trace)(run_id)):
            raise ApiError(404, f"no run {run_id!r}")
        events = rt.trace.events(run_id)
        if not events:
            raise ApiError(404, f"no run {run_id!r}")
        return events

    @router.get("/{run_id}", response_model=RunDetail, responses=_NOT_FOUND, summary="One run and its plan")
    def get_run(
        run_id: str, rt: Rt, runner: Runner, who: Annotated[Principal, Depends(require("runs:read"))]
    ) -> dict[str, Any]:
        events = run_events(rt, run_id, who)
        # Counts and the plan's graph (node ids, tools, statuses, categories) are what a redacted
        # event keeps, so they are read from the events as recorded: redaction replaces a plan's
        # node list with a marker, and would count an atomic group's own record as a call.
        summary = summarize(run_id, events)
        if summary is None:
            raise ApiError(404, f"no run {run_id!r}")
        pending = pending_run_ids(rt.approvals.of_runs([run_id], status="pending"))
        row = run_row(summary, redact_events(events, who), runner.live, pending)
        detail = {**row, "plan": plan_view(run_id, events)}
        return value_for_utf8(detail)  # tool names as the model wrote them: a response is UTF-8 whole

    @router.get(
        "/{run_id}/events", response_model=list[EventView], responses=_NOT_FOUND, summary="A run's trace"
    )
    def get_events(
        run_id: str, rt: Rt, who: Annotated[Principal, Depends(require("runs:read"))]
    ) -> list[dict[str, Any]]:
        return [event_view(without_digests(e)) for e in redact_events(run_events(rt, run_id, who), who)]

    @router.post(
        "",
        status_code=202,
        response_model=RunAccepted,
        responses={
            **BAD_BODY,
            409: {"model": ErrorResponse, "description": "The run id is taken."},
            413: {
                "model": ErrorResponse,
                "description": "The body is larger than the service accepts, or the submission"
                " than a tenant's live runs may hold.",
            },
        },
        summary="Start a run (a plan or raw model calls) in the background",
    )
    def start_run(
        body: Annotated[SubmitRun, Body()],
        rt: Rt,
        runner: Runner,
        live: Live,
        held: Held,
        principal: Annotated[Principal, Depends(require("runs:write"))],
    ) -> dict[str, str]:
        run_id = body.run_id or f"run_{uuid.uuid4().hex}"  # 122 random bits: the namespace is shared
        taken = ApiError(409, f"run {run_id!r} already exists", category="conflict")
        key = (principal.tenant, principal.id)
        if not live.take(key, run_id):  # counted before anything is written: starts at once see it
            raise HTTPException(
                429,
                f"principal {principal.id!r} has {live.limit} runs live here, the most it may have;"
                " start another once one of them has ended",
                headers={"Retry-After": "1"},
            )
        started = False
        submitted = body.plan if isinstance(body, PlanRun) else body.calls
        ticket = held.take(principal.tenant, run_id, size := json_bytes(submitted))
        if ticket is None:
            live.settle(key, run_id, started=False)
            raise _held_too_much(held, principal, size)
        if not runner.claim(run_id):  # live here, or another request is starting it right now
            live.settle(key, run_id, started=False)
            held.settle(principal.tenant, ticket, started=False)
            raise taken
        try:
            store = rt.trace  # one claim in the store: of services sharing it, exactly one wins
            fresh = store.claim_run(run_id) if isinstance(store, ClaimsRuns) else store.next_seq(run_id) == 0
            if not fresh:
                raise taken
            rt.new_run(run_id, principal=principal)
            if isinstance(body, PlanRun):
                runner.start_plan(body.plan, run_id=run_id, principal=principal)
            else:
                runner.start_calls(body.calls, run_id=run_id, principal=principal)
            started = True
        finally:
            runner.release(run_id)
            live.settle(key, run_id, started=started)
            held.settle(principal.tenant, ticket, started=started)
        return {"run_id": run_id}

    return router


def _held_too_much(held: HeldBytes, principal: Principal, size: int) -> HTTPException | ApiError:
    """413 for a submission larger than a tenant may hold at all; else 429 until runs end."""
    if held.limit is not None and size > held.limit:
        return ApiError(
            413,
            f"the submission is {size} bytes as JSON, more than the {held.limit} bytes a tenant's live"
            " runs may hold; split it into smaller runs",
            category="invalid_arguments",
        )
    return HTTPException(
        429,
        f"the live runs of this principal's tenant hold {held.held(principal.tenant)} bytes of their"
        f" submissions; this one ({size} bytes) would pass the {held.limit} they may hold: start it"
        " once some of them have ended, or send a smaller one",
        headers={"Retry-After": "1"},
    )
