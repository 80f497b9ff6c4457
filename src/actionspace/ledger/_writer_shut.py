"""How :class:`~actionspace.ledger.sqlite_writer.GroupCommit` closes the writing connection.

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
import threading
from typing import Any

__all__ = ["ShutWhenIdle", "close_fd"]


class ShutWhenIdle:
    """The writer's side: ``_lock``, ``_busy``, ``_db`` and ``_close_wal`` are GroupCommit's."""

    _lock: threading.Lock
    _busy: bool
    _db: Any
    _shut = False
    """The connections are to be closed by whoever holds the writer, as it lets go."""

    def _close_wal(self) -> None:
        raise NotImplementedError

    def _let_go(self) -> None:
        raise NotImplementedError

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
