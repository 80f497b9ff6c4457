"""The rollback of an atomic group whose member still runs on its worker thread when the group is
cut (``close()``, a cancelled plan) or the member timed out.

Python cannot stop that thread, and it still uses the group's transaction (for SQLite, one
connection): rolling that connection back, or closing it, from the event loop's thread while the
member runs a statement on it can crash the interpreter. The rollback therefore runs once the
member's attempt ended, on the thread that ends it; nothing of the group commits meanwhile (its
commit never begins), and the group's ledger entry, noted ``unknown`` by the cut, is settled then
(back to ``accepted``) when its store still takes the write, else left to recovery; until then,
recovery in this process leaves the entry alone (:func:`released_after`): the group never
commits once cut, yet it is known not committed only once its rollback ran.

Also the other moves of a group's entry back to ``accepted`` once its commit is known not to have
begun: rolled back on the loop (:func:`not_committed`), or held for a member's approval
(:func:`reopened`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from actionspace.errors import ActionError
from actionspace.ledger.entries import LedgerEntry, LedgerStore
from actionspace.ledger.memory import MemoryLedgerStore
from actionspace.outcomes import Failed, Outcome
from actionspace.plan.groups import Transaction
from actionspace.trace.recorder import Recorder

__all__ = [
    "Settle",
    "not_committed",
    "not_committed_after",
    "not_committed_later",
    "not_sent_again",
    "released_after",
    "reopened",
    "roll_back_after",
]

_log = logging.getLogger(__name__)

Settle = Callable[[bool], object] | None
"""Told, once a rollback left to a member's thread ran, whether it succeeded; or None."""


def roll_back_after(member: Future[Any], tx: Transaction, settle: Settle) -> None:
    """Roll ``tx`` back once ``member`` (a running attempt) ended; then ``settle``. At once, on
    this thread, when it ended meanwhile (``add_done_callback`` runs it here then)."""
    member.add_done_callback(lambda _ended: _undo(tx, settle))


def _undo(tx: Transaction, settle: Settle) -> None:
    try:
        tx.rollback()
        undone = True
    except Exception:  # never committed all the same (its commit never begins)
        _log.warning("actionspace: the deferred rollback of an atomic group raised", exc_info=True)
        undone = False
    if settle is not None:
        try:
            settle(undone)
        except Exception:  # the store is closed: the entry stays ``unknown``, for recovery
            _log.debug("actionspace: a rolled-back group's entry was left for recovery", exc_info=True)


def released_after(settle: Settle, release: Callable[[], object]) -> Settle:
    """``settle``, then ``release`` (whatever ``settle`` raised): the group's key, held from
    recovery in this process (``ledger.recover.running_here``) while its member still ran, is let
    go once its rollback ran and its entry was settled."""

    def settled(undone: bool) -> None:
        try:
            if settle is not None:
                settle(undone)
        finally:
            release()

    return settled


def not_sent_again(ended: Future[Outcome], group: str, cause: ActionError) -> Settle:
    """Resolve ``ended`` (the group's attempt, which the ledger waits for while its member runs,
    :class:`~actionspace.ledger.commit.AwaitAttempt`) once its rollback ran: it did not commit,
    whatever its member answered, so it ends ``transient`` (asking again is safe)."""

    def settle(undone: bool) -> None:
        ended.set_result(not_committed_after(group, cause, undone))

    return settle


def not_committed_after(group: str, cause: ActionError, undone: bool) -> Failed:
    """The end of a group whose member outlived its timeout, once the member returned and the
    group's transaction was rolled back (or closed uncommitted when the rollback raised): its
    commit never began, so it is known not committed, ``transient`` (asking again is safe)."""
    how = "rolled back" if undone else "closed uncommitted (its rollback raised)"
    why = f"group {group} failed ({cause.message}); its transaction was {how} once its member returned"
    details = {"group": group, "committed": False, "rolled_back": undone}
    return Failed(ActionError.of("transient", why, details=details), 1)


def not_committed_later(store: LedgerStore, key: str, error: ActionError) -> Settle:
    """Settle the group's entry, if the cut left it ``unknown``, as not committed (``accepted``,
    sent again by a new proposal), as a rollback on the loop does (plan/atomic.py)."""

    def settle(undone: bool) -> None:
        entry = store.get(key) if undone else None
        if entry is not None and entry.state == "unknown":
            store.transition(key, ("unknown",), entry.evolve(state="accepted", error=error.to_dict()))

    return settle


def not_committed(store: LedgerStore, key: str, error: ActionError, rec: Recorder) -> bool:
    """Settle the group's entry, left ``unknown`` by its cancelled send, as not committed: its
    transaction was rolled back and its commit never began, so it goes back to ``accepted`` (as a
    recovery that proved it not committed does) and a new proposal sends it again. One write, on
    the loop as the one that left it ``unknown``; False when the entry was not ``unknown`` or the
    store did not take the write (the entry stays unknown, for recovery)."""
    try:
        entry = store.get(key)
        if entry is None or entry.state != "unknown":
            return False
        stored = store.transition(key, ("unknown",), entry.evolve(state="accepted", error=error.to_dict()))
    except Exception:
        return False
    if stored is None:
        return False
    rec.add("ledger", {"key": key, "from": "unknown", "to": "accepted", "attempts": stored.attempts})
    return True


async def reopened(store: LedgerStore, key: str, rec: Recorder) -> None:
    """Put the group's entry, ``failed`` because a member waits for approval, back to ``accepted``:
    its commit never began, and a proposal of the plan once the member is decided must run the
    group again (its member then finds the decision) rather than replay the wait for ever. Left
    as it is when the store does not take the write: the group stays held, nothing is sent."""

    def reopen() -> LedgerEntry | None:
        entry = store.get(key)
        held = entry is not None and (entry.error or {}).get("category") == "needs_approval"
        if entry is None or entry.state != "failed" or not held:
            return None
        return store.transition(key, ("failed",), entry.evolve(state="accepted"))

    try:
        stored = reopen() if isinstance(store, MemoryLedgerStore) else await asyncio.to_thread(reopen)
    except Exception:
        return
    if stored is not None:
        rec.add("ledger", {"key": key, "from": "failed", "to": "accepted", "attempts": stored.attempts})
