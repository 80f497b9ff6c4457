"""Read models of the API: run rows, the plan DAG of a run, events, approvals, tools.

Everything here is computed from the stores (trace, approvals, ledger, catalog), so the API shows
runs recorded by any process sharing the store, not only those this server started.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from pydantic import AwareDatetime, TypeAdapter

from actionspace._unicode import text_for_utf8, value_for_utf8
from actionspace.approval.requests import DEFINITION, LABEL, ApprovalRequest
from actionspace.catalog.spec import ToolSpec
from actionspace.policy.labels import Label, may_read
from actionspace.policy.principal import Principal
from actionspace.policy.redaction import REDACTED, mark_of
from actionspace.trace.events import PagesRuns, RunSummary, TraceEvent, TraceStore
from actionspace.trace.store import ListsTenantRuns
from actionspace.trace.store_encoding import encode_data

__all__ = [
    "VALUE_DIGESTS",
    "RunsCursor",
    "approval_view",
    "as_read",
    "clearance",
    "entry_without_digests",
    "hidden_requests",
    "micros",
    "plan_view",
    "run_row",
    "runs_page",
    "shown_micros",
    "tool_view",
    "withheld_label",
    "without_digests",
]

LiveState = Callable[[str], str | None]
"""Run id → ``running`` / ``waiting_approval`` for runs this process is driving, else None."""

_KEPT_DETAILS = frozenset(
    {"approval_rule", "proposed_by", DEFINITION, "definition_changed_since", "request_id", "rule", "ceiling"}
    | {"declassifiable", "decided_by"}
)
"""Details of an approval request that name things (rules, principals, hashes, ids), never values."""

_MAX_SCAN = 10_000
"""Most runs read from a store that does not page its listing to fill one page."""


def run_row(
    summary: RunSummary, events: Sequence[TraceEvent], live: LiveState, pending_runs: set[str]
) -> dict[str, Any]:
    """One row of ``GET /api/runs`` (and the head of a run's detail)."""
    started = next((e for e in events if e.kind == "run_started"), None)
    finished = next((e for e in reversed(events) if e.kind == "run_finished"), None)
    if finished is not None:
        status = str(finished.data.get("status", "ok"))
    else:
        state = live(summary.run_id)
        if state is None and summary.run_id in pending_runs:
            state = "waiting_approval"
        status = state or "open"
    principal = started.data.get("principal") if started is not None else None
    return {
        "run_id": summary.run_id,
        "started_at": summary.started_at,
        "finished_at": finished.ts if finished is not None else None,
        "last_at": summary.last_at,
        "status": status,
        "principal": str(principal) if principal is not None else None,
        "calls": summary.calls,
        "errors": summary.errors,
        "events": summary.events,
    }


RunsCursor = tuple[int, str | None]
"""Where a page of ``GET /api/runs`` starts: a row's ``last_at`` as shown (microseconds since the
epoch) and its ``run_id``; the page lists the rows after that row. Without a run id: the rows whose
``last_at`` is shown earlier than that microsecond."""

_SHOWN: Final = TypeAdapter(AwareDatetime)
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


def micros(at: datetime) -> int:
    """``at`` in whole microseconds since the epoch (exact: no float on the way)."""
    return (at - _EPOCH) // timedelta(microseconds=1)


def shown_micros(ts: float) -> int:
    """``ts`` as a row shows it (``last_at``, ISO-8601 to the microsecond), in microseconds."""
    return micros(_SHOWN.validate_python(ts))


def _order(summary: RunSummary) -> tuple[int, str]:
    """The listing's order: latest ``last_at`` as shown first, then by run id."""
    return (-shown_micros(summary.last_at), summary.run_id)


def _after(summary: RunSummary, before: RunsCursor) -> bool:
    at, run_id = before
    shown = shown_micros(summary.last_at)
    return shown < at or (shown == at and run_id is not None and summary.run_id > run_id)


def runs_page(
    store: TraceStore, *, limit: int, before: RunsCursor | None, tenant: tuple[str | None] | None = None
) -> list[RunSummary]:
    """Up to ``limit`` runs, latest activity first; with ``before``, only the runs listed after it;
    with ``tenant`` (one tenant, None naming runs without one), only that tenant's runs, which the
    caller asks for only of a store that lists them (:class:`~actionspace.trace.store.ListsTenantRuns`).

    The order is that of what a row shows (``last_at`` to the microsecond, then ``run_id``), so the
    last row of a page names where the next one starts however many runs share its microsecond. A
    store orders by the exact time instead, so its rows are read on until the microsecond at the
    page's end has been read whole. A store that pages its listing
    (:class:`~actionspace.trace.events.PagesRuns`) is read from the cursor on, so a page is found
    however many runs are newer; another store's newest :data:`_MAX_SCAN` runs are read.
    """
    read: Callable[[tuple[float, str] | None], list[RunSummary]]
    if tenant is not None and isinstance(store, ListsTenantRuns):
        lister = store

        def read(after: tuple[float, str] | None) -> list[RunSummary]:
            return lister.tenant_runs(tenant[0], limit=limit, after=after)

    elif isinstance(store, PagesRuns):
        pager = store

        def read(after: tuple[float, str] | None) -> list[RunSummary]:
            return pager.runs(limit=limit) if after is None else pager.runs_after(after, limit=limit)

    else:
        return _scanned(store, limit=limit, before=before)
    # every run shown at or before the cursor's microsecond was last active before the next one
    got = read(None if before is None else ((before[0] + 1) / 1e6, ""))
    kept: list[RunSummary] = []
    while True:
        kept += [s for s in got if before is None or _after(s, before)]
        if len(got) < limit or _whole(kept, got[-1], limit):
            return sorted(kept, key=_order)[:limit]
        got = read((got[-1].last_at, got[-1].run_id))


def _scanned(store: TraceStore, *, limit: int, before: RunsCursor | None) -> list[RunSummary]:
    fetch = limit * 2
    while True:
        got = store.runs(limit=fetch)
        kept = [s for s in got if before is None or _after(s, before)]
        if len(got) < fetch or fetch >= _MAX_SCAN or _whole(kept, got[-1], limit):
            return sorted(kept, key=_order)[:limit]
        fetch = min(fetch * 4, _MAX_SCAN)


def _whole(kept: list[RunSummary], last: RunSummary, limit: int) -> bool:
    """True when the first ``limit`` rows of ``kept`` are known: ``last`` (the last row read; any
    row not read yet is shown no later) is shown earlier than the microsecond of the ``limit``-th."""
    if len(kept) < limit:
        return False
    edge = sorted(_order(s) for s in kept)[limit - 1][0]
    return _order(last)[0] > edge


def plan_view(run_id: str, events: Sequence[TraceEvent]) -> dict[str, Any] | None:
    """The run's plan DAG (its latest ``plan_started``) with each node's status; None without a plan."""
    started = next((e for e in reversed(events) if e.kind == "plan_started"), None)
    if started is None:
        return None
    status: dict[str, tuple[str, str | None]] = {}
    prefix = f"{run_id}:"
    for event in events:
        node = _node_of(event, prefix)
        if node is None:
            continue
        if event.kind == "observation":
            status[node] = _observed(event.data)
        elif event.kind == "plan_node_blocked":
            status[node] = ("blocked", None)
        elif event.kind == "plan_node_cancelled":
            status[node] = ("cancelled", "cancelled")
        elif event.kind == "plan_node_reused":
            status[node] = ("ok", None)
    nodes = []
    for raw in _listed(started.data.get("nodes")):  # a trace imported from elsewhere may hold anything
        if not isinstance(raw, Mapping):
            continue
        node_id = str(raw.get("id"))
        state, category = status.get(node_id, ("pending", None))
        nodes.append({"id": node_id, "tool": str(raw.get("tool", "")), "status": state, "category": category})
    edges = [[str(e[0]), str(e[1])] for e in _listed(started.data.get("edges")) if _pair(e)]
    return {"nodes": nodes, "edges": edges}


def _listed(value: Any) -> list[Any]:
    """``value`` when it is a list (as a plan's nodes and edges are recorded), else nothing."""
    return value if isinstance(value, list) else []


def _pair(value: Any) -> bool:
    return isinstance(value, list | tuple) and len(value) == 2


def _node_of(event: TraceEvent, prefix: str) -> str | None:
    if event.kind.startswith("plan_node_"):
        node = event.data.get("node")
        return str(node) if node is not None else None
    if event.kind == "observation" and event.call_id and event.call_id.startswith(prefix):
        return event.call_id[len(prefix) :]
    return None


def _observed(data: Mapping[str, Any]) -> tuple[str, str | None]:
    category = data.get("category")
    if category == "needs_approval":
        return "waiting_approval", category
    if category == "permission_denied":
        return "denied", category
    return str(data.get("status", "ok")), (str(category) if category is not None else None)


def event_view(event: TraceEvent) -> dict[str, Any]:
    """An event as the API answers it; its data as a store would write it (finite, depth-capped)."""
    return {
        "seq": event.seq,
        "kind": event.kind,
        "call_id": event.call_id if event.call_id is None else text_for_utf8(event.call_id),
        "at": event.ts,
        "data": value_for_utf8(json.loads(encode_data(event.data))),  # a response is UTF-8 whole
    }


def as_read(request: ApprovalRequest, now: float) -> ApprovalRequest:
    """``request`` with the status a reader is shown at ``now``: ``expired`` for an approval whose
    ``expires_at`` has passed.

    Expiry is read from ``expires_at``, never written: a store keeps such a request ``approved``
    (what the gate compares and sets), and the gate does not honour it
    (:meth:`ApprovalRequest.honoured`), so the listing names it as what it is.
    """
    if request.status == "approved" and request.expires_at is not None and now >= request.expires_at:
        return request.evolve(status="expired")
    return request


def approval_view(request: ApprovalRequest, *, hidden: bool = False) -> dict[str, Any]:
    """``ApprovalRequest.to_dict()`` plus ``request_id`` and the ``preview`` a person decides on.

    ``hidden``: the request holds data the viewer may not read (see :func:`hidden_requests`):
    every value (arguments, provenance, effects, reasons, details other than names, ids and its
    label, batch items) is redacted, the names of the arguments kept, and the preview says
    ``redacted``.
    """
    if hidden:
        request = _redacted_request(request)
    out = request.to_dict()
    name, _, version = request.tool.partition("@")
    preview: dict[str, Any] = {
        "tool": name,
        "version": version,
        "arguments": dict(request.arguments),
        "provenance": dict(request.provenance),
        "effects": list(request.effects),
        "reason": request.reason,
    }
    items = request.details.get("items")
    if isinstance(items, list):
        preview["items"] = items
    if hidden:
        preview["redacted"] = True
    return value_for_utf8({"request_id": request.id, **out, "preview": preview})  # UTF-8 whole


def hidden_requests(
    trace: TraceStore, requests: Iterable[ApprovalRequest], viewer: Principal | None
) -> set[str]:
    """The ids of the requests whose values ``viewer`` may not see.

    A request is hidden when its run's trace carries a label ``viewer`` may not read, or when the
    label it recorded of the call it holds (:data:`~actionspace.approval.requests.LABEL`), alone or
    joined with a label of its run, is one: the request's own label does not wait for the run's
    events to be written. A recorded label that is no well-formed label reads as secret with no
    readers; a request that recorded none (stored before requests did) is judged by its run alone.
    """
    listed = list(requests)
    runs = {run: _run_marks(trace, run, viewer) for run in dict.fromkeys(r.run_id for r in listed)}
    return {r.id for r in listed if _withheld(runs[r.run_id], r, viewer) is not None}


def withheld_label(trace: TraceStore, request: ApprovalRequest, viewer: Principal | None) -> Label | None:
    """A label of what ``request`` holds that ``viewer`` may not read (the one that hides it, as
    :func:`hidden_requests` judges); None when ``viewer`` may see every value of it."""
    return _withheld(_run_marks(trace, request.run_id, viewer), request, viewer)


def clearance(label: Label) -> str:
    """What a viewer needs to read values labelled ``label``, for a message to a person."""
    scope = f"the scope labels:{label.confidentiality}"
    if label.readers is None:
        return scope
    if not label.readers:
        return f"{scope} (the label names no reader)"
    shown = sorted(label.readers)[:_READERS_NAMED]
    more = ", …" if len(label.readers) > _READERS_NAMED else ""
    return f"{scope} or to be one of its readers ({', '.join(repr(r) for r in shown)}{more})"


_READERS_NAMED: Final = 5
"""Most reader ids a message names."""


def _withheld(
    run: tuple[set[Label], Label | None], request: ApprovalRequest, viewer: Principal | None
) -> Label | None:
    marks, unreadable = run
    if unreadable is not None:
        return unreadable
    own = mark_of(request.details)
    if own is None:
        return None
    if not may_read(own, viewer):
        return own
    return next((j for j in (m.join(own) for m in marks) if not may_read(j, viewer)), None)


def _run_marks(trace: TraceStore, run_id: str, viewer: Principal | None) -> tuple[set[Label], Label | None]:
    """The distinct labels the events of a run carry, read until one is a label ``viewer`` may not
    read (then also that label)."""
    marks: set[Label] = set()
    for event in trace.events(run_id):
        mark = mark_of(event.data)
        if mark is None or mark in marks:
            continue
        if not may_read(mark, viewer):
            return marks, mark
        marks.add(mark)
    return marks, None


def _redacted_request(request: ApprovalRequest) -> ApprovalRequest:
    details = {k: v if k in _KEPT_DETAILS else REDACTED for k, v in request.details.items() if k != "items"}
    own = mark_of(request.details)
    if own is not None:  # the label as it was judged: it names who may read, never a value
        details[LABEL] = own.to_dict()
    return request.evolve(
        args_digest=REDACTED,  # a digest of the values confirms a guess of them
        arguments=dict.fromkeys(request.arguments, REDACTED),
        provenance=dict.fromkeys(request.provenance, REDACTED),
        effects=[REDACTED for _ in request.effects],
        reason=REDACTED,
        details=details,
        decision_reason=None if request.decision_reason is None else REDACTED,
    )


VALUE_DIGESTS: Final = ("content_hash", "args_digest")
"""Fields holding a digest of a call's values: withheld with the values (a reader could hash its
guesses of a low-entropy secret, a PIN, an amount, and confirm one)."""


def without_digests(event: TraceEvent) -> TraceEvent:
    """``event`` (as :func:`~actionspace.policy.redaction.redact_events` left it) with the digests
    of its values withheld too when its values were redacted."""
    data = event.data
    if data.get("redacted") is not True or not any(k in data for k in VALUE_DIGESTS):
        return event
    return dataclasses.replace(
        event, data={k: REDACTED if k in VALUE_DIGESTS else v for k, v in data.items()}
    )


def entry_without_digests(entry: dict[str, Any]) -> dict[str, Any]:
    """A redacted ledger entry (``redact_entry``) with the digests of its values withheld too; its
    ``key`` stays, since it names the entry (``POST /api/ledger/{key}/resolve``)."""
    out = {**entry, "args_digest": REDACTED}
    observation = entry.get("observation")
    if isinstance(observation, Mapping) and "content_hash" in observation:
        out["observation"] = {**observation, "content_hash": REDACTED}
    return out


def pending_run_ids(requests: Iterable[ApprovalRequest]) -> set[str]:
    return {r.run_id for r in requests}


def tool_view(spec: ToolSpec) -> dict[str, Any]:
    """``ToolSpec.describe()`` plus what a person reviewing the catalog wants to see."""
    return {
        **spec.describe(),
        "summary": spec.summary,
        "lifecycle": spec.lifecycle,
        "idempotency": spec.idempotency,
        "reversible": spec.reversible,
        "requires_approval": spec.requires_approval,
        "reads": list(spec.reads),
        "writes": list(spec.writes),
        "owner": spec.owner,
    }
