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
run's next turn begins, or as it resumes, in this process. A run resumed in another process finds
no such mark: its request stays pending, for ``rt.approvals``.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Mapping
from typing import Final

from actionspace._unicode import text_for_postgres
from actionspace.adapters._bridge import Bridge
from actionspace.approval.requests import ApprovalRequest
from actionspace.runtime import Runtime

__all__ = ["flush", "mark", "marks", "refuse", "remember"]

_KEEP: Final = 64
"""How many calls a request remembers being shown for, per key."""

_MARKING = threading.Lock()

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
