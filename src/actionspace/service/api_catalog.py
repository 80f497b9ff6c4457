"""``/api/health``, ``/api/catalog`` and ``/api/metrics`` (per-tool monitoring of the trace store).

Metrics count only the runs the token's tenant may see (see :mod:`actionspace.service.scoping`):
another tenant's activity, and the tool names its model wrote, are not shown. In a run holding data
the token may not read, a rejected field's JSON pointer is shown down to the argument's name only
(below it, a pointer is made of the call's values: an object's keys), as its redacted events are.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, Final

from fastapi import APIRouter, Depends, HTTPException, Query, Request

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
from actionspace.service.metrics_answers import MetricsAnswers
from actionspace.service.models import ErrorResponse, Health, MetricsView, ToolView
from actionspace.service.scoping import MAX_SCAN, RunTenants, heads_of, may_see, sees_all, visible_page
from actionspace.service.views import tool_view
from actionspace.trace._runs_events import PAGE_ROWS, events_of_runs
from actionspace.trace.events import RunSummary, TraceEvent, TraceStore
from actionspace.trace.store import ListsTenantRuns

__all__ = [
    "MAX_FIELDS_SHOWN",
    "MAX_UNLISTED_TOOLS",
    "METRICS_MAX_RUNS",
    "METRICS_RUNS",
    "OTHER_FIELDS",
    "catalog_router",
    "health_router",
]

METRICS_MAX_RUNS: Final = 10_000
"""Most runs one ``/api/metrics`` request may read by default (``create_app(metrics_max_runs=)``):
each run's events are read whole, so this bounds what one request holds and how long it takes."""
METRICS_RUNS: Final = 1000
"""Runs ``/api/metrics`` reads when the request does not say (or the bound, when smaller)."""

MAX_UNLISTED_TOOLS: Final = 20
"""Most tools outside the catalog (names a model wrote) ``/api/metrics`` shows, the most called."""
MAX_FIELDS_SHOWN: Final = 50
"""Most rejected fields ``/api/metrics`` names for one tool, the most rejected."""
OTHER_FIELDS: Final = "(other fields)"
"""The key counting a tool's rejected fields past :data:`MAX_FIELDS_SHOWN` (no JSON pointer: those
are empty or start with ``/``)."""

Rt = Annotated[Runtime, Depends(runtime_of)]


LAST_SECOND = 253_402_300_799
"""9999-12-31T23:59:59Z in Unix seconds: the last instant an ISO-8601 answer can name."""


def health_router() -> APIRouter:
    router = APIRouter(prefix="/api", tags=["service"])

    @router.get("/health", response_model=Health, summary="Liveness (no token needed)")
    def health() -> dict[str, str]:
        return {"status": "ok", "version": package_version()}

    return router


def catalog_router(*, metrics_max_runs: int = METRICS_MAX_RUNS) -> APIRouter:
    """``metrics_max_runs``: the largest ``max_runs`` of ``/api/metrics`` (a larger one is 422)."""
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
        request: Request,
        who: Annotated[Principal, Depends(require("metrics:read"))],
        since: Annotated[
            float | None,
            Query(ge=0, le=LAST_SECOND, description="Unix seconds: only calls since then."),
        ] = None,
        # the bound is the app's, so given as the default (an annotation is read as text, without it)
        max_runs: int = Query(
            min(METRICS_RUNS, metrics_max_runs),
            ge=1,
            le=metrics_max_runs,
            description="Most recent runs read (the service bounds it).",
        ),
    ) -> dict[str, Any]:
        def read() -> dict[str, Any]:
            run_ids = None if sees_all(who) else _visible_runs(rt, who, since=since, limit=max_runs)
            seen = _FieldsAsSeen(rt.trace, who)
            view = monitor(seen, since=since, run_ids=run_ids, max_runs=max_runs).to_dict()
            # seconds, said as a datetime here: pydantic would read a number past 2e10 as milliseconds
            view["since"] = None if since is None else datetime.fromtimestamp(since, tz=UTC)
            _bound(view, {spec.name for spec in rt.catalog})
            return value_for_utf8(view)  # tool and field names as the model wrote them: UTF-8 whole

        answers: MetricsAnswers = request.app.state.metrics
        tenant = ("all",) if sees_all(who) else ("tenant", who.tenant)
        answered = answers.answer(tenant, (who, since, max_runs), read)
        if answered is None:
            raise HTTPException(
                429,
                "another /api/metrics request of this tenant is being answered; ask again in a moment",
                headers={"Retry-After": "1"},
            )
        return answered

    return router


def _bound(view: dict[str, Any], listed: set[str]) -> None:
    """Keep ``view`` (a ``MetricsView``) as large as the catalog, not as the names in the trace.

    Tool and argument names come from the model (or whoever starts runs): left alone, each new
    name is one more entry of every answer. Every tool of the catalog (``listed``) stays; of the
    others, the :data:`MAX_UNLISTED_TOOLS` most called (the view lists the most called first), the
    rest counted in ``tools_left_out`` and ``calls_left_out`` with their alerts left out; a tool's
    rejected fields past the :data:`MAX_FIELDS_SHOWN` most rejected are summed under
    :data:`OTHER_FIELDS`.
    """
    kept: list[dict[str, Any]] = []
    left: list[dict[str, Any]] = []
    unlisted = 0
    for tool in view["tools"]:
        if tool["tool"] not in listed:
            unlisted += 1
            if unlisted > MAX_UNLISTED_TOOLS:
                left.append(tool)
                continue
        tool["rejects_by_field"] = _top_fields(tool["rejects_by_field"])
        kept.append(tool)
    shown = {tool["tool"] for tool in kept}
    view["tools"] = kept
    view["alerts"] = [alert for alert in view["alerts"] if alert["tool"] in shown]
    view["tools_left_out"] = len(left)
    view["calls_left_out"] = sum(int(tool["calls"]) for tool in left)


def _top_fields(counts: Mapping[str, int]) -> dict[str, int]:
    if len(counts) <= MAX_FIELDS_SHOWN:
        return dict(counts)
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    top = dict(ranked[:MAX_FIELDS_SHOWN])
    top[OTHER_FIELDS] = sum(count for _, count in ranked[MAX_FIELDS_SHOWN:])
    return top


def _visible_runs(rt: Runtime, who: Principal, *, since: float | None, limit: int) -> list[str]:
    """The ids of up to ``limit`` of the latest runs (active since ``since``) ``who`` may see.

    A store that lists one tenant's runs (every store shipped) is read a page of the tenant's at a
    time through its index, from the last row read, until ``limit`` are found, a row is older than
    ``since`` or the tenant has no more: what other tenants hold is never read. Another store is
    read the newest rows first, as :func:`~actionspace.service.scoping.visible_page` does."""
    tenants = RunTenants(rt.trace)
    store = rt.trace
    if not isinstance(store, ListsTenantRuns):

        def fetch(n: int) -> list[RunSummary]:
            page = store.runs(limit=n, since=since)
            for run_id, head in heads_of(store, [s.run_id for s in page]).items():
                tenants.remember(run_id, head)
            return page

        page = visible_page(fetch, lambda s: may_see(who, tenants(s.run_id)), limit=limit, scan=limit)
        return [s.run_id for s in page]
    found: list[str] = []
    after: tuple[float, str] | None = None
    while len(found) < limit:
        asked = min(limit - len(found), MAX_SCAN)
        page = store.tenant_runs(who.tenant, limit=asked, after=after)
        recent = [s for s in page if since is None or s.last_at >= since]
        # each row judged by its own run_started, as a listing's are (an index may keep less of it)
        for run_id, head in heads_of(store, [s.run_id for s in recent]).items():
            tenants.remember(run_id, head)
        found += [s.run_id for s in recent if may_see(who, tenants(s.run_id))]
        if len(page) < asked or len(recent) < len(page):
            break
        after = (page[-1].last_at, page[-1].run_id)
    return found[:limit]


class _FieldsAsSeen:
    """``store`` as :func:`monitor` reads it for ``viewer``: the field errors of an event ``viewer``
    may not read keep only their pointers, cut to the argument's name; all else is as recorded, so
    every call still counts. Read-only."""

    def __init__(self, store: TraceStore, viewer: Principal) -> None:
        self._store = store
        self._viewer = viewer

    def events(self, run_id: str) -> list[TraceEvent]:
        return self._all_seen(self._store.events(run_id))

    def events_of_runs(
        self, run_ids: Sequence[str], *, page: int = PAGE_ROWS
    ) -> Iterator[tuple[str, list[TraceEvent]]]:
        """The runs' events read in one statement of a store that can (``_runs_events``), as seen."""
        for run_id, events in events_of_runs(self._store, run_ids, page=page):
            yield run_id, self._all_seen(events)

    def _all_seen(self, events: list[TraceEvent]) -> list[TraceEvent]:
        # most events hold no field errors: a dict without the key is passed on as it is
        return [e if type(e.data) is dict and "field_errors" not in e.data else self._seen(e) for e in events]

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
