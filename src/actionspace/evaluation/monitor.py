"""Per-tool health read from any trace store: what is chosen, rejected, failed and used (DESIGN §9).

:func:`monitor` reads the runs of a trace store (SQLite, PostgreSQL or memory) and reports, for every
tool that was called:

* how often it was selected, and its share of all calls;
* the calls rejected before dispatch (resolution, validation, authorization and its gates: scopes,
  information flow, budget), by error category and by the JSON pointer of each field error;
* the dispatched calls that ended in a decided error (failures), by category;
* the calls left undecided, as the evaluation metrics read them: waiting for approval
  (``needs_approval``) or told ``unknown_commit``, by category; and the unknown commits still
  unsettled (the ledger moved the call to ``unknown_commit`` and no later ``ledger`` event of its
  key, from ``Runtime.resolve`` or ``recover`` in any process, has settled it since);
* a call cancelled before it was sent (no ``dispatched`` event: the runtime closed first, or a
  plan node was blocked) is a call in none of these figures: nothing ran;
* replays: calls answered from the ledger's record of an identical committed action (nothing was
  sent); they are calls, but neither an execution nor a second ok result;
* result utilization: the share of its ok results that another call of the same run consumed —
  through an argument provenance mark ``tool_result:<call_id>`` (a ``provenance`` mapping on one
  of the consumer's events), a value the runtime found in that result (the ``proposed`` event's
  inferred provenance, ``tool_result(<call_id>, …)`` or ``untrusted(<call_id>, …)``) or through
  a plan reference (the ``refs`` of a ``plan_started`` node; without them, the plan's declared
  edges);
* downstream success: the share of those consuming calls that ended ok.

A message none of whose calls ran (a ``parse_error``, answered and traced under each call id it
gave) is no call of any tool, and is in none of these figures; a later handling of such an id is
a call of its own.

Alerts name a tool whose rejects concentrate on one field, and a tool with unknown commits.
A *call* is one handling of a ``call_id`` of one run that names a tool: a model that numbers its
calls ``call_1`` in every output makes a new call each time (a second event of a kind in
:data:`~actionspace.trace.events.CALL_START_KINDS` starts it). Its outcome is its last
observation, or an error when a verifier rejected its result afterwards. An atomic group's own
record (its ledger entry, ``group.<environment>``) is not a call: its members are, and an unknown
commit of the group is one of each member.

A trace may come from elsewhere (``actionspace trace import``): a payload field of an unexpected
type (a category that is no text, field errors or plan edges that are no list) is read as absent,
so the report still counts every call.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from actionspace.errors import ConfigurationError
from actionspace.evaluation._monitor_sources import inferred_sources, items, plan_links
from actionspace.evaluation.outcomes import UNDECIDED_CATEGORIES
from actionspace.trace.events import CALL_START_KINDS, TraceEvent, TraceStore

__all__ = [
    "Alert",
    "AlertKind",
    "MonitorReport",
    "MonitorThresholds",
    "ToolHealth",
    "monitor",
]

AlertKind = Literal["field_concentration", "unknown_commits"]
_MARK = "tool_result:"
_REFUSED = frozenset({"permission_denied", "policy_violation", "budget_exceeded"})
"""Categories of the authorize stage and its gates (DESIGN §4): a call ending in one undispatched
was rejected, whichever stage's event said so."""
_DEFAULT_MAX_RUNS = 100_000


@dataclass(frozen=True, slots=True, kw_only=True)
class MonitorThresholds:
    """When an alert fires."""

    field_share: float = 0.5
    """Share of a tool's rejected calls (0..1) that must name one field; default 0.5."""
    min_rejects: int = 5
    """Rejected calls a tool needs before the field alert is considered; default 5."""
    min_unknown_commits: int = 1
    """Unknown commits of a tool that raise an alert; default 1; 0 turns the alert off."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.field_share <= 1.0:  # NaN fails too: an alert that could never fire
            raise ConfigurationError(f"field_share must be within [0, 1], got {self.field_share!r}")
        for name in ("min_rejects", "min_unknown_commits"):
            if getattr(self, name) < 0:
                raise ConfigurationError(f"{name} must be 0 or more, got {getattr(self, name)!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolHealth:
    """What the trace says about one tool."""

    tool: str
    calls: int
    """Calls that named this tool."""
    selection_rate: float
    """``calls`` over all calls in the report (0..1)."""
    rejects_by_category: Mapping[str, int] = field(default_factory=dict)
    """Calls rejected before dispatch (resolution, validation, authorization), by error category."""
    rejects_by_field: Mapping[str, int] = field(default_factory=dict)
    """Rejected calls per JSON pointer of a field error (a call counts once per field)."""
    failures_by_category: Mapping[str, int] = field(default_factory=dict)
    """Dispatched calls whose last observation is a decided error, by error category."""
    undecided_by_category: Mapping[str, int] = field(default_factory=dict)
    """Calls whose last observation is undecided (``needs_approval``, ``unknown_commit``), by the
    category the model was told; neither a failure nor a success."""
    unknown_commits: int = 0
    """Calls the ledger still holds in ``unknown_commit``: they may or may not have taken effect."""
    ok_results: int = 0
    """Calls whose last observation is ok, replays left out (each action's result counts once)."""
    replays: int = 0
    """Calls answered from the ledger's record of an identical committed call (nothing sent)."""
    used_results: int = 0
    """Of ``ok_results``, those another call of the same run consumed."""
    consumers: int = 0
    """Distinct calls that consumed one of this tool's results."""
    consumers_ok: int = 0
    """Of ``consumers``, those whose last observation is ok."""

    @property
    def rejects(self) -> int:
        return sum(self.rejects_by_category.values())

    @property
    def failures(self) -> int:
        return sum(self.failures_by_category.values())

    @property
    def undecided(self) -> int:
        return sum(self.undecided_by_category.values())

    @property
    def utilization(self) -> float | None:
        """``used_results / ok_results``; None without ok results."""
        return self.used_results / self.ok_results if self.ok_results else None

    @property
    def downstream_success(self) -> float | None:
        """``consumers_ok / consumers``; None when nothing consumed a result."""
        return self.consumers_ok / self.consumers if self.consumers else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "calls": self.calls,
            "selection_rate": self.selection_rate,
            "rejects": self.rejects,
            "rejects_by_category": dict(self.rejects_by_category),
            "rejects_by_field": dict(self.rejects_by_field),
            "failures": self.failures,
            "failures_by_category": dict(self.failures_by_category),
            "undecided": self.undecided,
            "undecided_by_category": dict(self.undecided_by_category),
            "unknown_commits": self.unknown_commits,
            "ok_results": self.ok_results,
            "replays": self.replays,
            "used_results": self.used_results,
            "utilization": self.utilization,
            "consumers": self.consumers,
            "consumers_ok": self.consumers_ok,
            "downstream_success": self.downstream_success,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Alert:
    """Something about one tool a person should look at."""

    kind: AlertKind
    tool: str
    message: str
    count: int
    """Calls behind the alert: rejects on ``field``, or unknown commits."""
    total: int
    """The calls ``count`` is a share of: the tool's rejects, or its calls."""
    field: str | None = None
    """The JSON pointer the rejects concentrate on (``field_concentration`` only)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class MonitorReport:
    """Per-tool health over the runs read, most selected tool first, and the alerts raised."""

    runs: int
    calls: int
    since: float | None = None
    """Unix time (seconds) calls started at or after; None: all."""
    tools: tuple[ToolHealth, ...] = ()
    alerts: tuple[Alert, ...] = ()

    def tool(self, name: str) -> ToolHealth:
        """The health of tool ``name``; raises KeyError when it was never called."""
        for health in self.tools:
            if health.tool == name:
                return health
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "calls": self.calls,
            "since": self.since,
            "tools": [t.to_dict() for t in self.tools],
            "alerts": [a.to_dict() for a in self.alerts],
        }


@dataclass(slots=True)
class _Call:
    call_id: str
    first_ts: float
    first_seq: int
    tool: str | None = None
    kinds: set[str] = field(default_factory=set)
    """The kinds of event this handling of the call id recorded."""
    group: str | None = None
    """The atomic group this call belongs to: as a member, or as the group's own record."""
    own_group: bool = False
    """True for the group's own record (call id ``<run>:<group>``), which is no tool call."""
    rejected: str | None = None
    fields: set[str] = field(default_factory=set)
    dispatched: bool = False
    status: str | None = None
    category: str | None = None
    unknown_commit: bool = False
    key: str | None = None
    """The idempotency key its ledger events name."""
    replayed: bool = False
    """Its last observation was answered from the ledger's record (nothing sent)."""
    content_hash: str | None = None
    original: _Call | None = None
    """For a replay: the call whose result it repeated."""
    sources: set[str] = field(default_factory=set)
    """Call ids whose results this call consumed."""
    inputs: list[_Call] = field(default_factory=list)
    """The calls of the same run behind ``sources``."""


def monitor(
    store: TraceStore,
    *,
    since: float | None = None,
    run_ids: Iterable[str] | None = None,
    thresholds: MonitorThresholds | None = None,
    max_runs: int = _DEFAULT_MAX_RUNS,
) -> MonitorReport:
    """Read ``store`` and report per-tool health and alerts.

    ``since`` (Unix seconds) keeps the calls whose first event is at or after it, in runs active
    since then; ``run_ids`` reads only those runs (default: the ``max_runs`` most recent runs,
    100,000 by default). ``thresholds`` default to :class:`MonitorThresholds`. Raises
    ConfigurationError when ``since`` is not a finite time.
    """
    if since is not None and not math.isfinite(since):
        raise ConfigurationError(f"since must be a finite Unix time in seconds, got {since!r}")
    if run_ids is None:
        ids = [s.run_id for s in store.runs(limit=max_runs, since=since)]
    else:
        ids = list(dict.fromkeys(run_ids))
    calls: list[_Call] = []
    runs = 0
    for run_id in ids:
        in_run = [c for c in _calls(store.events(run_id)) if c.tool is not None]
        if since is not None:
            in_run = [c for c in in_run if c.first_ts >= since]
        if in_run:
            runs += 1
            calls.extend(in_run)
            _link(in_run)
    tools = _tools(calls)
    return MonitorReport(
        runs=runs,
        calls=len(calls),
        since=since,
        tools=tools,
        alerts=_alerts(tools, thresholds or MonitorThresholds()),
    )


def _calls(events: Sequence[TraceEvent]) -> list[_Call]:
    calls: list[_Call] = []
    current: dict[str, _Call] = {}
    plan_sources: dict[str, set[str]] = {}
    by_key: dict[str, _Call] = {}
    for ev in sorted(events, key=lambda e: e.seq):
        data: Mapping[str, Any] = ev.data if isinstance(ev.data, Mapping) else {}
        if ev.kind == "plan_started":
            plan_links(ev.run_id, data, plan_sources)
            continue
        settled = by_key.get(str(data.get("key"))) if ev.kind == "ledger" else None
        if settled is not None and data.get("from") == "unknown_commit":  # resolved, here or elsewhere
            settled.unknown_commit = data.get("to") == "unknown_commit"
        if ev.call_id is None:
            continue
        if ev.kind == "observation" and data.get("category") == "parse_error":
            # a message none of whose calls ran, answered under each of its ids: no call of a
            # tool, and what follows under such an id is a new one
            current.pop(ev.call_id, None)
            continue
        call = current.get(ev.call_id)
        if call is None or (ev.kind in CALL_START_KINDS and ev.kind in call.kinds):
            call = current[ev.call_id] = _Call(ev.call_id, ev.ts, ev.seq)
            calls.append(call)
        call.kinds.add(ev.kind)
        tool = data.get("tool")
        if call.tool is None and isinstance(tool, str):
            call.tool = tool
        group = data.get("group")
        if isinstance(group, str):
            call.group = group
            call.own_group = call.own_group or ev.call_id == f"{ev.run_id}:{group}"
        _apply(call, ev.kind, data)
        if call.key is not None:
            by_key.setdefault(call.key, call)
    for call in calls:
        call.sources |= plan_sources.get(call.call_id, set())
    _originals(calls)
    return _fold_groups(calls)


def _originals(calls: Sequence[_Call]) -> None:
    """Each replay's original: the latest earlier ok call of its tool with the same result."""
    latest: dict[tuple[str | None, str | None], _Call] = {}
    for call in sorted(calls, key=lambda c: c.first_seq):
        if call.status != "ok":
            continue
        if call.replayed:
            call.original = latest.get((call.tool, call.content_hash))
        else:
            latest[(call.tool, call.content_hash)] = call


def _fold_groups(calls: list[_Call]) -> list[_Call]:
    """The calls without atomic groups' own records; a group's unknown commit marks its members."""
    unsettled = {c.group for c in calls if c.own_group and c.unknown_commit}
    for call in calls:
        if not call.own_group and call.group in unsettled:
            call.unknown_commit = True
    return [c for c in calls if not c.own_group]


def _text(value: Any) -> str | None:
    """``value`` when it is non-empty text, else None."""
    return value if isinstance(value, str) and value else None


def _apply(call: _Call, kind: str, data: Mapping[str, Any]) -> None:
    provenance = data.get("provenance")
    if isinstance(provenance, Mapping):
        for mark in provenance.values():
            if isinstance(mark, str) and mark.startswith(_MARK):
                call.sources.add(mark[len(_MARK) :])
            elif kind == "proposed" and isinstance(mark, list):
                call.sources.update(inferred_sources(mark))
    category = _text(data.get("category"))
    if kind == "resolved" and category is not None:
        call.rejected = category
    elif kind == "validated" and data.get("verdict") == "rejected":
        call.rejected = category or "invalid_arguments"
        for error in items(data.get("field_errors")):
            if isinstance(error, Mapping) and isinstance(error.get("path"), str):
                call.fields.add(error["path"])
    elif kind == "dispatched":
        call.dispatched = True
    elif kind == "observation":
        call.status = str(data.get("status"))
        call.category = category if call.status != "ok" else None
        call.replayed = data.get("replayed") is True
        call.content_hash = _text(data.get("content_hash"))
        if call.rejected is None and not call.dispatched and call.category in _REFUSED:
            call.rejected = call.category
    elif kind == "verified" and data.get("verdict") == "rejected":
        call.status, call.category = "error", category or "verification_failed"
    elif kind == "ledger":
        call.key = call.key or _text(data.get("key"))
        call.unknown_commit = call.unknown_commit or data.get("to") == "unknown_commit"


def _link(calls: Sequence[_Call]) -> None:
    """Resolve each call's sources to the calls of its run (other than itself): of the handlings
    of a source's call id, the latest one that started before the consumer."""
    by_id: dict[str, list[_Call]] = {}
    for call in sorted(calls, key=lambda c: c.first_seq):
        by_id.setdefault(call.call_id, []).append(call)
    starts = {call_id: [c.first_seq for c in handlings] for call_id, handlings in by_id.items()}
    for call in calls:
        inputs: list[_Call] = []
        for source in sorted(call.sources):
            handlings = by_id.get(source, [])
            before = bisect_left(starts.get(source, []), call.first_seq)
            if before:
                inputs.append(handlings[before - 1])
            elif handlings and source != call.call_id:
                inputs.append(handlings[0])
        call.inputs = [source.original or source for source in inputs]


def _tools(calls: Sequence[_Call]) -> tuple[ToolHealth, ...]:
    by_tool: dict[str, list[_Call]] = {}
    consumers_of: dict[str, dict[int, _Call]] = {}
    used: set[int] = set()
    for call in calls:
        assert call.tool is not None
        by_tool.setdefault(call.tool, []).append(call)
        for source in call.inputs:
            if source.status == "ok" and source.tool is not None:
                used.add(id(source))
                consumers_of.setdefault(source.tool, {})[id(call)] = call
    total = len(calls)
    out: list[ToolHealth] = []
    for tool, own in by_tool.items():
        rejected = [c for c in own if c.rejected is not None]
        ended = [c for c in own if c.rejected is None and c.status == "error"]
        undecided = [c for c in ended if c.category in UNDECIDED_CATEGORIES]
        failed = [c for c in ended if c.dispatched and c.category not in UNDECIDED_CATEGORIES]
        consumers = list(consumers_of.get(tool, {}).values())
        ok = [c for c in own if c.status == "ok" and not c.replayed]
        out.append(
            ToolHealth(
                tool=tool,
                calls=len(own),
                selection_rate=len(own) / total,
                rejects_by_category=_count(c.rejected for c in rejected),
                rejects_by_field=_count(f for c in rejected for f in sorted(c.fields)),
                failures_by_category=_count(c.category or "unknown" for c in failed),
                undecided_by_category=_count(c.category for c in undecided),
                unknown_commits=sum(1 for c in own if c.unknown_commit),
                ok_results=len(ok),
                replays=sum(1 for c in own if c.status == "ok" and c.replayed),
                used_results=sum(1 for c in ok if id(c) in used),
                consumers=len(consumers),
                consumers_ok=sum(1 for c in consumers if c.status == "ok"),
            )
        )
    out.sort(key=lambda t: (-t.calls, t.tool))
    return tuple(out)


def _count(values: Iterable[str | None]) -> dict[str, int]:
    counted = Counter(v for v in values if v is not None)
    return dict(sorted(counted.items(), key=lambda kv: (-kv[1], kv[0])))


def _alerts(tools: Sequence[ToolHealth], limits: MonitorThresholds) -> tuple[Alert, ...]:
    alerts: list[Alert] = []
    for health in tools:
        rejects = health.rejects
        if rejects >= limits.min_rejects and health.rejects_by_field:
            top, count = next(iter(health.rejects_by_field.items()))
            if count / rejects >= limits.field_share:
                alerts.append(
                    Alert(
                        kind="field_concentration",
                        tool=health.tool,
                        field=top,
                        count=count,
                        total=rejects,
                        message=f"{count:,} of {_counted(rejects, 'rejected call')} of {health.tool} "
                        f"{'fails' if count == 1 else 'fail'} on {top}",
                    )
                )
        if limits.min_unknown_commits > 0 and health.unknown_commits >= limits.min_unknown_commits:
            alerts.append(
                Alert(
                    kind="unknown_commits",
                    tool=health.tool,
                    count=health.unknown_commits,
                    total=health.calls,
                    message=f"{_counted(health.unknown_commits, 'call')} of {health.tool} may or may not "
                    f"have committed; reconcile {'it' if health.unknown_commits == 1 else 'them'}",
                )
            )
    return tuple(alerts)


def _counted(n: int, noun: str) -> str:
    """``n`` and ``noun``, in the plural unless ``n`` is 1, as the CLI counts
    (:func:`actionspace._cli_tables.counted`, not imported: it would bring Typer into the HTTP service)."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"
