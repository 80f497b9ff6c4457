"""The queue of :class:`~actionspace.ledger.sqlite_writer.GroupCommit`: how a group's leader takes
the waiting callers' operations out of it, commits them, and hands the lead on to the first caller
still waiting, and what the writer's flusher thread asks of it (``_flusher.Lender``).

A signal handler's exception (Ctrl-C's ``KeyboardInterrupt``) reaches the main thread where the
interpreter looks for one, as a call begins or returns; when that thread leads a group, it lands in
the middle of other callers' work. What it leaves behind:

- before the group's ``COMMIT`` (as the group is taken, in ``BEGIN``, in an operation): nothing of
  the group is written (a transaction left open is rolled back); the leader's caller raises the
  exception, and every other caller of the group fails with :class:`CutElsewhere` (an ``Exception``:
  its thread was not interrupted);
- as the ``COMMIT`` returns, or in the ``fdatasync`` after it (completed again: ``_synced``): the
  group is in the file, so each caller is answered with its own operation's result, and only the
  leader's caller raises the exception, once the others were released;
- in the hand-on itself: what it had not done yet is done (the lead handed once, every caller
  released once), then the exception goes on.

So an interruption never leaves a caller waiting for ever, the writer held, or a caller told it
failed while its operation is in the file.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3

from actionspace.ledger import _connections
from actionspace.ledger._flusher import Flusher, Lend
from actionspace.ledger._group_ops import Queued
from actionspace.ledger._writer_shut import ShutWhenIdle

__all__ = ["CutElsewhere", "GroupQueue", "Synced", "nothing"]

_log = logging.getLogger("actionspace.ledger.sqlite_writer")


class Synced(BaseException):
    """A committed group's sync, cut by an exception and made whole after it (``_synced``): the
    group is on disk; ``cut`` (None: the sync's own failure, which the second sync overcame) is
    raised by the leader once the group's callers are answered."""

    def __init__(self, cut: BaseException | None) -> None:
        super().__init__(cut)
        self.cut = cut


class CutElsewhere(Exception):
    """What a caller of a group is told when the group's leader, another thread, was interrupted
    (``cut``: a ``KeyboardInterrupt``, a ``SystemExit``) before the group was written: its own
    call failed, nothing of it is written, and it was not interrupted itself."""

    def __init__(self, cut: BaseException) -> None:
        super().__init__(f"the transaction this write shared was cut in another thread: {cut!r}")
        self.cut = cut


class GroupQueue(ShutWhenIdle):
    """The writer's side: every field is GroupCommit's; ``_commit`` commits a group on the writer."""

    _queue: list[Queued]
    _detached: int
    _armed: bool
    _pid: int
    _lend: Lend
    _wal: tuple[sqlite3.Connection, int | None, sqlite3.Cursor] | None
    _committing: list[Queued] | None = None
    """The group whose ``COMMIT`` is under way (set just before it): an exception that reaches the
    leader after it, and not from it, finds the group committed (``_failed``)."""
    _taken: list[Queued] | None = None
    """The group :meth:`_take` took for the leader running (None before it took one)."""
    _handed: list[Queued] | tuple[()] = ()
    """The last group whose lead :meth:`_hand_on` handed on."""

    def _commit(self, group: list[Queued]) -> None:
        raise NotImplementedError

    def _lead(self, flush: bool = False) -> None:
        """Take the next group, commit it and hand the writer on (the module docstring says what an
        interruption landing in any of these steps leaves)."""
        group: list[Queued] = []
        cut: BaseException | None = None
        try:
            try:
                self._committing = self._taken = None
                with self._lock:
                    group = self._take(flush)
                self._commit(group)
            except Synced as synced:  # on disk: each caller answered, the interruption its leader's
                cut = synced.cut
            except BaseException as exc:
                group = self._taken or group  # taken, though the exception came before it was handed back
                if not group:  # nothing taken: its caller leaves the queue as a waiting one does
                    raise
                cut = self._failed(group, exc)
            self._hand_on(group)
        except BaseException:  # the interruption landed in the hand-on: what it left undone
            if group:
                self._hand_on(group)
            raise
        if cut is not None:
            raise cut

    def _failed(self, group: list[Queued], exc: BaseException) -> BaseException | None:
        """``exc`` ended the commit of ``group``: None, each caller given it as its failure and a
        transaction it left open rolled back (nothing of the group is written); or, when it reached
        the leader as its ``COMMIT`` returned (the group is in the file), ``exc`` itself, for the
        leader to raise once every caller of the group is answered with its own result."""
        wal = self._wal
        conn = None if wal is None else wal[0]
        left_open = conn is not None and conn.in_transaction  # begun, or a COMMIT that failed left it open
        if not left_open and self._committing is group and group and not isinstance(exc, sqlite3.Error):
            return exc
        elsewhere = exc if isinstance(exc, Exception) else CutElsewhere(exc)
        for slot in group:  # the leader's own slot is the one not waiting (no ``done``) nor deferred
            slot.error = exc if slot.done is None and not slot.detached else elsewhere
        if left_open and conn is not None:  # after the callers' failures: a second cut here leaves them told
            with contextlib.suppress(sqlite3.Error):
                conn.rollback()
        return None

    def _synced(self, fd: int) -> None:
        """The ``fdatasync`` of the WAL after a group's ``COMMIT`` (beside the flusher's commit when
        it waits for that: ``Lend.sync``). An exception cutting it (a signal handler's, as the sync
        returns) comes after the group was committed: the sync is made whole and :class:`Synced`
        raised, so the group's callers are answered with their results. One the second sync raises
        too (the disk failing) fails the group, as before."""
        try:
            if self._lend.due:
                self._lend.sync(fd)
            else:
                os.fdatasync(fd)
        except BaseException as cut:
            try:
                os.fdatasync(fd)  # what the cut sync may have left unwritten
            except BaseException:
                self._committing = None  # not known to be on disk: every caller told the failure
                raise
            raise Synced(None if isinstance(cut, OSError) else cut) from None

    def _take(self, flush: bool) -> list[Queued]:
        """The next group, out of the queue (the writer's lock held): every waiting caller's
        operation, and the deferred ones too when ``flush`` or a settle waits among them."""
        queue = self._queue
        whole = flush or (len(queue) == 1 and not queue[0].detached)  # everything, or a lone caller
        if whole or any([slot.op is nothing for slot in queue]):  # a settle returns once they committed
            group, self._queue = queue, []
        else:
            group = [slot for slot in queue if not slot.detached]
            self._queue = [slot for slot in queue if slot.detached]
        self._waiting = 0  # each case above takes every waiting caller's operation
        self._taken = group
        return group

    def _hand_on(self, group: list[Queued] | tuple[()]) -> None:
        """The lead to the first caller waiting, the group's callers released. Called again for a
        group whose hand-on an interruption cut, it does what that one left undone: the lead is
        never handed twice, nor a caller released twice."""
        with self._lock:
            queue = self._queue
            if group and self._handed is group:  # the lead was handed on before the interruption
                poke = self._armed and bool(queue)
                if poke and self._lend.flusher is None:
                    self._lend.flusher = Flusher(self, self._lend, self._db.path)
            else:
                heir = (
                    next((slot for slot in queue if slot.done is not None), None) if self._waiting else None
                )
                gone = sum([slot.detached for slot in group]) if self._detached and group else 0
                # Only deferred operations queued behind the group: the flusher commits them
                # unless another caller's write takes them first; the leader's caller goes on.
                poke = heir is None and bool(queue) and not self._armed
                self._handed = group  # from here to the heir's release no call an interruption lands in
                self._busy = heir is not None
                self._detached -= gone
                if heir is not None and heir.done is not None:
                    heir.lead = True
                    heir.done.release()
                if poke:
                    self._armed = True
                    if self._lend.flusher is None:
                        self._lend.flusher = Flusher(self, self._lend, self._db.path)
            flusher = self._lend.flusher
        if self._shut:
            self._shut_when_idle()
        if poke and flusher is not None:
            flusher.poke()
        for slot in group:
            slot.lead = False
            done, slot.done = slot.done, None  # released once, also when called again
            if done is not None:
                done.release()
            elif slot.detached and slot.error is not None:
                _log.error("a queued write to %s failed", self._db.path, exc_info=slot.error)

    # What the flusher asks of its writer (``_flusher.Lender``).

    def flush_due(self) -> bool:
        """False (the flusher disarmed) when nothing is deferred or this is a forked child of the
        writer's process; else the flusher's lend marked due."""
        with self._lock:
            if not self._detached or self._pid != _connections.PID:
                self._armed = False
                return False
            self._lend.due = True
            return True

    def take_deferred(self) -> list[Queued]:
        """The deferred operations queued, taken out of the queue, the flusher disarmed (with the
        writer's lock held: ``Lend.begin``)."""
        self._armed = False
        group = [slot for slot in self._queue if slot.detached]
        if group:
            self._queue = [slot for slot in self._queue if not slot.detached]
            self._detached -= len(group)
        return group

    def commit_group(self, group: list[Queued]) -> None:
        """Commit ``group`` on the writer, held by the caller or lent to it."""
        self._commit(group)

    def settle(self) -> None:
        raise NotImplementedError


def nothing(conn: sqlite3.Connection) -> None:
    """A settle's operation (``GroupCommit.settle``): it writes nothing, and is run by no group."""
    return None
