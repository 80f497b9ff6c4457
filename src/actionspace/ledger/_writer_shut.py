"""How :class:`~actionspace.ledger.sqlite_writer.GroupCommit` closes the writing connection, and
how a caller interrupted while it waits for the writer leaves its queue.

A caller holding the writer (``_busy``: a group's leader, a lone ``run``, a ``read_kept``) runs
statements on it without any other lock. Closing the connection under such a statement frees what
the statement uses and crashes the process, so the last ``close()`` closes it only while nobody
holds the writer, holding it itself meanwhile; when somebody does, the holder closes it as it lets
go. A caller that takes the writer after that finds its connections closed and raises
:class:`~actionspace.errors.StoreClosedError`; ``close()`` never waits for a caller.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from typing import Any

__all__ = ["ShutWhenIdle", "close_fd"]


class ShutWhenIdle:
    """The writer's side: ``_lock``, ``_busy``, ``_db`` and ``_close_wal`` are GroupCommit's."""

    _lock: threading.Lock
    _busy: bool
    _db: Any
    _queue: list[Any]
    _waiting: int
    _wal: tuple[sqlite3.Connection, int | None, sqlite3.Cursor] | None
    _shut = False
    """The connections are to be closed by whoever holds the writer, as it lets go."""

    def _close_wal(self) -> None:
        raise NotImplementedError

    def _let_go(self) -> None:
        raise NotImplementedError

    def _hand_on(self, group: tuple[()]) -> None:
        raise NotImplementedError

    def _leave(self, slot: Any, held: bool = False) -> None:
        """``slot``'s caller (None: one that made no slot yet) was interrupted (a signal handler's
        exception) as it queued, while it waited for its group or as it was about to lead it. Not
        taken into a group yet, its operation leaves the queue (it never runs), and a lead handed to
        it goes on to the next caller waiting, or the writer is idle again: else every later caller
        would queue behind a leader that never comes. One taken into a group already is committed
        with it, as if its caller still waited.

        ``held``: a lone caller holding the writer raised (an interruption just after its ``BEGIN``,
        a ``COMMIT`` that failed): a transaction it left open is rolled back, so nothing of its
        operation is written and the next ``BEGIN`` on the connection does not fail."""
        if slot is None:
            wal = self._wal if held else None
            if wal is not None and wal[0].in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    wal[0].rollback()
            return
        with self._lock:
            queued = any([waiting is slot for waiting in self._queue])
            if queued:
                self._queue = [waiting for waiting in self._queue if waiting is not slot]
                self._waiting -= 1
            lead, slot.lead = slot.lead, False
        if queued and lead:
            self._hand_on(())

    def _shut_when_idle(self) -> None:
        """Close the writer's connections now if nobody holds it, else have its holder do it."""
        with self._lock:
            self._shut = self._busy
            if self._shut:
                return
            self._busy = True  # held while closing: nobody leads on the connection meanwhile
        try:
            self._db.close()
            self._close_wal()
        finally:
            self._let_go()  # callers queued meanwhile lead, and find the connections closed


def close_fd(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)
