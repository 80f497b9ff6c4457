"""A run's calls, read from its events in any order and shape (see ``monitor``'s docstring: what a
call is, its outcome, the results it consumed)."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from actionspace.evaluation._monitor_sources import inferred_sources, items, plan_links
from actionspace.trace.events import CALL_START_KINDS, TraceEvent

__all__ = ["Call", "link", "run_calls"]

_MARK = "tool_result:"
_REFUSED = frozenset({"permission_denied", "policy_violation", "budget_exceeded"})
"""Categories of the authorize stage and its gates (DESIGN §4): a call ending in one undispatched
was rejected, whichever stage's event said so."""


@dataclass(slots=True)
class Call:
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
    original: Call | None = None
    """For a replay: the call whose result it repeated."""
    sources: set[str] = field(default_factory=set)
    """Call ids whose results this call consumed."""
    inputs: list[Call] = field(default_factory=list)
    """The calls of the same run behind ``sources``."""


def run_calls(events: Sequence[TraceEvent]) -> list[Call]:
    """The calls of one run's ``events`` (in any order: read by ``seq``), atomic groups' own records
    left out, each replay's original found; their sources are call ids until :func:`link`."""
    calls: list[Call] = []
    current: dict[str, Call] = {}
    plan_sources: dict[str, set[str]] = {}
    by_key: dict[str, Call] = {}
    for ev in sorted(events, key=lambda e: e.seq):
        data: Mapping[str, Any] = ev.data if isinstance(ev.data, Mapping) else {}
        if ev.kind == "plan_started":
            plan_links(ev.run_id, data, plan_sources)
            continue
        settled = by_key.get(_text(data.get("key")) or "") if ev.kind == "ledger" else None
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
            call = current[ev.call_id] = Call(ev.call_id, ev.ts, ev.seq)
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
        if call.rejected is not None and (call.dispatched or call.status == "ok"):
            # a trace no runtime writes (a stage said rejected, yet the call was sent or answered
            # ok): it was not rejected before dispatch, and its last observation is its outcome
            call.rejected, call.fields = None, set()
    _originals(calls)
    return _fold_groups(calls)


def _originals(calls: Sequence[Call]) -> None:
    """Each replay's original: the latest earlier ok call of its tool with the same result."""
    latest: dict[tuple[str | None, str | None], Call] = {}
    for call in sorted(calls, key=lambda c: c.first_seq):
        if call.status != "ok":
            continue
        if call.replayed:
            call.original = latest.get((call.tool, call.content_hash))
        else:
            latest[(call.tool, call.content_hash)] = call


def _fold_groups(calls: list[Call]) -> list[Call]:
    """The calls without atomic groups' own records; a group's unknown commit marks its members."""
    unsettled = {c.group for c in calls if c.own_group and c.unknown_commit}
    for call in calls:
        if not call.own_group and call.group in unsettled:
            call.unknown_commit = True
    return [c for c in calls if not c.own_group]


def _text(value: Any) -> str | None:
    """``value`` when it is non-empty text, else None."""
    return value if isinstance(value, str) and value else None


def _apply(call: Call, kind: str, data: Mapping[str, Any]) -> None:
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
        status = data.get("status")  # text only: repr of a value nested deep enough raises
        call.status = status if isinstance(status, str) else None
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


def link(calls: Sequence[Call]) -> None:
    """Resolve each call's sources to the calls of its run (other than itself): of the handlings
    of a source's call id, the latest one that started before the consumer."""
    by_id: dict[str, list[Call]] = {}
    for call in sorted(calls, key=lambda c: c.first_seq):
        by_id.setdefault(call.call_id, []).append(call)
    starts = {call_id: [c.first_seq for c in handlings] for call_id, handlings in by_id.items()}
    for call in calls:
        inputs: list[Call] = []
        for source in sorted(call.sources):
            handlings = by_id.get(source, [])
            before = bisect_left(starts.get(source, []), call.first_seq)
            if before:
                inputs.append(handlings[before - 1])
            elif handlings and source != call.call_id:
                inputs.append(handlings[0])
        call.inputs = [source.original or source for source in inputs]
