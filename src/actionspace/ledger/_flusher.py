"""The thread of a SQLite file's writer that commits its deferred operations (``GroupCommit.defer``).

Once its linger (``sqlite_writer.LINGER_S``) is over, the flusher asks to be lent the writer by the
next leader that commits durably: that leader has nothing more to do on the writer until the
``fdatasync`` of the WAL returns, and the sync holds neither the connection nor the interpreter's
lock, so the deferred operations are committed beside the disk's wait (:func:`sync_lent`). Before,
the flusher queued behind whoever held the writer, as a reader's settle does: as a rule behind an
intent's fsync, so its group began as that caller went on to its outcome, which then waited for the
whole of it, riding in its transaction. When no durable commit comes within another linger, it
settles as before.
"""

from __future__ import annotations

import _thread
import logging
import os
import threading
import time
import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from actionspace.ledger.sqlite_writer import GroupCommit

__all__ = ["Flusher", "held_lock", "sync_lent"]

_log = logging.getLogger("actionspace.ledger.sqlite_writer")


def held_lock() -> _thread.LockType:
    """A bare lock, taken: the first ``acquire`` waits for a ``release``."""
    lock = _thread.allocate_lock()
    lock.acquire()
    return lock


def sync_lent(writer: GroupCommit, fd: int) -> None:
    """``os.fdatasync(fd)`` after a durable commit of ``writer``'s leader, the writer lent to its
    flusher meanwhile when it waits for that (its linger over). A flusher that began its transaction
    before the sync returned is waited for; one that had not (it was not scheduled in time: a fast
    disk, a busy machine) is not let begin, and waits for the next durable commit's sync.

    The flusher's commit writes its frames after the leader's, which the sync makes durable whether
    or not it takes the later ones too; the leader's callers are answered after the sync, as ever.
    """
    with writer._lock:
        flusher = writer._flusher
        lend = writer._due and flusher is not None
        writer._due = False
        writer._lend = _OFFERED if lend else _NONE
    if not lend or flusher is None:
        os.fdatasync(fd)
        return
    flusher.lend()
    try:
        os.fdatasync(fd)
    finally:
        with writer._lock:
            begun, writer._lend = writer._lend == _BEGUN, _NONE
        if begun:
            writer._lent.acquire()  # the flusher's transaction ended: the writer is the leader's again


_NONE, _OFFERED, _BEGUN = 0, 1, 2
"""``GroupCommit._lend``: no lend, the writer lent but the flusher's transaction not begun, begun."""


def _flush_lent(writer: GroupCommit) -> bool:
    """The flusher's part of :func:`sync_lent`: the deferred operations queued, committed in a
    transaction of their own on the writer the syncing leader holds; a failure is logged. False
    (nothing done) when the leader's sync ended before this began."""
    with writer._lock:
        if writer._lend != _OFFERED:
            return False
        writer._lend = _BEGUN
        writer._armed = False
        group = [slot for slot in writer._queue if slot.detached]
        if group:
            writer._queue = [slot for slot in writer._queue if not slot.detached]
            writer._detached -= len(group)
    try:
        writer._commit(group)
    except BaseException as exc:  # nothing of the group is written
        for slot in group:
            slot.error = exc
    finally:
        writer._lent.release()
    for slot in group:
        if slot.error is not None:
            _log.error("a queued write to %s failed", writer._db.path, exc_info=slot.error)
    return True


def _flush(writer: GroupCommit, lent: _thread.LockType, linger_s: float) -> None:
    """What the flusher does once its linger is over: wait up to ``linger_s`` to be lent the writer
    (:func:`sync_lent`), else settle (queued behind whoever holds the writer)."""
    from actionspace.ledger import _connections

    deadline = time.monotonic() + linger_s
    while True:
        with writer._lock:
            if not writer._detached or writer._pid != _connections.PID:
                writer._armed = False
                return
            writer._due = True
        if not lent.acquire(timeout=max(0.0, deadline - time.monotonic())):
            with writer._lock:
                waited, writer._due = writer._due, False
            if waited:
                writer.settle()
                return
            lent.acquire()  # lent as the wait ended: the leader's release is under way
        if _flush_lent(writer):
            return


class Flusher:
    """A writer's thread committing deferred operations nobody else's transaction took.

    It holds its writer weakly: a writer its stores dropped without closing goes, and the thread
    with it.
    """

    def __init__(self, writer: GroupCommit) -> None:
        self._poked = threading.Event()
        self._stopped = False
        self._lent = held_lock()
        """Released by a leader lending the writer (:func:`sync_lent`)."""
        ref = weakref.ref(writer)
        self._thread = threading.Thread(
            target=self._loop, args=(ref,), name=f"actionspace-flush-{writer._db.path.name}", daemon=True
        )
        self._thread.start()

    def poke(self) -> None:
        self._poked.set()

    def lend(self) -> None:
        self._lent.release()

    def stop(self) -> None:
        self._stopped = True
        self._poked.set()

    def _loop(self, ref: weakref.ReferenceType[GroupCommit]) -> None:
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
                _flush(writer, self._lent, sqlite_writer.LINGER_S)
            except Exception:  # a closed store, a full disk: reported, the thread stays
                _log.exception("committing deferred writes to %s failed", writer._db.path)
            del writer
