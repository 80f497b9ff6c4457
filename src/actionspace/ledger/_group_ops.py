"""How :class:`~actionspace.ledger.sqlite_writer.GroupCommit` runs the operations of one group inside
its transaction: each in a savepoint of its own, or, when every one of them may run twice, all at
once with no savepoint and again in savepoints only when one of them raised."""

from __future__ import annotations

import _thread
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, Protocol

__all__ = ["Queued", "Slot", "alone_beside_settles", "run_group"]


class Queued:
    """One caller's operation waiting for a shared commit."""

    __slots__ = ("detached", "done", "durable", "error", "lead", "op", "rerunnable", "result")

    def __init__(
        self, op: Callable[[sqlite3.Connection], Any], durable: bool, rerunnable: bool = False
    ) -> None:
        self.op = op
        self.durable = durable
        self.rerunnable = rerunnable
        """Its operation may run twice in a transaction rolled back between (``_group_ops``)."""
        self.detached = False
        """Its caller did not wait: a failure is logged, not raised."""
        self.done: _thread.LockType | None = None
        """Taken while its caller waits, released once its group committed or it was handed the lead
        (a bare lock: an Event's wait and set are Python code, run by every waiting caller)."""
        self.lead = False
        self.result: Any = None
        self.error: BaseException | None = None


class Slot(Protocol):
    """What a group's operation carries (:class:`Queued`)."""

    op: Any
    rerunnable: bool
    result: Any
    error: BaseException | None


def run_group(conn: sqlite3.Connection, group: Sequence[Slot]) -> None:
    """Run ``group``'s operations in the transaction open on ``conn``: each slot's result or error set.

    A savepoint and its release are two statements, each a release of the interpreter's lock that
    the writing thread must take back from the other callers' threads: for groups of operations
    that may run twice (:meth:`GroupCommit.run`'s ``rerunnable``), they are left out, and the rare
    group in which one raises is rolled back whole and run again, each operation in its savepoint,
    so the others commit and the one that raised writes nothing, as always.
    """
    if _rerunnable(group) and _all_at_once(conn, group):
        return
    _each_in_a_savepoint(conn, group)


def _rerunnable(group: Sequence[Slot]) -> bool:
    return all([slot.rerunnable for slot in group])


def _all_at_once(conn: sqlite3.Connection, group: Sequence[Slot]) -> bool:
    """Run every operation with no savepoint; False (the transaction rolled back and begun again,
    no result kept) when one raised."""
    for slot in group:
        try:
            slot.result = slot.op(conn)
        except Exception:
            break
    else:
        return True
    conn.rollback()  # what every operation of the group wrote, the partial one's with it
    for slot in group:
        slot.result = None
    conn.execute("BEGIN IMMEDIATE")
    return False


def _each_in_a_savepoint(conn: sqlite3.Connection, group: Sequence[Slot]) -> None:
    for slot in group:
        conn.execute("SAVEPOINT op")
        try:
            slot.result = slot.op(conn)
        except Exception as exc:
            conn.execute("ROLLBACK TO op")
            slot.error = exc
        conn.execute("RELEASE op")


def alone_beside_settles(conn: sqlite3.Connection, slot: Slot) -> bool:
    """Run the one operation of a group whose others are settles, with no savepoint: an error
    rolls the whole transaction back and is the slot's alone (as its savepoint would have made it).
    False when it failed."""
    try:
        slot.result = slot.op(conn)
    except Exception as exc:
        conn.rollback()
        slot.error = exc
        return False
    return True
