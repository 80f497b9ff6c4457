"""Trace events and the store interface every trace backend implements.

An event is appended by each pipeline stage (DESIGN §9). Events of one call are handed to the
store together, in one ``append_many`` call, so a store can make them durable atomically: a killed
process leaves whole calls, never half of one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol, runtime_checkable

from actionspace.errors import ConfigurationError

__all__ = [
    "CALL_START_KINDS",
    "CLAIM_EXPIRY_S",
    "EVENT_KINDS",
    "AppendsNew",
    "AppendsRecords",
    "CallShape",
    "ClaimsRuns",
    "CompactCall",
    "CompactNode",
    "EventKind",
    "EventRecord",
    "FindsRunIds",
    "PagesRuns",
    "RunSummary",
    "TraceEvent",
    "TraceStore",
    "claim_expiry",
    "expand_call",
    "expand_node",
]

EventKind = Literal[
    "run_started",
    "candidates_offered",
    "model_output",
    "parsed",
    "resolved",
    "validated",
    "authorized",
    "approval_requested",
    "approval_decided",
    "ledger",
    "dispatched",
    "dry_run",  # a call checked and answered by its preview instead of dispatched (no ledger, no effect)
    "attempt",
    "observation",
    "verified",
    "run_finished",
    # plans (actionspace.plan)
    "plan_started",
    "plan_rejected",
    "plan_finished",
    "plan_node_blocked",
    "plan_node_cancelled",
    "plan_node_reused",
    "plan_node_abort_answered",
    "plan_node_held",  # a node held for approval: the labels its references carried (service/held_nodes.py)
    "service_run_submitted",  # what a service run was started with (service/continuation.py)
    "service_run_driver",  # a server released or took over a service run (service/continuation.py)
    "speculation",
    # budgets and the read cache
    "budget",
    "metered",
    "cache_hit",
    # pagination walks
    "aggregated",
    # information flow and progressive disclosure
    "user_input",
    "flow_checked",
    "proposed",
    "described",
    # agent sessions (actionspace.session)
    "user_turn",
    "rendered",
    "gate_decided",
]
EVENT_KINDS: tuple[str, ...] = EventKind.__args__  # type: ignore[attr-defined]

CLAIM_EXPIRY_S: Final = 300.0
"""Seconds a run claim with no event stays taken (see :class:`ClaimsRuns`); stores take another
bound as ``claim_expiry_s``."""

CALL_START_KINDS: frozenset[str] = frozenset({"resolved", "authorized", "validated", "proposed"})
"""Stage events one handling of a call records at most once each: a second event of one of these
kinds for a call id starts a new handling of that id (a model that numbers its calls ``call_1`` in
every output, a held call proposed again). Readers that group a run's events by call use it."""


EventRecord = tuple[int, str, float, "str | None", Mapping[str, Any]]
"""A compact event of one run: ``(seq, kind, ts, call_id, data)``."""


@dataclass(frozen=True, slots=True, eq=False)
class CallShape:
    """What the events of every simple call of one tool by one principal share."""

    authorized: Mapping[str, Any]
    """The ``authorized`` payload (shared: never mutated)."""
    validated: Mapping[str, Any]
    """The ``validated`` payload of an accepted call (shared: never mutated)."""
    tool: str
    version: str


CompactCall = tuple[
    int, float, "str | None", CallShape, Any, str, "str | None", str, int, float, "str | None"
]
"""One simple call's events as one record, expanded by :func:`expand_call`:
``(seq, ts, call_id, shape, model, name, id, node, obs_seq, obs_ts, content_hash)``.

``seq`` numbers the first event; ``model_output`` (when ``model`` is not None: the raw text;
bytes: the UTF-8 JSON of a provider object, whose payload is ``{"raw": that object}``; a dict:
the ``model_output`` payload itself; a tuple: ``(format, bytes or dict)``, for a provider object
parsed in another format than ``openai_chat``), ``parsed`` (format ``openai_chat`` or the tuple's,
``toolcall`` without ``model``), ``authorized``,
``validated`` and ``dispatched`` follow it at ``ts`` with consecutive numbers. ``obs_seq`` is
the number of the ``ok`` observation (``-1``: none is folded in; the call records it on its own),
recorded at ``obs_ts`` with ``content_hash``.
"""


CompactNode = tuple[int, float, str, CallShape, Mapping[str, Any], str, int, float, "str | None"]
"""One plain plan node's events as one record, expanded by :func:`expand_node`:
``(seq, ts, call_id, shape, arguments, node, obs_seq, obs_ts, content_hash)``.

``authorized``, ``validated``, ``proposed`` (with a copy of ``arguments``) and ``dispatched``
are numbered ``seq`` to ``seq + 3``, at ``ts``. ``obs_seq`` is the number of the ``ok``
observation (``-1``: none is folded in; the node recorded whatever followed on its own),
recorded at ``obs_ts`` with ``content_hash``.
"""


def expand_node(node: CompactNode) -> list[EventRecord]:
    """The events a compact plan-node record stands for, as the staged path records them."""
    seq, ts, call_id, shape, arguments, node_id, obs_seq, obs_ts, digest = node
    tool, version = shape.tool, shape.version
    proposed = {"tool": tool, "version": version, "arguments": dict(arguments)}
    dispatched = {"tool": tool, "version": version, "node_id": node_id, "attempt": 1}
    out: list[EventRecord] = [
        (seq, "authorized", ts, call_id, shape.authorized),
        (seq + 1, "validated", ts, call_id, shape.validated),
        (seq + 2, "proposed", ts, call_id, proposed),
        (seq + 3, "dispatched", ts, call_id, dispatched),
    ]
    if obs_seq >= 0:
        observed = {"status": "ok", "tool": tool, "version": version, "content_hash": digest}
        out.append((obs_seq, "observation", obs_ts, call_id, observed))
    return out


def expand_call(call: CompactCall) -> list[EventRecord]:
    """The events a compact call record stands for, as the staged path records them."""
    seq, ts, call_id, shape, model, name, ident, node, obs_seq, obs_ts, digest = call
    out: list[EventRecord] = []
    if model is not None:
        fmt = "openai_chat"
        if type(model) is tuple:  # (format, the object as below) for a provider format not Chat's
            fmt, model = model
        if type(model) is str:
            raw: Mapping[str, Any] = {"raw": model}
        elif type(model) is bytes:  # a provider object's JSON (store_encoding.compact_raw)
            raw = {"raw": json.loads(model)}
        else:
            raw = model
        out.append((seq, "model_output", ts, None, raw))
        seq += 1
    else:
        fmt = "toolcall"
    tool, version = shape.tool, shape.version
    out.append((seq, "parsed", ts, None, {"format": fmt, "calls": ({"name": name, "id": ident},)}))
    out.append((seq + 1, "authorized", ts, call_id, shape.authorized))
    out.append((seq + 2, "validated", ts, call_id, shape.validated))
    dispatched = {"tool": tool, "version": version, "node_id": node, "attempt": 1}
    out.append((seq + 3, "dispatched", ts, call_id, dispatched))
    if obs_seq >= 0:
        observed = {"status": "ok", "tool": tool, "version": version, "content_hash": digest}
        out.append((obs_seq, "observation", obs_ts, call_id, observed))
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceEvent:
    """One decision of one stage."""

    run_id: str
    seq: int
    """Position within the run, from 0; unique per run."""
    kind: str
    """One of :data:`EVENT_KINDS`."""
    ts: float
    """Unix time in seconds."""
    call_id: str | None = None
    data: Mapping[str, Any] = field(default_factory=dict)
    """JSON-serializable payload; names tool versions, schema hashes, rule versions."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "seq": self.seq,
            "kind": self.kind,
            "ts": self.ts,
            "call_id": self.call_id,
            "data": dict(self.data),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TraceEvent:
        return cls(
            run_id=str(data["run_id"]),
            seq=int(data["seq"]),
            kind=str(data["kind"]),
            ts=float(data["ts"]),
            call_id=data.get("call_id"),
            data=dict(data.get("data") or {}),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSummary:
    """One line of ``actionspace trace list``."""

    run_id: str
    started_at: float
    last_at: float
    events: int
    calls: int
    errors: int
    finished: bool


@runtime_checkable
class TraceStore(Protocol):
    """Where events go. Implementations: memory (tests, bench) and SQLite (default)."""

    def append_many(self, events: Sequence[TraceEvent]) -> None:
        """Make these events durable together (one transaction where the store has them)."""
        ...

    def events(self, run_id: str) -> list[TraceEvent]:
        """Every event of a run, ordered by ``seq``."""
        ...

    def runs(self, *, limit: int = 50, since: float | None = None) -> list[RunSummary]:
        """The most recent runs first; with ``since`` (Unix seconds), only runs with an event at
        or after it (their other runs are not counted at all, where the store keeps run spans)."""
        ...

    def next_seq(self, run_id: str) -> int:
        """The next free ``seq`` of a run (0 for a new run); used when a run resumes."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class AppendsRecords(Protocol):
    """A store that takes compact records directly (no TraceEvent objects on the hot path)."""

    def append_records(self, run_id: str, records: Sequence[EventRecord]) -> None: ...


@runtime_checkable
class FindsRunIds(Protocol):
    """Optional store capability: list run ids by prefix (``actionspace trace show`` uses it)."""

    def run_ids(self, prefix: str = "", *, limit: int | None = None) -> list[str]:
        """Run ids starting with ``prefix``, sorted; at most ``limit`` of them (None: all)."""
        ...


@runtime_checkable
class PagesRuns(Protocol):
    """Optional store capability: page through the run listing by a cursor (the service's scan for
    runs to continue reads every run that way, a page at a time)."""

    def runs_after(
        self, after: tuple[float, str], *, limit: int = 50, since: float | None = None
    ) -> list[RunSummary]:
        """As ``runs``, only the runs listed after the row whose ``(last_at, run_id)`` is ``after``
        (latest activity first, ties by run id), so that a page's last row names the next page."""
        ...


@runtime_checkable
class AppendsNew(Protocol):
    """Optional store capability: append skipping events already stored (imports use it)."""

    def append_new(self, events: Sequence[TraceEvent]) -> int:
        """Append, atomically, the events whose ``(run_id, seq)`` is not stored; return how many."""
        ...


@runtime_checkable
class ClaimsRuns(Protocol):
    """Optional store capability: create a run id atomically (the service starts runs with it)."""

    def claim_run(self, run_id: str) -> bool:
        """True when this call claimed ``run_id``: no event and no live claim of it was stored, and
        its claim now is, in one transaction. Of several callers at once, in any threads or
        processes sharing the store, exactly one gets True. A claim records no event (``next_seq``
        stays 0) and a claimed run is listed by ``runs`` only once it has events. A claim no event
        followed expires after the store's ``claim_expiry_s`` (default :data:`CLAIM_EXPIRY_S`): a
        starter that died between claiming and recording does not keep the id taken forever."""
        ...


def claim_expiry(seconds: float) -> float:
    """``seconds`` as a store's ``claim_expiry_s``; raises ConfigurationError unless it is positive
    (``math.inf``: a claim never expires)."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0:
        raise ConfigurationError(f"claim_expiry_s must be a positive number of seconds, got {seconds!r}")
    return float(seconds)


def summarize(run_id: str, events: Iterable[TraceEvent]) -> RunSummary | None:
    """Build a RunSummary from a run's events (None when there are none)."""
    evs = list(events)
    if not evs:
        return None
    answers = [e for e in evs if e.kind == "observation" and not _group_record(e)]
    calls = sum(1 for e in answers if not ("rolled_back" in e.data and "group" in e.data))
    errors = sum(1 for e in answers if e.data.get("status") == "error")
    return RunSummary(
        run_id=run_id,
        started_at=evs[0].ts,
        last_at=evs[-1].ts,
        events=len(evs),
        calls=calls,
        errors=errors,
        finished=any(e.kind == "run_finished" for e in evs),
    )


def _group_record(event: TraceEvent) -> bool:
    """True for an atomic group's own observation (call id ``<run>:<group>``): no call of a tool.

    A member the group's rollback undid is answered again (an observation with ``rolled_back``):
    the same call, which :func:`summarize` counts once, as the error it ended in."""
    group = event.data.get("group")
    return type(group) is str and event.call_id == f"{event.run_id}:{group}"
