"""Which framework calls a pending approval request was shown to a person for, and denying it when
the person's "no" is given in the framework alone.

A framework that asks a person about a call before (or instead of) handing it to the tool tells the
tool nothing when the person says no: the OpenAI Agents SDK's ``RunState.reject`` and Pydantic AI's
``DeferredToolResults`` with ``ToolDenied`` (or ``False``) never call it. So when a call is held, its
adapter records on the request (in its ``details``, under a key of its own) a mark naming the call,
``<framework run>:<call id>``; when the framework's answers show the person rejected calls, the
request is denied as the adapter's ``approver`` if every call of that framework run it was shown
for was rejected (an identical call approved beside it runs on it; one not decided yet may still).

A mark the store fails to take when the framework asks (:func:`mark`) is kept in memory, per
runtime, and written again (:func:`flush`) before the framework's answers are next read: as the
run's next turn begins, or as it resumes, in this process. A run resumed in another process (this
one gone) writes it from the run's trace (:func:`from_trace`): the held call's ``approval_requested``
event, under the call's id, names its request, and the resuming process knows the framework run
and the ids of its calls the person answered. The trace does not say which framework run held a
call, so a request is marked for a call only when the trace leaves no doubt: among the pending
requests the call id was held on, the one alone with a hold of that id no mark accounts for (each
handling of the call that ended held is one hold, each mark naming the call id, of any framework
run, accounts for one; a hold on a request pending already, an identical call's, names no request
and counts for the one request the id was held on by name, if there is one alone). Two framework
runs that gave a call the same id on one request both get their marks back, whichever resumes
first; two that held calls of that id on different requests and both lost their marks get none
(a person decides those in ``rt.approvals``): a guess would decide the other's request.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Collection, Mapping, Sequence
from typing import Final

from actionspace._unicode import text_for_postgres
from actionspace.adapters._bridge import Bridge
from actionspace.approval.requests import ApprovalRequest
from actionspace.runtime import Runtime
from actionspace.trace._call_events import ReadsCallEvents
from actionspace.trace.events import CALL_START_KINDS, TraceEvent

__all__ = ["flush", "from_trace", "mark", "marks", "refuse", "remember"]

_KEEP: Final = 64
"""How many calls a request remembers being shown for, per key."""

_MARKING = threading.Lock()

_READ: Final = (*sorted(CALL_START_KINDS), "approval_requested", "observation")
"""The kinds of a held call's events the trace is read for (:func:`_held_in_trace`): those that
number its handlings, its requests and its holds. Another kind changes nothing there, so a store
that reads some calls' events (``ReadsCallEvents``) leaves the rest of a long run unread."""

_UNWRITTEN: Final = 4096
"""How many marks the store failed to take a runtime keeps to write again (the oldest go first)."""

_LOST: weakref.WeakKeyDictionary[Runtime, OrderedDict[tuple[str, str, str], str]] = (
    weakref.WeakKeyDictionary()
)
"""Per runtime, the marks the store failed to take: (request id, key, mark) → the request's run."""


def marks(request: ApprovalRequest | None, key: str) -> list[str]:
    """The marks ``request`` holds under ``key`` (oldest first); none for a request of no marks."""
    found = request.details.get(key) if request is not None else None
    return [m for m in found if isinstance(m, str)] if isinstance(found, list) else []


def remember(bridge: Bridge, request_id: str, key: str, mark: str) -> None:
    """Record ``mark`` under ``key`` on the pending request ``request_id``. The store compares the
    status only, so the calls of this process that mark one request take turns. Blocking; raises
    what the store raises."""
    store = bridge.rt.approvals.store
    with _MARKING:
        request = store.get(request_id)
        if request is None or request.status != "pending":
            return
        kept = [m for m in marks(request, key) if m != mark] + [mark]
        store.update(request_id, ["pending"], request.evolve(details={**request.details, key: kept[-_KEEP:]}))


def mark(bridge: Bridge, request_id: str, key: str, text: str, run_id: str) -> None:
    """:func:`remember` ``text``; when the store fails, it is kept to be written by :func:`flush`
    (``run_id``: the request's run). Blocking; never raises."""
    try:
        remember(bridge, request_id, key, text)
    except Exception:  # written again before the framework's answers are read
        with _MARKING:
            lost = _LOST.setdefault(bridge.rt, OrderedDict())
            lost[(request_id, key, text)] = run_id
            while len(lost) > _UNWRITTEN:
                lost.popitem(last=False)


def flush(bridge: Bridge, run_id: str | None = None) -> bool:
    """Write the marks kept by :func:`mark` (of run ``run_id`` only, if given). True when none of
    them is left unwritten (a mark of a request no longer pending is dropped). Blocking."""
    with _MARKING:
        lost = _LOST.get(bridge.rt)
        kept = [k for k, run in lost.items() if run_id is None or run == run_id] if lost else []
    done = True
    for request_id, key, written in kept:
        try:
            remember(bridge, request_id, key, written)
        except Exception:  # the store still fails: kept for the next turn
            done = False
            continue
        with _MARKING:
            if lost is not None:
                lost.pop((request_id, key, written), None)
    return done


def from_trace(
    bridge: Bridge,
    pending: Sequence[ApprovalRequest],
    key: str,
    framework_run: str,
    call_ids: Collection[str],
    *,
    before_now: bool = False,
) -> bool:
    """Mark under ``key``, for the calls of framework run ``framework_run`` among ``call_ids``, the
    request of ``pending`` (one run's) that the run's trace shows each of those calls held on (its
    ``approval_requested`` event, under the call's id) and that lacks its mark: the mark a process
    failed to write, and could not write again before it ended; only where that request is the one
    alone with a hold of the call id no mark accounts for (see the module docstring). ``before_now``:
    only a hold of an earlier handling of the call than its latest, which is the call handed to the
    tool now (a request filed then, for a tool changed since it was asked about, is not the one
    asked about). True when any was written. Blocking (reads the run's trace only when a request
    pending may lack such a mark: one with no mark, or one marked for one of these call ids by
    another framework run; then only those calls' events, where the store can); never raises."""
    ids = set(call_ids)
    open_ = {r.id: r for r in pending if _may_lack(marks(r, key), framework_run, ids)}
    if not open_ or not ids:
        return False
    written = False
    try:
        named, held = _held_in_trace(bridge, next(iter(open_.values())).run_id, ids, before_now)
        by_id = {r.id: r for r in pending}
        for call_id in ids:
            mine = f"{framework_run}:{call_id}"
            on: dict[str, set[int]] = {}  # pending request -> the handlings of the call named on it
            for held_id, request_id, tool, handling in named:
                request = by_id.get(request_id)
                if held_id == call_id and request is not None and tool in (None, request.tool):
                    on.setdefault(request_id, set()).add(handling)
            # holds on a request pending already (an identical call) name none: the one named, if alone
            unnamed = held.get(call_id, set()) - {n for c, _, _, n in named if c == call_id}
            if len(on) > 1 and unnamed:
                continue  # whose is whose cannot be told
            extra = len(unnamed) if len(on) == 1 else 0
            left = [
                request_id
                for request_id, handlings in on.items()
                if request_id in open_
                and mine not in (found := marks(open_[request_id], key))
                and len(handlings) + extra > sum(m.endswith(f":{call_id}") for m in found)
            ]
            if len(left) == 1:  # more than one: whose is whose cannot be told
                remember(bridge, left[0], key, mine)
                written = True
    except Exception:  # the trace or the store did not answer: asked again at the next look
        return written
    return written


def _may_lack(found: list[str], framework_run: str, call_ids: set[str]) -> bool:
    """Whether a request with the marks ``found`` may have been held for one of ``call_ids`` of
    ``framework_run`` and lost that mark: it holds none, or one of another framework run for one of
    those ids (a call of the same id held on it by both), and not this framework run's."""
    if not found:
        return True
    here = f"{framework_run}:"
    theirs = [m for m in found if not m.startswith(here)]
    return any(
        f"{here}{call_id}" not in found and any(m.endswith(f":{call_id}") for m in theirs)
        for call_id in call_ids
    )


def _held_in_trace(
    bridge: Bridge, run_id: str, call_ids: set[str], before_now: bool
) -> tuple[list[tuple[str, str, str | None, int]], dict[str, set[int]]]:
    """(call id, request id, tool, handling) of each ``approval_requested`` event of run ``run_id``
    under one of ``call_ids``, and per call id the handlings that ended held (a ``needs_approval``
    observation); with ``before_now``, not those of the latest handling of their call (a second
    stage event of a kind in ``CALL_START_KINDS`` for a call id begins another handling; handlings
    are numbered from 0 per call id)."""
    found: list[tuple[str, str, str | None, int]] = []
    held: dict[str, set[int]] = {}
    handling: dict[str, tuple[int, set[str]]] = {}
    for event in _events(bridge, run_id, call_ids):
        call_id = event.call_id
        if call_id is None or call_id not in call_ids:
            continue
        number, kinds = handling.get(call_id, (0, set()))
        if event.kind in CALL_START_KINDS and event.kind in kinds:
            number, kinds = number + 1, set()
        kinds.add(event.kind)
        handling[call_id] = (number, kinds)
        if event.kind == "approval_requested":
            tool = event.data.get("tool")
            found.append(
                (call_id, str(event.data.get("request_id")), tool if isinstance(tool, str) else None, number)
            )
        elif event.kind == "observation" and event.data.get("category") == "needs_approval":
            held.setdefault(call_id, set()).add(number)
    if before_now:
        found = [(c, r, t, n) for c, r, t, n in found if n < handling[c][0]]
        held = {c: {n for n in ns if n < handling[c][0]} for c, ns in held.items()}
    return found, held


def _events(bridge: Bridge, run_id: str, call_ids: set[str]) -> list[TraceEvent]:
    """The events of ``call_ids`` of run ``run_id`` of the kinds :data:`_READ`, where the store
    reads those alone; else every event of the run."""
    store = bridge.rt.trace
    if isinstance(store, ReadsCallEvents):
        return store.call_events(run_id, call_ids, _READ)
    return store.events(run_id)


def refuse(
    bridge: Bridge,
    run_id: str,
    key: str,
    framework_run: str,
    decisions: Mapping[str, bool | None],
    reasons: Mapping[str, str | None],
    *,
    tool: str | None = None,
) -> bool:
    """Deny, as ``bridge.approver``, each pending request of run ``run_id`` whose marks under ``key``
    of framework run ``framework_run`` all name calls the person rejected.

    ``decisions``: the framework's decision on each call id of that run (True approved, False
    rejected, None not decided yet; a call id absent is not decided). ``reasons``: the person's
    words for a rejected call, when given (recorded as a store can hold them). ``tool``: only
    requests for this tool (its name, any version). Returns whether the store answered (False:
    nothing is known to be denied, or a mark of the run is still unwritten: asked again at the
    next turn). Blocking (store I/O)."""
    written = flush(bridge, run_id)
    try:
        pending = bridge.rt.approvals.of_runs([run_id], status="pending")
        if from_trace(bridge, pending, key, framework_run, list(decisions)):  # marks another process lost
            pending = bridge.rt.approvals.of_runs([run_id], status="pending")
    except Exception:  # the store does not answer: the requests stay pending, as they were
        return False
    here = f"{framework_run}:"
    for request in pending:
        if tool is not None and request.tool.rpartition("@")[0] != tool:
            continue
        calls = [mark[len(here) :] for mark in marks(request, key) if mark.startswith(here)]
        if not calls or any(decisions.get(call) is not False for call in calls):
            continue
        reason = next((r for call in calls if (r := reasons.get(call)) is not None), None)
        try:
            bridge.settle(
                request.id, approved=False, reason=None if reason is None else text_for_postgres(reason)
            )
        except Exception:  # decided meanwhile (by a person in rt.approvals), or the store failed
            continue
    return written
