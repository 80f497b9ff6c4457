"""``/api/runs``: list runs, read one with its plan DAG and events, start one in the background.

Events are shown as the caller may see them: an event recorded while its run held secret (or
reader-restricted) data has its values redacted unless the token's principal may read that label
(in the readers, or holding ``labels:secret``; see :mod:`actionspace.policy.redaction`).
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Query

from actionspace.policy.principal import Principal
from actionspace.policy.redaction import redact_events
from actionspace.runtime import Runtime
from actionspace.service.auth import require
from actionspace.service.deps import runner_of, runtime_of
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
from actionspace.service.runner import BackgroundRuns
from actionspace.service.views import event_view, pending_run_ids, plan_view, run_row, runs_page
from actionspace.trace.events import summarize

__all__ = ["runs_router"]

_NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": ErrorResponse, "description": "No such run."}}

Rt = Annotated[Runtime, Depends(runtime_of)]
Runner = Annotated[BackgroundRuns, Depends(runner_of)]


def runs_router() -> APIRouter:
    router = APIRouter(prefix="/api/runs", tags=["runs"], responses=ERRORS)

    @router.get("", response_model=list[RunRow], summary="Runs, latest activity first")
    def list_runs(
        rt: Rt,
        runner: Runner,
        who: Annotated[Principal, Depends(require("runs:read"))],
        limit: Annotated[int, Query(ge=1, le=500, description="Most rows returned.")] = 50,
        before: Annotated[
            float | None,
            Query(description="Unix seconds: only runs last active before this (page with a row's last_at)."),
        ] = None,
    ) -> list[dict[str, Any]]:
        pending = pending_run_ids(rt.approvals.list("pending", limit=1000))
        return [
            run_row(s, redact_events(rt.trace.events(s.run_id), who), runner.live, pending)
            for s in runs_page(rt.trace, limit=limit, before=before)
        ]

    @router.get("/{run_id}", response_model=RunDetail, responses=_NOT_FOUND, summary="One run and its plan")
    def get_run(
        run_id: str, rt: Rt, runner: Runner, who: Annotated[Principal, Depends(require("runs:read"))]
    ) -> dict[str, Any]:
        events = redact_events(rt.trace.events(run_id), who)
        summary = summarize(run_id, events)
        if summary is None:
            raise ApiError(404, f"no run {run_id!r}")
        pending = pending_run_ids(rt.approvals.list("pending", limit=1000))
        return {**run_row(summary, events, runner.live, pending), "plan": plan_view(run_id, events)}

    @router.get(
        "/{run_id}/events", response_model=list[EventView], responses=_NOT_FOUND, summary="A run's trace"
    )
    def get_events(
        run_id: str, rt: Rt, who: Annotated[Principal, Depends(require("runs:read"))]
    ) -> list[dict[str, Any]]:
        events = redact_events(rt.trace.events(run_id), who)
        if not events:
            raise ApiError(404, f"no run {run_id!r}")
        return [event_view(e) for e in events]

    @router.post(
        "",
        status_code=202,
        response_model=RunAccepted,
        responses={**BAD_BODY, 409: {"model": ErrorResponse, "description": "The run id is taken."}},
        summary="Start a run (a plan or raw model calls) in the background",
    )
    def start_run(
        body: Annotated[SubmitRun, Body()],
        rt: Rt,
        runner: Runner,
        principal: Annotated[Principal, Depends(require("runs:write"))],
    ) -> dict[str, str]:
        run_id = body.run_id or f"run_{uuid.uuid4().hex[:16]}"
        if runner.is_active(run_id) or rt.trace.next_seq(run_id) > 0:
            raise ApiError(409, f"run {run_id!r} already exists", category="conflict")
        rt.new_run(run_id, principal=principal)
        if isinstance(body, PlanRun):
            runner.start_plan(body.plan, run_id=run_id, principal=principal)
        else:
            runner.start_calls(body.calls, run_id=run_id, principal=principal)
        return {"run_id": run_id}

    return router
