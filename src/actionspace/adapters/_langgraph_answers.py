"""Which held call a resumed LangGraph ``interrupt``'s answer decides.

LangGraph hands a resumed node its answers by position (the n-th ``interrupt`` of a task gets the
n-th resume value), not by what the interrupt showed, and never gives the node the value it was
interrupted with. So the call held when the graph resumes need not be the call the person saw: the
graph state was edited (other arguments), the tool was defined again (a request of its own), or
a ``ToolNode`` ran several calls of one message, whose interrupts take their positions in the order
the calls reach them. An answer therefore decides a held request only when it is known to be about
it:

* an answer naming the request (``{"approved": True, "request_id": ...}``, or answers keyed by
  request id ``{"apr_…": True}``) decides that request and no other;
* an answer naming none (a bare ``True``, or a mapping without ``request_id``) decides the request
  held now only when the interrupt it answers provably showed that request: the request records
  (in its ``details``, under :data:`SHOWN`) the interrupt that showed it (thread, task, position),
  and only when that interrupt was the only one the task raised in its run, since LangGraph shows
  one of them and the node cannot tell which. Positions are counted over the adapter's own
  interrupts: a node whose other code interrupts too should name the request.

An answer about a request also decides a request of the very same call (same run, tool version,
arguments and definition): a message proposing one call twice holds the second on a request of
its own once the first ran. Any other answer decides nothing: the node interrupts again, showing
the call held now.
"""

from __future__ import annotations

import hashlib
import json
import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from actionspace._extras import require
from actionspace.adapters._bridge import Bridge, held_request
from actionspace.approval.requests import ApprovalRequest
from actionspace.types import Observation

__all__ = ["SHOWN", "Answer", "decided", "read_answer"]

EXTRA = "langgraph"

SHOWN: Final = "langgraph_shown"
"""Key of a request's ``details`` listing digests of the interrupts that showed it (newest last)."""

_KEEP: Final = 16
"""How many interrupts a request remembers showing it."""

_SCRATCHPAD: Final = "__pregel_scratchpad"
"""LangGraph's task scratchpad (``langgraph._internal._constants``): its ``resume`` holds the
task's answers so far."""


@dataclass(frozen=True, slots=True)
class Answer:
    """A resume value as read for one held request."""

    approved: bool
    """Only ``True`` approves: any other value is a denial, never an approval by truthiness."""
    by: str | None = None
    reason: str | None = None
    request_id: str | None = None
    """The request the answer names; None when it names none."""


def read_answer(resume: Any, held: str) -> Answer:
    """``resume`` as an answer about request ``held``: a bool, a mapping with ``approved`` (and
    optionally ``request_id``, ``by``, ``reason``), or a mapping of request ids to such answers."""
    if isinstance(resume, Mapping) and "approved" not in resume and "request_id" not in resume:
        ids = [key for key in resume if isinstance(key, str) and key.startswith("apr_")]
        if held in resume:
            inner = _plain(resume[held])
            return Answer(inner.approved, inner.by, inner.reason, held)
        if ids:
            return Answer(False, request_id=ids[0])  # answers about other requests only
    answer = _plain(resume)
    named = resume.get("request_id") if isinstance(resume, Mapping) else None
    return answer if named is None else Answer(answer.approved, answer.by, answer.reason, str(named))


def _plain(resume: Any) -> Answer:
    if isinstance(resume, Mapping):
        by, reason = resume.get("by"), resume.get("reason")
        return Answer(
            resume.get("approved") is True,
            None if by is None else str(by),
            None if reason is None else str(reason),
        )
    return Answer(resume is True)


def decided(bridge: Bridge, obs: Observation, configurable: Mapping[str, Any]) -> bool:
    """Interrupt on a held call until an answer about it comes; record that answer. False when
    nothing was held.

    Raises LangGraph's ``GraphInterrupt`` (the graph stops, showing the call) when the task has
    no answer about it. The loop ends: each turn takes one more of the task's answers, and there
    are finitely many.
    """
    held = held_request(obs)
    if held is None:
        return False
    answer = _named(configurable, held)
    if answer is not None:  # an answer about it came already (another call's interrupt took it)
        bridge.settle(held, approved=answer.approved, by=answer.by, reason=answer.reason)
        return True
    task = _task(configurable)
    preview = dict(bridge.preview(obs))
    while True:
        resume, mark = _asked(bridge, task, configurable, held, preview)
        answer = read_answer(resume, held)
        if _covers(bridge, _about(bridge, answer, held, mark), held):
            bridge.settle(held, approved=answer.approved, by=answer.by, reason=answer.reason)
            return True


def _about(bridge: Bridge, answer: Answer, held: str, mark: str | None) -> ApprovalRequest | None:
    """The request ``answer`` is about: the one it names, else the one the interrupt it answers
    (``mark``) showed, when that is known: ``held`` or a request of the same call."""
    if answer.request_id is not None:
        return bridge.rt.approvals.get(answer.request_id)
    now = bridge.rt.approvals.get(held)
    if mark is None or now is None:
        return None
    if mark in _marks(now):
        return now
    try:
        same = bridge.rt.approvals.store.find(now.run_id, now.tool, now.args_digest)
    except Exception:  # the store does not answer: the call is asked about again
        return None
    return next((request for request in same if mark in _marks(request)), None)


def _covers(bridge: Bridge, about: ApprovalRequest | None, held: str) -> bool:
    """Whether an answer about request ``about`` decides the call held on ``held``: the same
    request, or one of the same call (same run, tool version, arguments and definition), as a
    message proposing a call twice files a request for the second once the first ran."""
    if about is None:
        return False
    if about.id == held:
        return True
    now = bridge.rt.approvals.get(held)
    return now is not None and (now.run_id, now.tool, now.args_digest, now.definition) == (
        about.run_id,
        about.tool,
        about.args_digest,
        about.definition,
    )


class _Task:
    """The interrupts the adapter's calls raise in one run of one LangGraph task (its node run
    once): the next position, taken in the order LangGraph takes them, and the requests raised."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.position = 0
        self.raised: list[tuple[str, str]] = []


_TASKS: weakref.WeakKeyDictionary[Any, _Task] = weakref.WeakKeyDictionary()
_TASKS_LOCK = threading.Lock()
_REMEMBERING = threading.Lock()


def _task(configurable: Mapping[str, Any]) -> _Task | None:
    """The run of the task ``configurable`` belongs to, named by its scratchpad (LangGraph makes
    one per run of a task, with a function of its own, which outlives it no more than the run);
    None outside a task, where no answer is provably about a request."""
    own = getattr(configurable.get(_SCRATCHPAD), "get_null_resume", None)
    if own is None:
        return None
    try:
        with _TASKS_LOCK:
            return _TASKS.setdefault(own, _Task())
    except TypeError:  # not a function: it cannot be weakly referenced
        return None


def _asked(
    bridge: Bridge, task: _Task | None, configurable: Mapping[str, Any], held: str, preview: dict[str, Any]
) -> tuple[Any, str | None]:
    """(answer, what names the interrupt it answers): one ``interrupt``, at the task's next
    position (None outside a task). Raises ``GraphInterrupt`` when the task has no answer there,
    recording on ``held`` that this interrupt shows it."""
    interrupt = require("langgraph.types", EXTRA).interrupt
    if task is None:
        return interrupt(preview), None
    errors = require("langgraph.errors", EXTRA)
    with task.lock:  # the position taken here is the one LangGraph's interrupt takes
        mark = _mark(configurable, task.position)
        task.position += 1
        try:
            return interrupt(preview), mark
        except errors.GraphInterrupt:
            task.raised.append((held, mark))
            if len(task.raised) == 1:
                _remember(bridge, held, mark, add=True)
            else:  # two calls interrupt in one run: which of them the graph shows is not known
                for request_id, raised in task.raised:
                    _remember(bridge, request_id, raised, add=False)
            raise


def _named(configurable: Mapping[str, Any], held: str) -> Answer | None:
    """An answer of the task naming ``held``, wherever it stands among the task's answers."""
    resumes = getattr(configurable.get(_SCRATCHPAD), "resume", None)
    for resume in resumes if isinstance(resumes, list) else ():
        answer = read_answer(resume, held)
        if answer.request_id == held:
            return answer
    return None


def _mark(configurable: Mapping[str, Any], position: int) -> str:
    """What names the ``position``-th interrupt of a task: its thread, its checkpoint namespace
    (which names the task of one checkpoint) and the position."""
    where = [str(configurable.get("thread_id")), str(configurable.get("checkpoint_ns")), position]
    return hashlib.sha256(json.dumps(where).encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _marks(request: ApprovalRequest | None) -> list[str]:
    marks = request.details.get(SHOWN) if request is not None else None
    return [m for m in marks if isinstance(m, str)] if isinstance(marks, list) else []


def _remember(bridge: Bridge, held: str, mark: str, *, add: bool) -> None:
    """Record on the pending request that the interrupt ``mark`` showed it (``add``), or take
    that back. Best effort: a store that fails to add leaves the request unmarked, and a bare
    answer to it asks again. The store compares the status only, so the tasks of this process
    that mark one request (identical calls fanned out with ``Send``) take turns."""
    store = bridge.rt.approvals.store
    try:
        with _REMEMBERING:
            request = store.get(held)
            if request is None or request.status != "pending":
                return
            marks = [m for m in _marks(request) if m != mark] + ([mark] if add else [])
            details = {**request.details, SHOWN: marks[-_KEEP:]}
            store.update(held, ["pending"], request.evolve(details=details))
    except Exception:  # the interrupt is raised all the same
        return
