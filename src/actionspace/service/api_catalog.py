"""``/api/health``, ``/api/catalog`` and ``/api/metrics`` (per-tool monitoring of the trace store).

Metrics count only the runs the token's tenant may see (see :mod:`actionspace.service.scoping`):
another tenant's activity, and the tool names its model wrote, are not shown. In a run holding data
the token may not read, a rejected field's JSON pointer is shown down to the argument's name only
(below it, a pointer is made of the call's values: an object's keys), as its redacted events are.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query

from actionspace._unicode import value_for_utf8
from actionspace._version import package_version
from actionspace.errors import UnknownToolError
from actionspace.evaluation.monitor import monitor
from actionspace.policy.labels import may_read
from actionspace.policy.principal import Principal
from actionspace.policy.redaction import REDACTED, mark_of
from actionspace.runtime import Runtime
from actionspace.service.auth import require
from actionspace.service.deps import runtime_of
from actionspace.service.errors import ERRORS, ApiError
from actionspace.service.models import ErrorResponse, Health, MetricsView, ToolView
from actionspace.service.scoping import RunTenants, heads_of, may_see, sees_all, visible_page
from actionspace.service.views import tool_view
from actionspace.trace.events import RunSummary, TraceEvent, TraceStore

__all__ = ["catalog_router", "health_router"]

Rt = Annotated[Runtime, Depends(runtime_of)]


LAST_SECOND = 253_402_300_799
"""9999-12-31T23:59:59Z in Unix seconds: the last instant an ISO-8601 answer can name."""


def health_router() -> APIRouter:
    router = APIRouter(prefix="/api", tags=["service"])

    @router.get("/health", response_model=Health, summary="Liveness (no token needed)")
    def health() -> dict[str, str]:
        return {"status": "ok", "version": package_version()}

    return router


def catalog_router() -> APIRouter:
    router = APIRouter(prefix="/api", tags=["catalog"], responses=ERRORS)

    @router.get("/catalog", response_model=list[ToolView], summary="Every registered tool version")
    def catalog(rt: Rt, _: Annotated[Principal, Depends(require("catalog:read"))]) -> list[dict[str, Any]]:
        return [tool_view(spec) for spec in sorted(rt.catalog, key=lambda s: (s.name, s.version))]

    @router.get(
        "/catalog/{name}",
        response_model=ToolView,
        responses={404: {"model": ErrorResponse, "description": "No such tool."}},
        summary="A tool's current definition (``name@version`` for another version)",
    )
    def tool(name: str, rt: Rt, _: Annotated[Principal, Depends(require("catalog:read"))]) -> dict[str, Any]:
        base, _sep, version = name.partition("@")
        try:
            spec = rt.catalog.get(base, version or None)
        except (UnknownToolError, KeyError) as exc:
            raise ApiError(404, f"no tool {name!r}", category="unknown_tool") from exc
        return tool_view(spec)

    @router.get("/metrics", response_model=MetricsView, summary="Per-tool health read from the trace store")
    def metrics(
        rt: Rt,
        who: Annotated[Principal, Depends(require("metrics:read"))],
        since: Annotated[
            float | None,
            Query(ge=0, le=LAST_SECOND, description="Unix seconds: only calls since then."),
        ] = None,
        max_runs: Annotated[int, Query(ge=1, le=100_000, description="Most recent runs read.")] = 1000,
    ) -> dict[str, Any]:
        run_ids = None if sees_all(who) else _visible_runs(rt, who, since=since, limit=max_runs)
        seen = _FieldsAsSeen(rt.trace, who)
        view = monitor(seen, since=since, run_ids=run_ids, max_runs=max_runs).to_dict()
        # seconds, said as a datetime here: pydantic would read a number past 2e10 as milliseconds
        view["since"] = None if since is None else datetime.fromtimestamp(since, tz=UTC)
        return value_for_utf8(view)  # tool and field names as the model wrote them: UTF-8 whole

    return router


def _visible_runs(rt: Runtime, who: Principal, *, since: float | None, limit: int) -> list[str]:
    """The ids of up to ``limit`` of the latest runs (active since ``since``) ``who`` may see."""
    tenants = RunTenants(rt.trace)
    read: set[str] = set()

    def fetch(n: int) -> list[RunSummary]:
        page = rt.trace.runs(limit=n, since=since)
        fresh = [s.run_id for s in page if s.run_id not in read]
        for run_id, head in heads_of(rt.trace, fresh).items():  # each run's tenant, in one query
            tenants.remember(run_id, head)
        read.update(fresh)
        return page

    page = visible_page(fetch, lambda s: may_see(who, tenants(s.run_id)), limit=limit, scan=limit)
    return [s.run_id for s in page]


class _FieldsAsSeen:
    """``store`` as :func:`monitor` reads it for ``viewer``: the field errors of an event ``viewer``
    may not read keep only their pointers, cut to the argument's name; all else is as recorded, so
    every call still counts. Read-only."""

    def __init__(self, store: TraceStore, viewer: Principal) -> None:
        self._store = store
        self._viewer = viewer

    def events(self, run_id: str) -> list[TraceEvent]:
        return [self._seen(event) for event in self._store.events(run_id)]

    def runs(self, *, limit: int = 50, since: float | None = None) -> list[RunSummary]:
        return self._store.runs(limit=limit, since=since)

    def next_seq(self, run_id: str) -> int:
        return self._store.next_seq(run_id)

    def append_many(self, events: Sequence[TraceEvent]) -> None:
        raise TypeError("the metrics view of a trace store is read-only")

    def close(self) -> None:
        """The store stays open: the runtime owns it."""

    def _seen(self, event: TraceEvent) -> TraceEvent:
        data = event.data
        errors = data.get("field_errors") if isinstance(data, Mapping) else None
        if not isinstance(errors, list | tuple) or not errors:
            return event
        label = mark_of(data)
        if label is None or may_read(label, self._viewer):
            return event
        cut = [
            {"path": _argument_of(e["path"])}
            for e in errors
            if isinstance(e, Mapping) and isinstance(e.get("path"), str)
        ]
        return dataclasses.replace(event, data={**data, "field_errors": cut})


def _argument_of(pointer: str) -> str:
    """The pointer of the argument ``pointer`` lies in (``/counts/<key>`` → ``/counts``)."""
    if not pointer.startswith("/"):
        return pointer if pointer == "" else REDACTED
    end = pointer.find("/", 1)
    return pointer if end < 0 else pointer[:end]
