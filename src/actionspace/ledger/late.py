"""Sends that outlive their caller, and their outcome written to the ledger when they end.

A blocking tool runs on a worker thread Python cannot stop: after its timeout, or after its caller
was cancelled, the thread still runs and may yet commit. So does an async tool that caught its
timeout's cancel and went on past its grace, on a task of its own
(:mod:`actionspace.execution.deadlines`). While it runs, nothing may ask the tool's
status or send the action again (:func:`still_running`). When it ends, its outcome is known:
:func:`settle_when_it_ends` writes it, so a later proposal of the same key replays it instead of
answering ``unknown_commit``. The caller that stopped waiting keeps the answer it got at the time.

The thread may end long after its caller moved on, while a recovery, a person or a later send
settles the same entry: every write here is the store's compare-and-set on the state just read,
and an entry settled meanwhile is left as it is.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import Any

from actionspace.errors import Abandoned, said
from actionspace.ledger.entries import UNSETTLED, LedgerEntry, LedgerStore
from actionspace.outcomes import Failed, Outcome, Succeeded
from actionspace.types import Observation

__all__ = ["LeftRunning", "any_running", "hold", "settle_when_it_ends", "still_running"]

_log = logging.getLogger(__name__)

Record = Callable[[str, Mapping[str, Any]], None]
Shape = Callable[[Succeeded], Observation]

_RUNNING: dict[str, Future[Outcome]] = {}
_RUNNING_LOCK = threading.Lock()
_CAS_ROUNDS = 8
"""Times a late outcome reads the entry again when another writer moved it between read and write."""


class LeftRunning(Abandoned):
    """:class:`~actionspace.errors.Abandoned`, for a send whose attempt still runs on its worker
    thread: ``running`` is the Future of the Outcome that attempt ends with."""

    def __init__(self, running: Future[Outcome]) -> None:
        super().__init__("the caller was cancelled while its blocking send still runs")
        self.running = running


def still_running(key: str) -> bool:
    """True while an attempt of ``key`` that timed out still runs in this process: its status may
    not be asked and it may not be sent again until it ends (it may yet commit)."""
    with _RUNNING_LOCK:
        fut = _RUNNING.get(key)
    return fut is not None and not fut.done()


def any_running() -> bool:
    """True while an attempt of any key :func:`still_running` runs in this process."""
    with _RUNNING_LOCK:
        return any(not fut.done() for fut in _RUNNING.values())


def hold(key: str, running: Future[Outcome]) -> None:
    """Mark ``key`` as :func:`still_running` until ``running`` ends."""
    with _RUNNING_LOCK:
        _RUNNING[key] = running

    def release(_: Future[Outcome]) -> None:
        with _RUNNING_LOCK:
            if _RUNNING.get(key) is running:
                del _RUNNING[key]

    running.add_done_callback(release)


def settle_when_it_ends(
    store: LedgerStore,
    entry: LedgerEntry,
    running: Future[Outcome],
    *,
    shape: Shape,
    record: Record,
    keep: Callable[[LedgerEntry], None],
) -> None:
    """Hold ``entry``'s key while ``running`` runs, then write the outcome it ends with.

    A success moves an unsettled entry (``dispatched``, ``unknown``, ``unknown_commit``) to
    ``committed`` with ``shape(outcome)`` as its observation: it did commit, whoever sent since.
    A failure that did not commit (any category but ``unknown_commit``) moves it to ``failed``
    only while nothing was sent since (the entry's ``attempts`` unchanged) and no other attempt
    of the key runs: a later send's outcome is its own. ``keep`` receives the settled entry when
    the store does not take it (the process keeps it for the next proposal). Never raises.
    """
    key, sent = entry.key, entry.attempts
    hold(key, running)

    def ended(done: Future[Outcome]) -> None:
        if done.cancelled():
            return
        using = getattr(store, "using", None)  # a SQLite store leaves this thread's connection to it
        try:
            outcome = done.result()
            if isinstance(outcome, Failed) and outcome.error.category == "unknown_commit":
                return  # still not known: the entry stays as the protocol left it
            with using() if using is not None else contextlib.nullcontext():
                _write(store, key, sent, outcome, shape, record, keep)
        except Exception as exc:  # the thread ended after its store went away: recovery settles it
            why = f"{type(exc).__name__}: {said(exc)[:200]}"
            _log.warning("actionspace: the late outcome of %s was not recorded (%s)", key, why)

    running.add_done_callback(ended)


def _write(
    store: LedgerStore,
    key: str,
    sent: int,
    outcome: Outcome,
    shape: Shape,
    record: Record,
    keep: Callable[[LedgerEntry], None],
) -> None:
    if isinstance(outcome, Failed) and outcome.error.category == "unknown_commit":
        return  # still not known: the entry stays as the protocol left it
    shaped: Observation | None = None
    for _ in range(_CAS_ROUNDS):
        current = store.get(key)
        if current is None or current.state not in UNSETTLED:
            return
        if isinstance(outcome, Succeeded):
            if shaped is None:
                shaped = shape(outcome)
            remote = shaped.diagnostics.get("remote_id")
            new = current.evolve(
                state="committed",
                observation=shaped.to_dict(),
                remote_id=remote if isinstance(remote, str) else None,
                error=None,
            )
        elif current.attempts != sent or still_running(key):
            return
        else:
            new = current.evolve(state="failed", error=outcome.error.to_dict())
        moved = {"key": key, "from": current.state, "to": new.state, "by": "late_answer"}
        try:
            stored = store.transition(key, (current.state,), new)
        except Exception as exc:
            keep(new)
            why = f"{type(exc).__name__}: {said(exc)[:200]}"
            record("ledger", {**moved, "recorded": False, "error": why})
            return
        if stored is not None:
            record("ledger", {**moved, "attempts": stored.attempts})
            return
