"""The thread of a SQLite file's writer that commits its deferred operations (``GroupCommit.defer``).

Once its linger (``sqlite_writer.LINGER_S``) is over, the flusher asks to be lent the writer by the
next leader that commits durably: that leader has nothing more to do on the writer until the
``fdatasync`` of the WAL returns, and the sync holds neither the connection nor the interpreter's
lock, so the deferred operations are committed beside the disk's wait (:meth:`Lend.sync`). Before,
the flusher queued behind whoever held the writer, as a reader's settle does: as a rule behind an
intent's fsync, so its group began as that caller went on to its outcome, which then waited for the
whole of it, riding in its transaction. When no durable commit comes within another linger, it
settles as before.

The writer owns a :class:`Lend` (where a lend stands, guarded by the writer's lock) and hands it to
its flusher; the flusher asks the rest of the writer through :class:`Lender`'s methods.
"""

from __future__ import annotations

import _thread
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from actionspace.ledger._group_ops import Queued

__all__ = ["Flusher", "Lend", "Lender", "held_lock"]

_log = logging.getLogger("actionspace.ledger.sqlite_writer")


def held_lock() -> _thread.LockType:
    """A bare lock, taken: the first ``acquire`` waits for a ``release``."""
    lock = _thread.allocate_lock()
    lock.acquire()
    return lock


_NONE, _OFFERED, _BEGUN = 0, 1, 2
"""``Lend.stage``: no lend, the writer lent but the flusher's transaction not begun, begun."""


class Lender(Protocol):
    """What the flusher asks of its writer (``GroupCommit``)."""

    def flush_due(self) -> bool:
        """False (the flusher disarmed) when nothing is deferred or the process is a forked child of
        the writer's; else the flusher's lend marked due (``Lend.due``)."""

    def take_deferred(self) -> list[Queued]:
        """The deferred operations queued, taken out of the queue, the flusher disarmed; called with
        the writer's lock held (``Lend.begin``)."""

    def commit_group(self, group: list[Queued]) -> None:
        """Commit ``group`` on the writer (held by the caller, or lent to it)."""

    def settle(self) -> None: ...


class Lend:
    """Where a lend of a writer to its flusher stands: made by the writer with its own lock, which
    guards every field but ``ended``, and given to the flusher it starts."""

    __slots__ = ("due", "ended", "flusher", "lock", "stage")

    def __init__(self, lock: threading.Lock) -> None:
        self.lock = lock
        self.flusher: Flusher | None = None
        """The writer's flusher thread, started by its first deferred operation."""
        self.due = False
        """The flusher's linger is over and it waits to be lent the writer (:meth:`sync`)."""
        self.stage = _NONE
        self.ended = held_lock()
        """Released by the flusher once its transaction on a lent writer ended."""

    def sync(self, fd: int) -> None:
        """``os.fdatasync(fd)`` after a durable commit of the writer's leader, the writer lent to its
        flusher meanwhile when it waits for that (its linger over). A flusher that began its
        transaction before the sync returned is waited for; one that had not (it was not scheduled in
        time: a fast disk, a busy machine) is not let begin, and waits for the next durable commit's
        sync.

        The flusher's commit writes its frames after the leader's, which the sync makes durable
        whether or not it takes the later ones too; the leader's callers are answered after the
        sync, as ever.

        An interruption (a signal handler's exception) landing anywhere in here still leaves the
        lend whole: the flusher is released in the same step that claims the lend (else it would
        wait for ever for a release that never comes), and a flusher that began is waited for before
        the exception goes on (else the leader's caller would let the writer go while the flusher's
        transaction is open on its connection).
        """
        lend = False
        try:
            with self.lock:
                flusher = self.flusher
                lend = self.due and flusher is not None
                self.due = False
                self.stage = _OFFERED if lend else _NONE
                if lend and flusher is not None:
                    flusher.lent.release()  # lent as the lend is claimed: no call between the two
            os.fdatasync(fd)
        finally:
            if lend:  # taken back, inline: no call an interruption could land in before the wait
                begun = False
                try:
                    with self.lock:
                        begun, self.stage = self.stage == _BEGUN, _NONE
                finally:
                    if begun:
                        self.ended.acquire()  # the flusher's transaction ended: the writer is the leader's

    def begin(self, take: Callable[[], list[Queued]]) -> list[Queued] | None:
        """The flusher's transaction begun on the lent writer: what ``take`` takes (under the lock);
        None when the leader's sync ended before this began."""
        with self.lock:
            if self.stage != _OFFERED:
                return None
            self.stage = _BEGUN
            return take()

    def withdraw(self) -> bool:
        """The flusher's wait to be lent ended: True when it was still waiting (not lent)."""
        with self.lock:
            waited, self.due = self.due, False
        return waited


def _flush_lent(writer: Lender, lend: Lend, path: Path) -> bool:
    """The flusher's part of :meth:`Lend.sync`: the deferred operations queued, committed in a
    transaction of their own on the writer the syncing leader holds; a failure is logged. False
    (nothing done) when the leader's sync ended before this began."""
    group = lend.begin(writer.take_deferred)
    if group is None:
        return False
    try:
        writer.commit_group(group)
    except BaseException as exc:  # nothing of the group is written
        for slot in group:
            slot.error = exc
    finally:
        lend.ended.release()
    for slot in group:
        if slot.error is not None:
            _log.error("a queued write to %s failed", path, exc_info=slot.error)
    return True


def _flush(writer: Lender, lend: Lend, lent: _thread.LockType, path: Path, linger_s: float) -> None:
    """What the flusher does once its linger is over: wait up to ``linger_s`` to be lent the writer
    (:meth:`Lend.sync`), else settle (queued behind whoever holds the writer)."""
    deadline = time.monotonic() + linger_s
    while True:
        if not writer.flush_due():
            return
        if not lent.acquire(timeout=max(0.0, deadline - time.monotonic())):
            if lend.withdraw():
                writer.settle()
                return
            lent.acquire()  # lent as the wait ended: the leader's release is under way
        if _flush_lent(writer, lend, path):
            return


class Flusher:
    """A writer's thread committing deferred operations nobody else's transaction took.

    It holds its writer weakly: a writer its stores dropped without closing goes, and the thread
    with it.
    """

    def __init__(self, writer: Lender, lend: Lend, path: Path) -> None:
        self._poked = threading.Event()
        self._stopped = False
        self.lent = held_lock()
        """Released by a leader lending the writer (:meth:`Lend.sync`)."""
        ref = weakref.ref(writer)
        self._thread = threading.Thread(
            target=self._loop, args=(ref, lend, path), name=f"actionspace-flush-{path.name}", daemon=True
        )
        self._thread.start()

    def poke(self) -> None:
        self._poked.set()

    def stop(self) -> None:
        self._stopped = True
        self._poked.set()

    def _loop(self, ref: weakref.ReferenceType[Lender], lend: Lend, path: Path) -> None:
        from actionspace.ledger import sqlite_writer  # LINGER_S read as it is now (tests set it)

        poked = self._poked
        while not self._stopped:
            if not poked.wait(timeout=5.0):
                if ref() is None:
                    return
                continue
            time.sleep(sqlite_writer.LINGER_S)  # what is deferred meanwhile goes in the same transaction
            poked.clear()
            writer = ref()
            if writer is None or self._stopped:
                return
            try:
                _flush(writer, lend, self.lent, path, sqlite_writer.LINGER_S)
            except Exception:  # a closed store, a full disk: reported, the thread stays
                _log.exception("committing deferred writes to %s failed", path)
            del writer
