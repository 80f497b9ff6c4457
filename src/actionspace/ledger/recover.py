"""Recovery: settle every action a crash left ``dispatched`` or ``unknown``, without sending anything.

For each such entry:

* ``query`` tools are asked for the status: committed → recorded as committed (the original
  result kept); not committed → back to ``accepted``, so the next call of that node sends it again
  with the same key; no answer → ``unknown_commit``.
* ``native`` tools dedupe by key, so sending again is safe: back to ``accepted``.
* ``none`` tools cannot be asked: ``unknown_commit``, for a person (``actionspace ledger resolve``).

A call whose outcome cannot be established is never re-sent. The recovery a process runs at its
start (``live_holders``) leaves an entry younger than :func:`holder_window` alone, and one of a
tool not registered here: another process beside it may still be inside the tool's timeout or its
retries, and a status query would truthfully answer "not yet", putting back to ``accepted`` a
send that is about to commit (a tool this process lacks, it can neither time nor ask). When the
process marks show no other process of the store alive (:mod:`actionspace.ledger.liveness`), no
one can hold such an entry: it is settled at once, whatever its age; one of a tool not registered
here is still left, for the process that can ask its status. A
committed result becomes the entry's observation through the ``shape`` the caller hands in (the
runtime passes :func:`actionspace.observation.shape`, so it is trimmed like any other result).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from actionspace._canonical import content_hash, normalize
from actionspace.catalog.registry import Catalog
from actionspace.catalog.spec import ToolSpec
from actionspace.errors import ActionError
from actionspace.ledger.commit import holder_window, still_running
from actionspace.ledger.entries import GuardsAttempts, LedgerEntry, LedgerStore
from actionspace.ledger.late import any_running
from actionspace.ledger.liveness import others_alive
from actionspace.ledger.status import (
    Committed,
    NotCommitted,
    query_status,
    unknown_commit_error,
    within_window,
)
from actionspace.outcomes import ToolResult
from actionspace.types import Observation

__all__ = [
    "RecoveryReport",
    "Shape",
    "Shaped",
    "anything_in_flight_here",
    "holder_window",
    "in_flight_here",
    "recover",
    "recover_key",
    "resolve_by_hand",
    "running_here",
    "unshaped",
]

Record = Callable[[str, str, Mapping[str, Any]], None]

_HERE: dict[str, int] = {}
"""How many drivers of this process hold each key (:func:`running_here`); a key held by none is
not in it. A plain ``dict`` read with ``get``: a ``Counter``'s missing key runs its ``__missing__``,
a Python frame, on every durable call."""
_HERE_LOCK = threading.Lock()


def running_here(key: str) -> Callable[[], None]:
    """Note that this process drives ``key``'s action now (its commit protocol runs, or a cut
    atomic group's member still runs on its worker thread, the group's rollback not yet run):
    recovery here leaves it alone until the returned function is called (once)."""
    with _HERE_LOCK:
        _HERE[key] = _HERE.get(key, 0) + 1
    released = False

    def release() -> None:
        nonlocal released
        with _HERE_LOCK:
            if released:
                return
            released = True
            held = _HERE[key] - 1
            if held > 0:
                _HERE[key] = held
            else:
                del _HERE[key]

    return release


def in_flight_here(key: str) -> bool:
    """This process drives ``key``'s action now (:func:`running_here`), or a send of it that
    outlived its caller still runs here (:func:`~actionspace.ledger.late.still_running`): its
    outcome is not for recovery to decide; the send settles it when it ends."""
    with _HERE_LOCK:
        if key in _HERE:
            return True
    return still_running(key)


def anything_in_flight_here() -> bool:
    """Some action's send may still run in this process (:func:`in_flight_here` of any key)."""
    with _HERE_LOCK:
        if _HERE:
            return True
    return any_running()


class _NobodyElse:
    """Whether no other process of ``ledger`` lives (its marks, :mod:`actionspace.ledger.liveness`),
    looked at once, at the first question: every entry asked about was read before that look, so
    a process it does not see took its mark after the read, and any move of that process since
    fails the settling's compare-and-set on the entry as read."""

    __slots__ = ("answer", "ledger")

    def __init__(self, ledger: LedgerStore) -> None:
        self.ledger = ledger
        self.answer: bool | None = None

    def __call__(self) -> bool:
        if self.answer is None:
            self.answer = not others_alive(self.ledger, wait=True)
        return self.answer


def _maybe_held(spec: ToolSpec | None, entry: LedgerEntry, now_s: float) -> bool:
    """Whether a live process may still hold ``entry`` (``spec``: its tool here, if registered).
    A tool not registered here may be another process's (services sharing one store, or a
    release that dropped it): how long its sends take is that process's to know, and its
    status only that process can ask, so its entries are left to it, whatever their age."""
    return spec is None or entry.updated_at > now_s - holder_window(spec)


def _holding(catalog: Catalog | FindsSpecs, entry: LedgerEntry) -> ToolSpec | None:
    """The spec timing a live holder of ``entry``: the one its tool names, unless the catalog
    times an entry by its arguments (``holding``: an atomic group's, by its members' tools)."""
    holding = getattr(catalog, "holding", None)
    spec: ToolSpec | None = catalog.find(entry.tool) if holding is None else holding(entry)
    return spec


class Shaped(Protocol):
    """What recovery reads of a shaped result (:class:`actionspace.observation.Shaped` is one)."""

    @property
    def data(self) -> Any: ...
    @property
    def content_hash(self) -> str: ...


class Shape(Protocol):
    """Turns a tool's result into observation data (:func:`actionspace.observation.shape` is one)."""

    def __call__(self, value: object, /) -> Shaped: ...


@dataclass(frozen=True, slots=True)
class _Unshaped:
    data: Any
    content_hash: str


def unshaped(value: object) -> Shaped:
    """The default :class:`Shape`: ``value`` as plain JSON, untrimmed, with its content hash."""
    data = normalize(value)
    return _Unshaped(data, content_hash(data))


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """Keys by what recovery concluded."""

    committed: list[str] = field(default_factory=list)
    redispatchable: list[str] = field(default_factory=list)
    unknown_commit: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    """Moved by another process while this one looked, or still run by this one
    (:func:`in_flight_here`): their sends settle them."""

    def to_dict(self) -> dict[str, list[str]]:
        return {
            "committed": self.committed,
            "redispatchable": self.redispatchable,
            "unknown_commit": self.unknown_commit,
            "skipped": self.skipped,
        }


def _committed_observation(entry: LedgerEntry, result: Any, shape: Shape) -> dict[str, Any]:
    name, _, version = entry.tool.partition("@")
    effects: tuple[Any, ...] = ()
    if isinstance(result, ToolResult):
        effects, result = result.checked().effects, result.data
    shaped = shape(result)
    obs = Observation(
        call_id=f"{entry.run_id}:{entry.node_id}",
        tool=name,
        tool_version=version,
        data=shaped.data,
        effects=effects,
        content_hash=shaped.content_hash,
        diagnostics={"idempotency_key": entry.key, "recovered": True},
    )
    return obs.to_dict()


class FindsSpecs(Protocol):
    """What recovery needs of a catalog: the spec of a ``name@version``, or None."""

    def find(self, key: str) -> ToolSpec | None: ...


def recover(
    ledger: LedgerStore,
    catalog: Catalog | FindsSpecs,
    record: Record,
    *,
    min_age_s: float = 0.0,
    shape: Shape = unshaped,
    now: float | None = None,
    live_holders: bool = False,
) -> RecoveryReport:
    """Settle ``dispatched`` / ``unknown`` entries last touched at least ``min_age_s`` seconds ago.

    ``live_holders``: other processes sharing the store may be running (a process's start-up):
    an entry touched within ``min_age_s`` or its tool's :func:`holder_window`, or of a tool not
    registered here, is left too, uncounted (the recovery of a later start, a proposal of the
    action once its holder is gone, or a recovery asked for by hand settles it), unless no other
    process of the store is alive (its marks, looked at once after the entries were read; on
    PostgreSQL a look that finds none waits until this process's mark session is ``PG_SETTLED_S``
    old and looks again): then every entry of a registered tool is settled, whatever its age.

    An entry whose action this process still drives (:func:`in_flight_here`: its commit protocol
    runs, or its tool runs on past its timeout or its cancelled caller, or a cut atomic group's
    member still runs on its worker thread) is ``skipped``: it may yet commit, and its outcome is
    written when it ends.

    ``shape`` makes a committed result the observation's data (default :func:`unshaped`); ``now``
    is the current Unix time (default the system clock's: the runtime passes its clock's).
    """
    report = RecoveryReport()
    now_s = time.time() if now is None else now
    cutoff = now_s - min_age_s
    entries = [*ledger.list(state="dispatched", limit=100_000), *ledger.list(state="unknown", limit=100_000)]
    buckets = {"committed": report.committed, "accepted": report.redispatchable}
    nobody = _NobodyElse(ledger)  # looked at once, after every entry above was read
    for entry in entries:
        young = entry.updated_at > cutoff
        if young and not live_holders:
            continue
        if live_holders:
            spec = _holding(catalog, entry)
            if (young or _maybe_held(spec, entry, now_s)) and (spec is None or not nobody()):
                continue  # another process may be inside the tool's timeout: its send settles it
        if in_flight_here(entry.key):  # its send runs here and may yet commit: it settles itself
            report.skipped.append(entry.key)
            continue
        final = _settled(entry, catalog, shape, now)
        if _conclude(ledger, entry, final) is None:
            report.skipped.append(entry.key)
            continue
        buckets.get(final.state, report.unknown_commit).append(entry.key)
        record(
            entry.run_id,
            "ledger",
            {"key": entry.key, "from": entry.state, "to": final.state, "by": "recover"},
        )
    return report


def recover_key(
    ledger: LedgerStore,
    catalog: Catalog | FindsSpecs,
    record: Record,
    key: str,
    *,
    shape: Shape = unshaped,
    now: float | None = None,
) -> LedgerEntry | None:
    """:func:`recover` of the one entry ``key``, whatever its age, if it is ``dispatched`` or
    ``unknown`` and no send of it still runs in this process: the entry as it is stored
    afterwards (None: no such entry)."""
    entry = ledger.get(key)
    if entry is None or entry.state not in ("dispatched", "unknown") or in_flight_here(key):
        return entry
    final = _settled(entry, catalog, shape, now)
    stored = _conclude(ledger, entry, final)
    if stored is None:  # moved by another caller meanwhile
        return ledger.get(key)
    record(entry.run_id, "ledger", {"key": key, "from": entry.state, "to": final.state, "by": "recover"})
    return stored


def _conclude(ledger: LedgerStore, read: LedgerEntry, final: LedgerEntry) -> LedgerEntry | None:
    """Store ``final``, what was concluded from ``read``, only while the entry is still as read:
    a status query answers for the send it was asked about, and while it ran another recovery may
    have settled that send and the node been sent again (a later attempt), which the answer does
    not cover. None when the entry moved."""
    if isinstance(ledger, GuardsAttempts):
        return ledger.transition_at(read.key, read.state, read.attempts, final)
    current = ledger.get(read.key)  # a store without the guard: the narrowest check it allows
    if current is None or current.attempts != read.attempts:
        return None
    return ledger.transition(read.key, (read.state,), final)


def _settled(
    entry: LedgerEntry, catalog: Catalog | FindsSpecs, shape: Shape, now: float | None
) -> LedgerEntry:
    """What recovery makes of a ``dispatched`` / ``unknown`` entry (nothing is sent)."""
    spec = catalog.find(entry.tool)
    if spec is None:
        unasked = ActionError.of(
            "unknown_commit",
            f"{entry.tool} is not registered here; cannot ask its status",
            resource_ids=(entry.key,),
            details={"idempotency_key": entry.key, "reason": "tool not registered"},
        )
        return entry.evolve(state="unknown_commit", error=unasked.to_dict())
    if spec.idempotency == "native" and within_window(spec, entry, now):
        return entry.evolve(state="accepted")
    if spec.idempotency == "native":
        error = unknown_commit_error(spec, entry.key, "lost past the tool's dedupe window")
        return entry.evolve(state="unknown_commit", error=error.to_dict())
    if spec.idempotency == "query":
        answer = query_status(spec, entry)
        if isinstance(answer, Committed):
            return entry.evolve(
                state="committed",
                observation=_committed_observation(entry, answer.result, shape),
                remote_id=answer.remote_id,
                error=None,
            )
        if isinstance(answer, NotCommitted):
            return entry.evolve(state="accepted")
        error = unknown_commit_error(spec, entry.key, answer.reason)
        return entry.evolve(state="unknown_commit", error=error.to_dict())
    error = unknown_commit_error(spec, entry.key, "lost in a crash; the tool cannot be asked")
    return entry.evolve(state="unknown_commit", error=error.to_dict())


def resolve_by_hand(
    ledger: LedgerStore,
    key: str,
    *,
    outcome: str,
    by: str,
    reason: str,
    record: Record,
    shape: Shape = unshaped,
) -> LedgerEntry:
    """A person's reconciliation of an ``unknown_commit``: ``committed`` or ``failed``, recorded.

    ``shape``: as in :func:`recover`.
    """
    if outcome not in ("committed", "failed"):
        raise ValueError("outcome must be 'committed' or 'failed'")
    entry = ledger.get(key)
    if entry is None:
        raise KeyError(f"no ledger entry {key}")
    if entry.state != "unknown_commit":
        raise ValueError(f"{key} is {entry.state}; only unknown_commit entries are resolved by hand")
    if outcome == "failed" and still_running(key):
        raise ValueError(f"{key}: an attempt that timed out still runs in this process and may yet commit")
    resolution = {"by": by, "reason": reason, "at": time.time(), "outcome": outcome}
    changes: dict[str, Any] = {"state": outcome, "resolution": resolution}
    if outcome == "committed":
        changes["observation"] = _committed_observation(
            entry, {"reconciled": True, "by": by, "reason": reason}, shape
        )
    stored = ledger.transition(key, ("unknown_commit",), entry.evolve(**changes))
    if stored is None:
        raise ValueError(f"{key} changed while resolving; look again")
    record(
        entry.run_id,
        "ledger",
        {"key": key, "from": "unknown_commit", "to": outcome, "by": by, "reason": reason},
    )
    return stored
