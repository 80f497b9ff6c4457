"""The one writer of a SQLite file in a process, and its connections.

:class:`SqliteConnections` (defined in :mod:`actionspace.ledger._connections`) keeps one reading connection
per thread to a file, and one writing connection (reopened in a forked child), with the stores' settings (WAL,
``synchronous=FULL``, a busy timeout; the writer lowers its own connection to NORMAL and syncs the WAL itself
after a durable commit). :class:`GroupCommit` is the file's writer: concurrent writers of one process share a
transaction and its fsync (group commit) on that one connection, and every store on the file (ledger, trace,
run state, budgets) writes through it. The ledger's durability statement is in
:mod:`actionspace.ledger.sqlite`.
"""

from __future__ import annotations

import _thread
import atexit
import contextlib
import logging
import os
import sqlite3
import threading
import weakref
from _thread import get_ident as _ident
from collections.abc import Callable
from typing import Any, Final

from actionspace.ledger import _connections
from actionspace.ledger._connections import SqliteConnections
from actionspace.ledger._flusher import Flusher, Lend
from actionspace.ledger._group_ops import Queued as _Slot
from actionspace.ledger._group_ops import alone_beside_settles, run_group
from actionspace.ledger._group_queue import GroupQueue
from actionspace.ledger._group_queue import nothing as _nothing
from actionspace.ledger._writer_shut import close_fd

__all__ = ["BEGIN", "COMMIT", "DATA_VERSION", "GroupCommit", "Operation", "SqliteConnections"]

BEGIN: Final = "BEGIN IMMEDIATE"
"""How the writer opens a transaction: the write lock taken up front (a busy file waits here)."""
COMMIT: Final = "COMMIT"
"""Run as a statement, so cached (``Connection.commit`` compiles its ``COMMIT`` every time)."""
DATA_VERSION: Final = "PRAGMA data_version"
"""What :meth:`GroupCommit.read_kept` reads before a kept row: moved by another connection's commit."""


Operation = Callable[[sqlite3.Connection], Any]
"""What a caller hands the writer: it runs inside the shared transaction on the given connection."""


LINGER_S = 0.01
"""How long after a deferred operation (:meth:`GroupCommit.defer`) arrives the writer's flusher
thread commits it with everything deferred meanwhile (seconds): beside the next durable commit's
sync, or, when none comes within another ``LINGER_S``, as soon as the writer is free."""


_WRITERS: weakref.WeakValueDictionary[tuple[int, str], GroupCommit] = weakref.WeakValueDictionary()
"""The writer of each file in this process; one its stores dropped without closing goes too."""
_WRITERS_LOCK = threading.Lock()
_log = logging.getLogger(__name__)


class GroupCommit(GroupQueue):
    """Concurrent writers of one process share a transaction, and so its fsync.

    Each caller hands in its operation and returns only after the transaction holding it committed: nothing is
    acknowledged before it is written. The first caller to arrive leads: it runs every queued operation, each
    inside its own savepoint (one that raises is rolled back alone and its caller gets the exception;
    operations handed in as ``rerunnable`` run with none, and again in savepoints only if one raised), then
    commits once. Callers arriving meanwhile queue up; when the leader is done the first of them that waits
    leads the next group (a settle among them takes the deferred operations into it). A lone caller runs its
    operation at once, as a plain transaction would.

    A ``durable`` operation returns once its transaction is on disk (when the connections' own ``synchronous``
    level is FULL, as for the stores); the others once it is in the WAL file (it survives the process, not a
    power loss before the next fsync). A group holding any durable operation commits durably, the others'
    writes with it. The writing connection stays at ``synchronous=NORMAL`` and a durable commit is followed by
    an ``fdatasync`` of the WAL file before anyone is answered: the system call SQLite makes at FULL, on the
    same file, after the same frames (see :meth:`_use`), without switching the level twice a call.

    An operation handed to :meth:`defer` is not waited for: the writer's flusher thread commits everything
    deferred :data:`LINGER_S` after the first of it arrived, in one transaction (the operations of many calls
    at once), while the next durable commit's leader syncs the WAL (that leader lends it the writer:
    ``_flusher.Lend.sync``), or, when none comes within another :data:`LINGER_S`, queued behind whoever holds
    the writer. A waiting caller's group does not carry deferred operations, so an intent's fsync'd
    transaction stays as small as the intent. A caller that writes after every call (the trace of a call,
    written after its outcome) so pays no transaction of its own. :meth:`settle` commits what is deferred (the
    trace store's reads do so first), and so do :meth:`close` and the interpreter's exit; a process killed
    within that moment loses its deferred operations.
    :meth:`open` gives the one writer of a file in this process, shared by every store on it.
    """

    def __init__(self, db: SqliteConnections) -> None:
        self._db = db
        self._lock = threading.Lock()
        self._queue: list[_Slot] = []
        self._busy = False
        self._pid = os.getpid()
        self._shared: tuple[int, str] | None = None
        self._users = 0
        self._sync = db.synchronous.upper() in ("FULL", "EXTRA", "2", "3")
        """Durable operations wait for the disk (else every commit only for the WAL write)."""
        self._wal: tuple[sqlite3.Connection, int | None, sqlite3.Cursor] | None = None
        """The writing connection made ready by :meth:`_use`, the descriptor of its WAL file that a
        durable commit syncs (None: the connection stays at its own level, so every commit syncs as
        SQLite does), and a cursor of it kept for the writer's own statements (``BEGIN``,
        ``COMMIT``, the ``data_version`` read): ``Connection.execute`` makes a cursor a statement."""
        self._wal_closer: weakref.finalize[Any, Any] | None = None
        """Closes that descriptor, also when the writer is dropped without :meth:`close`."""
        self._detached = 0
        """Operations queued whose callers did not wait, not committed yet."""
        self._waiting = 0
        """Operations queued whose callers wait (the others are deferred ones): a leader takes all."""
        self._armed = False
        """The flusher was told about deferred operations and has not committed them yet."""
        self._lend = Lend(self._lock)
        """The flusher thread and where a lend of the writer to it stands (``_flusher``)."""
        self._holder = 0
        """The thread holding the writer alone (``run``, ``read_kept``) until :meth:`_let_go`; 0 after."""
        self._kept: dict[str, tuple[sqlite3.Connection, int, str, Any]] = {}
        """What :meth:`read_kept` read, by key: on which connection, at which ``data_version``,
        by which statement, and the row."""

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, busy_timeout_s: float) -> GroupCommit:
        """The writer of ``path`` in this process, shared until every opener called :meth:`close`.

        ``busy_timeout_s`` (seconds) bounds the wait for writers of other processes; the first
        opener's value holds while the writer is shared. Raises
        :class:`~actionspace.errors.ConfigurationError` for ``":memory:"``.
        """
        key = (os.getpid(), os.path.realpath(path))
        with _WRITERS_LOCK:
            writer = _WRITERS.get(key)
            if writer is None:
                db = SqliteConnections(path, synchronous="FULL", busy_timeout_s=busy_timeout_s)
                writer = _WRITERS[key] = cls(db)
                writer._shared = key
            writer._users += 1
            return writer

    @property
    def queued(self) -> int:
        """How many operations wait for the transaction after the one being committed."""
        with self._lock:
            return len(self._queue)

    def run(
        self, op: Operation, *, durable: bool = True, rerunnable: bool = False, autocommit: bool = False
    ) -> Any:
        """``op(conn)`` inside a committed transaction; its result, or its exception raised here.

        ``rerunnable``: ``op`` may be run again after a rollback of what it wrote (it has no effect outside
        the connection, or none that running it twice changes), so a group of such operations runs without a
        savepoint each (``_group_ops``). ``autocommit``: at most the last statement ``op`` runs writes (each
        one before it changes nothing, or only reads), and each of them is whole on its own, so a lone ``op``
        runs with no ``BEGIN`` and ``COMMIT`` around it: every statement is its own transaction (a write
        statement takes the file's write lock when it starts, waiting for it as ``BEGIN IMMEDIATE`` does), the
        one that writes is committed when it ends, and one that raises wrote nothing. In a group it shares the
        group's transaction as any operation does."""
        slot: _Slot | None = None
        alone = False
        try:  # a signal handler's exception may land between any two calls: never left held or queued
            with self._lock:
                if self._pid != _connections.PID:  # a forked child: the parent's queue is not ours
                    self._forked()
                # Nothing leads and only deferred operations queue (the flusher's to commit; a settle
                # takes them): this caller's group is itself, led at once, never put in the queue.
                alone = not self._busy and len(self._queue) == self._detached and op is not _nothing
                if not alone:
                    slot = _Slot(op, durable, rerunnable)
                    slot.lead = not self._busy
                    if not slot.lead:
                        slot.done = done = _thread.allocate_lock()
                        done.acquire()  # taken now: the acquire below returns once the leader releases it
                    self._waiting += 1
                    self._queue.append(slot)
                else:
                    self._holder = _ident()
                self._busy = True
            if slot is None:  # the writer idle and nothing queued: a group of this one, led at once
                return self._commit_alone(op, durable, autocommit)
            if not slot.lead:
                done.acquire()
            if slot.lead:  # arrived first, or handed the lead when the group before it committed
                slot.done = None  # released already: its own group's end must not release it again
                self._lead(flush=op is _nothing)
        except BaseException:
            self._leave(slot, alone)
            raise
        finally:
            if alone:  # (written out here: a call of its own is one more point to land on)
                try:
                    self._let_go()
                except BaseException:  # landed as it began (still ours: let go) or as it returned
                    if self._holder == _ident():
                        self._let_go()
                    raise
        if slot.error is not None:
            raise slot.error
        return slot.result

    def defer(self, op: Operation) -> None:
        """Have ``op(conn)`` committed without waiting: by the flusher within :data:`LINGER_S`,
        or by :meth:`settle` before that (``synchronous=NORMAL`` unless a durable operation
        shares that transaction), in its own savepoint; a failure is logged."""
        slot = _Slot(op, False)
        slot.detached = True
        with self._lock:
            if self._pid != _connections.PID:
                self._forked()
            self._queue.append(slot)
            self._detached += 1
            if self._busy or self._armed:
                return  # the leader of the group being committed or the flusher sees it
            self._armed = True
            flusher = self._lend.flusher
            if flusher is None:
                flusher = self._lend.flusher = Flusher(self, self._lend, self._db.path)
        flusher.poke()

    def settle(self) -> None:
        """Return once every operation handed to :meth:`defer` before is committed."""
        with self._lock:
            self._armed = False
            if not self._detached:
                return
        self.run(_nothing, durable=False)

    def using(self, readers: SqliteConnections) -> contextlib.ExitStack:
        """``readers.using()`` and this writer's (see ``SqliteConnections.using``), as one block."""
        with contextlib.ExitStack() as stack:
            stack.enter_context(readers.using())
            stack.enter_context(self._db.using())
            return stack.pop_all()

    def close(self) -> None:
        """Let go of a writer from :meth:`open`; the last to let go closes its connections, at once
        when nobody holds the writer, else as its holder lets go (``_writer_shut``)."""
        self.settle()
        with _WRITERS_LOCK:
            self._users -= 1
            if self._users > 0 or self._shared is None:
                return
            if _WRITERS.get(self._shared) is self:
                del _WRITERS[self._shared]
        flusher, self._lend.flusher = self._lend.flusher, None
        if flusher is not None:
            flusher.stop()
        self._shut_when_idle()

    def _forked(self) -> None:
        """In a forked child: the parent's queue and flusher thread are not this process's."""
        self._queue, self._busy, self._pid, self._waiting = [], False, os.getpid(), 0
        self._detached, self._armed, self._kept = 0, False, {}
        self._lend = Lend(self._lock)  # the parent's flusher is not ours
        self._close_wal()  # the parent's descriptor: this process's writer opens its own

    def read_kept(self, sql: str, key: str, readers: SqliteConnections) -> Any:
        """The first row of ``sql`` with ``(key,)`` (None: no row), read on the writing connection
        while no group holds it, else on this thread's connection of ``readers`` (the caller's
        store's, which raise ``ValueError`` once it is closed): this never waits for a commit.

        The rows read on the writer are kept, and answered from memory while its ``PRAGMA data_version`` is
        the one read before them — no other connection, of this process or another, committed to the file
        since — and no write of this process changed them (its operation calls :meth:`forget`). The check is
        on the writer because its own commits do not move its ``data_version``: on a reading connection each
        of them would count as another's, and a durable call commits twice. One statement on the writer, whose
        cache is warm, against a read on a connection whose cache the writer's last commit dropped.
        """
        readers.check_open()
        lead = False
        try:  # a signal handler's exception may land once the lock is let go: the writer is let go too
            with self._lock:
                lead = not self._busy and self._pid == _connections.PID
                if lead:  # held as a group's leader holds it
                    self._busy, self._holder = True, _ident()
            if not lead:
                return readers.conn().execute(sql, (key,)).fetchone()
            conn = self._db.writer()
            if conn.in_transaction:  # a failed commit left it open: not a view to answer from
                return readers.conn().execute(sql, (key,)).fetchone()
            wal = self._wal
            if wal is None or wal[0] is not conn:
                wal = self._use(conn)
            cursor = wal[2]
            version = cursor.execute(DATA_VERSION).fetchall()[0][0]  # read before the rows
            kept = self._kept.get(key)
            if kept is not None and kept[0] is conn and kept[1] == version and kept[2] == sql:
                return kept[3]
            rows = cursor.execute(sql, (key,)).fetchall()
            if len(self._kept) >= 65_536:
                self._kept.clear()
            self._kept[key] = (conn, version, sql, rows[0] if rows else None)
            return rows[0] if rows else None
        finally:
            if lead:
                try:
                    self._let_go()
                except BaseException:  # as in ``run``: let go unless it did before the interruption
                    if self._holder == _ident():
                        self._let_go()
                    raise

    def forget(self, key: str) -> None:
        """Drop what :meth:`read_kept` keeps of ``key``: called by an operation that changes it,
        while it runs (under the writer's lead, as read_kept is), so no read keeps the rows of
        before once it committed."""
        self._kept.pop(key, None)

    def _let_go(self) -> None:
        """The end of a lone caller's hold of the writer (``run`` or ``read_kept``): the lead to
        whoever queued meanwhile, as :meth:`_hand_on` gives it; in the usual case nobody did, and
        nothing more than the flag is needed."""
        with self._lock:
            self._holder = 0  # let go: called again (``run``), it would end another thread's hold
            idle = not self._waiting and (not self._queue or self._armed)
            if idle:  # no heir to wake and nothing for the flusher: what _hand_on(()) would do
                self._busy = False
        if not idle:
            self._hand_on(())
        elif self._shut:
            self._shut_when_idle()

    def _commit_alone(self, op: Operation, durable: bool, autocommit: bool = False) -> Any:
        """``_commit`` of a group of one operation, its result returned and its exception raised
        (a failed commit writes nothing), with no slot made for it; an ``autocommit`` one (see
        :meth:`run`) with no transaction around it."""
        conn = self._db.writer()
        wal = self._wal
        if wal is None or wal[0] is not conn:
            wal = self._use(conn)
        if autocommit and not conn.in_transaction:  # (one a failed COMMIT left open is not ended here)
            changes = conn.total_changes
            try:
                result = op(conn)
            except BaseException as exc:
                if conn.in_transaction:  # a statement left unfinished: nothing of it is written
                    conn.rollback()
                elif conn.total_changes != changes:  # raised after its write statement ended: in the file
                    self._written_then_cut(exc, durable, wal[1])
                raise
        else:
            wal[2].execute(BEGIN)
            try:
                result = op(conn)
            except BaseException:
                conn.rollback()
                raise
            try:
                wal[2].execute(COMMIT)
            except BaseException as exc:
                if not conn.in_transaction:  # raised as the COMMIT returned: in the file
                    self._written_then_cut(exc, durable, wal[1])
                raise  # a COMMIT that failed: ``run`` rolls back what it left open
        if durable and wal[1] is not None:
            try:
                if self._lend.due:  # the flusher's deferred operations run on the writer while the disk syncs
                    self._lend.sync(wal[1])
                else:
                    os.fdatasync(wal[1])  # on disk before its caller is answered
            except BaseException as cut:  # the write is in the file: the sync made whole, as a group's
                self._written_then_cut(cut, durable, wal[1])
                raise
        return result

    def _written_then_cut(self, cut: BaseException, durable: bool, fd: int | None) -> None:
        """``cut`` reached a lone caller once its write was committed (as its statement or its
        ``COMMIT`` returned, or in the sync after it): the sync is made (again) before ``cut``
        goes on, a failure of it raised instead, so that a write its caller may find in the file
        (the intent's step asks the ledger: ``_intent.not_begun``) is on disk as a durable one is
        (``_group_queue._synced`` does the same for a group)."""
        if durable and fd is not None:
            os.fdatasync(fd)

    def _use(self, conn: sqlite3.Connection) -> tuple[sqlite3.Connection, int | None, sqlite3.Cursor]:
        """Make a new writing connection ready: at ``synchronous=NORMAL``, with a descriptor of its
        WAL file for the durable commits to sync.

        Why that is what FULL does: in WAL mode SQLite's FULL differs from NORMAL only in an ``fdatasync`` of
        the WAL file once a commit's frames are written (the WAL's header is synced at either level when the
        WAL restarts; checkpoints sync alike). Syncing the file after the commit returns flushes the same
        frames, by the same system call, before the caller is answered; the WAL is one sequence, so every
        earlier frame with them. The file stays the same while this connection is open: SQLite deletes or
        replaces a WAL only under an exclusive lock of the database, which the shared lock an open WAL-mode
        connection holds forbids. One thing differs: another connection may read the transaction between its
        commit and the sync, as it reads an outcome that is not synced; a power loss in that moment loses it
        as it loses such an outcome, and nothing was answered or sent on it yet. When the WAL cannot be opened
        (not in WAL mode), the connection keeps its own level: every commit then syncs as SQLite does.
        """
        fd: int | None = None
        if self._sync:
            conn.execute("PRAGMA schema_version").fetchall()  # a read opens the WAL
            mode = conn.execute("PRAGMA journal_mode").fetchall()[0][0]
            file = conn.execute("PRAGMA database_list").fetchall()[0][2]
            if str(mode).lower() == "wal" and file:
                with contextlib.suppress(OSError):
                    fd = os.open(f"{file}-wal", os.O_RDONLY | os.O_CLOEXEC)
        if fd is not None or not self._sync:
            conn.execute("PRAGMA synchronous = NORMAL")
        self._close_wal()
        if fd is not None:
            self._wal_closer = weakref.finalize(self, close_fd, fd)
        self._wal = (conn, fd, conn.cursor())
        return self._wal

    def _close_wal(self) -> None:
        closer, self._wal_closer, self._wal = self._wal_closer, None, None
        if closer is not None:
            closer()

    def _commit(self, group: list[_Slot]) -> None:
        # A settle's own operation writes nothing: it needs neither a savepoint nor a transaction.
        ops = group if len(group) == 1 else [slot for slot in group if slot.op is not _nothing]
        if not ops or ops[0].op is _nothing:
            return
        durable = ops[0].durable if len(ops) == 1 else any([slot.durable for slot in ops])
        conn = self._db.writer()  # only the leader of a group uses it
        wal = self._wal
        if wal is None or wal[0] is not conn:
            wal = self._use(conn)
        wal[2].execute(BEGIN)  # as SqliteConnections.write, without its context manager
        try:
            if len(ops) > 1:
                run_group(conn, ops)
            elif ops is group:  # alone: no savepoint needed, an error rolls the transaction back
                ops[0].result = ops[0].op(conn)
            elif not alone_beside_settles(conn, ops[0]):
                return  # it failed and was rolled back: the settles waiting with it wrote nothing
        except BaseException:
            conn.rollback()
            raise
        self._committing = group  # an interruption from here on finds it committed (``_group_queue``)
        wal[2].execute(COMMIT)
        if durable and wal[1] is not None:
            self._synced(wal[1])  # on disk before any caller of the group is released


_Flusher = Flusher  # its old name here


def _settle_all() -> None:
    """At the interpreter's exit: commit every writer's deferred operations."""
    with _WRITERS_LOCK:
        writers = list(_WRITERS.values())
    for writer in writers:
        if writer._pid == os.getpid():
            with contextlib.suppress(Exception):
                writer.settle()


atexit.register(_settle_all)
