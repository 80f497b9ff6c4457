"""A run's events regrouped for the replay: offers, and one entry per handling of a call.

A call id can be handled more than once in a run (a dry run and then the call itself, a plan
node sent again): each handling is its own :class:`Call`, started by a stage event of a kind the
current handling already holds. A proposal (``model_output``) is matched to a handling by the
provider's call id, else to the first unmatched proposal of the last model output.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from actionspace.trace.events import CALL_START_KINDS, EVENT_KINDS, TraceEvent
from actionspace.trace.offers import with_full_set

__all__ = ["DECISION_KINDS", "Call", "Offer", "Run", "split"]

DECISION_KINDS: frozenset[str] = frozenset(
    {
        "candidates_offered",
        "resolved",
        "authorized",
        "validated",
        "proposed",
        "flow_checked",
        "approval_requested",
        "budget",
    }
)
"""The recorded decisions the replay re-decides; every one of them yields at least one decision."""

_STARTS = CALL_START_KINDS
"""A second event of one of these kinds for a call id starts a new handling of that call."""


@dataclass(slots=True)
class Call:
    """One handling of one call: its proposal and its events (seq, data) by kind."""

    call_id: str
    first_seq: int
    name: str = ""
    arguments: Any = None
    """The arguments as proposed (None when the trace does not hold them)."""
    normalized: bool = False
    """True when ``arguments`` come from the ``proposed`` event (defaults written in)."""
    claims: Mapping[str, str] = field(default_factory=dict)
    """Per argument, the provenance the proposal claimed."""
    events: dict[str, list[tuple[int, Mapping[str, Any]]]] = field(default_factory=dict)
    users: tuple[tuple[str, bool, bool], ...] = ()
    """The user's messages before the call: (text, untrusted, cut short)."""
    observed: frozenset[str] = frozenset()
    """Call ids whose observations the run had shown before this call."""
    redacted: bool = False
    """True when the trace holds the call's arguments redacted (a viewer's copy of a labelled run)."""

    def last(self, kind: str) -> tuple[int, Mapping[str, Any]] | None:
        found = self.events.get(kind)
        return found[-1] if found else None


@dataclass(frozen=True, slots=True)
class Offer:
    """One ``candidates_offered`` event."""

    seq: int
    data: Mapping[str, Any]


@dataclass(slots=True)
class Run:
    """A run's offers and handled calls, in order, and what could not be read."""

    offers: list[Offer] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    decision_events: list[int] = field(default_factory=list)
    """The seq of every recorded decision event."""
    owner: tuple[str, str | None] | None = None
    """The principal (id, tenant) ``run_started`` recorded: whose run it is (None: not recorded)."""
    unknown_kinds: dict[str, int] = field(default_factory=dict)
    """Events of a kind not in :data:`~actionspace.trace.events.EVENT_KINDS` (a newer version's, or
    a custom one recorded with ``Runtime.record``: the trace does not tell them apart), per kind."""


@dataclass(slots=True)
class _Proposal:
    name: str
    arguments: Any
    call_id: str | None
    claims: dict[str, str]


def _data(event: Any) -> Mapping[str, Any] | None:
    data = getattr(event, "data", None)
    return data if isinstance(data, Mapping) else None


def _proposals(raw: Any, seq: int, problems: list[str]) -> list[_Proposal]:
    from actionspace.parse import parse

    try:
        parsed = parse(raw)
    except Exception as exc:  # parse never raises by contract; an old event may still break it
        problems.append(f"event {seq}: model output not parsed ({type(exc).__name__})")
        return []
    if parsed.error is not None:
        problems.append(f"event {seq}: model output not parsed whole ({parsed.error.message[:80]})")
    out = []
    for c in parsed.calls:
        claims = {str(k): str(v) for k, v in dict(c.provenance or {}).items()}
        out.append(_Proposal(str(c.name), c.arguments, c.id, claims))
    return out


def split(events: Iterable[TraceEvent]) -> Run:
    """Group ``events`` (one run's, any order) into offers and handled calls."""
    run = Run()
    good: list[TraceEvent] = []
    for e in events:
        seq, kind = getattr(e, "seq", None), getattr(e, "kind", None)
        if not isinstance(seq, int) or not isinstance(kind, str):
            run.problems.append(f"an event without an integer seq and a kind: {str(e)[:80]}")
            continue
        good.append(e)
    good.sort(key=lambda e: e.seq)
    known = frozenset(EVENT_KINDS)
    for e in good:
        if e.kind not in known:
            run.unknown_kinds[e.kind] = run.unknown_kinds.get(e.kind, 0) + 1
    pending: list[_Proposal] = []
    current: dict[str, Call] = {}
    users: list[tuple[str, bool, bool]] = []
    observed: set[str] = set()
    full_sets: dict[str, Sequence[str]] = {}
    for e in good:
        data = _data(e)
        if data is None:
            run.problems.append(f"event {e.seq} ({e.kind}): its data is not an object")
            if e.kind in DECISION_KINDS:
                run.decision_events.append(e.seq)
                run.problems[-1] += "; the decision is not replayed"
            continue
        if e.kind in DECISION_KINDS:
            run.decision_events.append(e.seq)
        if e.kind == "model_output":
            if _redacted(data):  # its calls are matched by position, with no arguments
                pending = []
                run.problems.append(f"event {e.seq}: model output redacted; its arguments are not replayed")
            else:
                pending = _proposals(data.get("raw"), e.seq, run.problems)
            continue
        if e.kind in ("user_input", "user_turn") and _redacted(data):
            users.append(("", False, True))  # a message not read: the user's words are not all known
            continue
        if e.kind in ("user_input", "user_turn") and isinstance(data.get("text"), str):
            text = data["text"]
            label = data.get("input_label")
            untrusted = isinstance(label, Mapping) and label.get("integrity") == "untrusted"
            cut = isinstance(data.get("chars"), int) and data["chars"] > len(text)
            users.append((text, untrusted, cut))
            continue
        if e.kind == "candidates_offered":
            run.offers.append(Offer(e.seq, with_full_set(data, full_sets)))
            continue
        if e.kind == "run_started" and run.owner is None and isinstance(data.get("principal"), str):
            tenant = data.get("tenant")
            run.owner = (data["principal"], tenant if isinstance(tenant, str) else None)
            continue
        if e.call_id is None:
            continue
        if e.kind == "observation" and data.get("status") == "ok":
            observed.add(e.call_id)
        call = current.get(e.call_id)
        if call is None or (e.kind in _STARTS and e.kind in call.events):
            call = current[e.call_id] = _start(e, pending, tuple(users), frozenset(observed))
            run.calls.append(call)
        call.events.setdefault(e.kind, []).append((e.seq, data))
        if e.kind in ("proposed", "validated") and _redacted(data):
            call.arguments, call.redacted = None, True
        elif e.kind == "proposed" and isinstance(data.get("arguments"), Mapping) and not call.redacted:
            call.arguments, call.normalized = dict(data["arguments"]), True
        tool = data.get("tool")
        names = e.kind in ("validated", "resolved", "proposed")
        if names and isinstance(tool, str) and not call.name:
            call.name = tool
    return run


def _redacted(data: Mapping[str, Any]) -> bool:
    """True for an event's data as a viewer without clearance sees it: its values replaced
    (:func:`~actionspace.policy.redaction.redact_event`), which no decision may be taken on."""
    return data.get("redacted") is True


def _start(
    e: TraceEvent,
    pending: list[_Proposal],
    users: tuple[tuple[str, bool, bool], ...],
    observed: frozenset[str],
) -> Call:
    call = Call(e.call_id or "", e.seq, users=users, observed=observed)
    match = next((p for p in pending if p.call_id == e.call_id), None)
    if match is None:
        match = next((p for p in pending if p.call_id is None), None)
    if match is not None:
        pending.remove(match)
        call.name, call.arguments, call.claims = match.name, match.arguments, match.claims
    return call
