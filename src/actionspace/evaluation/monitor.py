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
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from actionspace.errors import ConfigurationError
from actionspace.evaluation._monitor_calls import Call, link, run_calls
from actionspace.evaluation.outcomes import UNDECIDED_CATEGORIES
from actionspace.trace._runs_events import events_of_runs
from actionspace.trace.events import TraceStore

__all__ = [
    "Alert",
    "AlertKind",
    "MonitorReport",
    "MonitorThresholds",
    "ToolHealth",
    "monitor",
]

AlertKind = Literal["field_concentration", "unknown_commits"]
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
    tallies: dict[str, _Tally] = {}
    runs = 0
    # the runs' events read in one statement of a store that can (``_runs_events``), a run at a time;
    # a run's calls are counted and dropped: what is kept is one count per tool
    for _, events in events_of_runs(store, ids):
        in_run = [c for c in run_calls(events) if c.tool is not None]
        if since is not None:
            in_run = [c for c in in_run if c.first_ts >= since]
        if in_run:
            runs += 1
            link(in_run)
            _tally(in_run, tallies)
    tools = _tools(tallies)
    return MonitorReport(
        runs=runs,
        calls=sum(t.calls for t in tallies.values()),
        since=since,
        tools=tools,
        alerts=_alerts(tools, thresholds or MonitorThresholds()),
    )


@dataclass(slots=True)
class _Tally:
    """One tool's figures summed over the runs read so far (see ToolHealth); their calls are not kept."""

    calls: int = 0
    rejects: Counter[str] = field(default_factory=Counter)
    fields: Counter[str] = field(default_factory=Counter)
    failures: Counter[str] = field(default_factory=Counter)
    undecided: Counter[str] = field(default_factory=Counter)
    unknown_commits: int = 0
    ok_results: int = 0
    replays: int = 0
    used_results: int = 0
    consumers: int = 0
    consumers_ok: int = 0


def _tally(calls: Sequence[Call], tallies: dict[str, _Tally]) -> None:
    """Add one run's calls (linked: a call consumes calls of its own run only) to ``tallies``."""
    consumers_of: dict[str, dict[int, Call]] = {}
    used: set[int] = set()
    for call in calls:
        for source in call.inputs:
            if source.status == "ok" and source.tool is not None:
                used.add(id(source))
                consumers_of.setdefault(source.tool, {})[id(call)] = call
    for call in calls:
        assert call.tool is not None
        tally = tallies.get(call.tool) or tallies.setdefault(call.tool, _Tally())
        tally.calls += 1
        tally.unknown_commits += call.unknown_commit
        if call.rejected is not None:
            tally.rejects[call.rejected] += 1
            tally.fields.update(call.fields)
        elif call.status == "error" and call.category in UNDECIDED_CATEGORIES:
            tally.undecided[str(call.category)] += 1
        elif call.status == "error" and call.dispatched:
            tally.failures[call.category or "unknown"] += 1
        if call.status == "ok" and call.replayed:  # rejected or not, as a trace may say both
            tally.replays += 1
        elif call.status == "ok":
            tally.ok_results += 1
            tally.used_results += id(call) in used
    for tool, consumers in consumers_of.items():  # a source's tool is that of a call of this run
        tally = tallies.get(tool) or tallies.setdefault(tool, _Tally())
        tally.consumers += len(consumers)
        tally.consumers_ok += sum(1 for c in consumers.values() if c.status == "ok")


def _tools(tallies: Mapping[str, _Tally]) -> tuple[ToolHealth, ...]:
    total = sum(t.calls for t in tallies.values())
    out = [
        ToolHealth(
            tool=tool,
            calls=t.calls,
            selection_rate=t.calls / total,
            rejects_by_category=_count(t.rejects),
            rejects_by_field=_count(t.fields),
            failures_by_category=_count(t.failures),
            undecided_by_category=_count(t.undecided),
            unknown_commits=t.unknown_commits,
            ok_results=t.ok_results,
            replays=t.replays,
            used_results=t.used_results,
            consumers=t.consumers,
            consumers_ok=t.consumers_ok,
        )
        for tool, t in tallies.items()
        if t.calls
    ]
    out.sort(key=lambda t: (-t.calls, t.tool))
    return tuple(out)


def _count(counted: Counter[str]) -> dict[str, int]:
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
