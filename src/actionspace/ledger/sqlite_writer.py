"""The one writer of a SQLite file in a process, and its connections.

:class:`SqliteConnections` keeps one reading connection per thread to a file, and one writing
connection (reopened in a forked child), with the stores' settings (WAL, ``synchronous=FULL``, a
busy timeout). :class:`GroupCommit` is the file's writer: concurrent writers of one process share
a transaction and its fsync (group commit) on that one connection, and every store on the file
(ledger, trace, run state, budgets) writes through it. The ledger's durability statement is in
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
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from actionspace.errors import ConfigurationError

__all__ = ["GroupCommit", "Operation", "SqliteConnections"]


class SqliteConnections:
    """Connections to one SQLite file: one per thread, and :meth:`writer`; reopened after a fork.

    ``synchronous`` is the SQLite level set on every connection (``FULL`` or ``NORMAL``);
    ``busy_timeout_s`` (seconds) bounds how long a write waits for another writer.
    Raises :class:`~actionspace.errors.ConfigurationError` for ``":memory:"``.
    """

    def __init__(self, path: str | os.PathLike[str], *, synchronous: str, busy_timeout_s: float) -> None:
        if str(path) in ("", ":memory:"):
            raise ConfigurationError("a SQLite store needs a file path; use memory:// for a store in memory")
        self.path = Path(path)
        self.synchronous = synchronous
        self._busy_timeout_s = busy_timeout_s
        self._lock = threading.Lock()
        self._local = threading.local()
        self._conns: list[tuple[threading.Thread, sqlite3.Connection]] = []
        self._inherited: list[tuple[threading.Thread, sqlite3.Connection]] = []
        self._writer: sqlite3.Connection | None = None
        self._writer_pid = 0
        self._pid = os.getpid()
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def check_open(self) -> None:
        """Raise ``ValueError`` once closed."""
        if self._closed:
            raise ValueError(f"the store on {self.path} is closed")

    def conn(self) -> sqlite3.Connection:
        """This thread's connection in this process; raises ``ValueError`` once closed."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None and self._pid == os.getpid() and not self._closed:
            return conn
        return self._open_for_this_thread()

    def writer(self) -> sqlite3.Connection:
        """The connection this process writes with, whichever thread writes (one at a time).

        A connection's page cache is dropped whenever another connection wrote to the file, so
        the writes of every thread go through this one, whose cache stays warm. The caller makes
        sure no two threads use it at once. Raises ``ValueError`` once closed.
        """
        conn = self._writer
        if conn is not None and self._writer_pid == os.getpid() and not self._closed:
            return conn
        with self._lock:
            if self._closed:
                raise ValueError(f"the store on {self.path} is closed")
            if self._writer is not None and self._writer_pid != os.getpid():
                # the parent's: a forked child must not touch it, not even to close it
                self._inherited.append((threading.current_thread(), self._writer))
            conn = self._connect()
            self._writer, self._writer_pid = conn, os.getpid()
            return conn

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A ``BEGIN IMMEDIATE`` transaction: committed on exit, rolled back on an exception."""
        # Taking the write lock up front makes a busy file wait here, under busy_timeout, rather
        # than fail when a read lock would have to be upgraded mid-transaction.
        conn = self.conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.rollback()
            raise
        conn.commit()

    def init_schema(self, schema: str, meta_table: str, meta_key: str, version: int) -> None:
        """Create ``schema`` if missing and record ``version``; refuse a file from a newer version."""
        conn = self.conn()
        self._enable_wal(conn)
        with self.write():
            for statement in schema.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(
                f"INSERT INTO {meta_table} (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING",
                (meta_key, str(version)),
            )
        row = conn.execute(f"SELECT value FROM {meta_table} WHERE key = ?", (meta_key,)).fetchone()
        if int(row[0]) > version:
            raise ConfigurationError(
                f"{self.path} has schema version {row[0]} ({meta_key});"
                f" this actionspace reads up to {version};"
                " upgrade actionspace"
            )

    def close(self) -> None:
        """Close every connection opened in this process; later calls raise ``ValueError``."""
        with self._lock:
            self._closed = True
            conns, self._conns = self._conns, []
            mine = self._pid == os.getpid()
            writer, self._writer = self._writer, None
        if writer is not None and self._writer_pid == os.getpid():
            writer.close()
        if mine:
            for _, conn in conns:
                conn.close()

    def _open_for_this_thread(self) -> sqlite3.Connection:
        with self._lock:
            if self._closed:
                raise ValueError(f"the store on {self.path} is closed")
            if self._pid != os.getpid():
                # A forked child must not touch its parent's connections, not even to close them.
                self._local = threading.local()
                self._inherited += self._conns
                self._conns = []
                self._pid = os.getpid()
            alive = [(t, c) for t, c in self._conns if t.is_alive()]
            for thread, stale in self._conns:
                if not thread.is_alive():
                    stale.close()
            conn = self._connect()
            alive.append((threading.current_thread(), conn))
            self._conns = alive
            self._local.conn = conn
            return conn

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path, timeout=self._busy_timeout_s, isolation_level=None, check_same_thread=False
        )
        conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_s * 1000)}")
        conn.execute(f"PRAGMA synchronous = {self.synchronous}")
        return conn

    def _enable_wal(self, conn: sqlite3.Connection) -> None:
        # Switching to WAL needs an exclusive lock and does not always go through the busy
        # handler, so retry until the busy timeout runs out.
        deadline = time.monotonic() + self._busy_timeout_s
        while True:
            try:
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() == "wal":
                    return
                raise ConfigurationError(f"cannot put {self.path} in WAL mode (got {mode!r})")
            except sqlite3.OperationalError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.01)


Operation = Callable[[sqlite3.Connection], Any]
"""What a caller hands the writer: it runs inside the shared transaction on the given connection."""


LINGER_S = 0.01
"""How long after a deferred operation (:meth:`GroupCommit.defer`) arrives the writer's flusher
thread commits it with everything deferred meanwhile (seconds)."""


class _Slot:
    """One caller's operation waiting for a shared commit."""

    __slots__ = ("detached", "done", "durable", "error", "lead", "op", "result")

    def __init__(self, op: Operation, durable: bool) -> None:
        self.op = op
        self.durable = durable
        self.detached = False
        """Its caller did not wait: a failure is logged, not raised."""
        self.done: _thread.LockType | None = None
        """Taken while its caller waits, released once its group committed or it was handed the lead
        (a bare lock: an Event's wait and set are Python code, run by every waiting caller)."""
        self.lead = False
        self.result: Any = None
        self.error: BaseException | None = None


_WRITERS: weakref.WeakValueDictionary[tuple[int, str], GroupCommit] = weakref.WeakValueDictionary()
"""The writer of each file in this process; one its stores dropped without closing goes too."""
_WRITERS_LOCK = threading.Lock()
_log = logging.getLogger(__name__)


class GroupCommit:
    """Concurrent writers of one process share a transaction, and so its fsync.

    Each caller hands in its operation and returns only after the transaction holding it
    committed: nothing is acknowledged before it is written. The first caller to arrive leads: it
    runs every queued operation, each inside its own savepoint (one that raises is rolled back
    alone and its caller gets the exception), then commits once. Callers arriving meanwhile queue
    up; when the leader is done the first of them that waits leads the next group. A lone caller
    runs its operation at once, as a plain transaction would.

    A ``durable`` operation returns once its transaction is on disk (the connections' own
    ``synchronous`` level, FULL for the stores); the others once it is in the WAL file
    (``synchronous=NORMAL``: it survives the process, not a power loss before the next fsync). A
    group holding any durable operation commits durably, the others' writes with it.

    An operation handed to :meth:`defer` is not waited for: the writer's flusher thread commits
    everything deferred :data:`LINGER_S` after the first of it arrived, in one transaction (the
    operations of many calls at once). A waiting caller's group does not carry deferred operations,
    so an intent's fsync'd transaction stays as small as the intent. A caller that writes after
    every call (the trace of a call, written after its outcome) so pays no transaction of its
    own. :meth:`settle` commits what is deferred (the trace store's reads do so first), and so do
    :meth:`close` and the interpreter's exit; a process killed within that moment loses its
    deferred operations.
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
        self._level: tuple[sqlite3.Connection, str] | None = None
        """The writing connection and the ``synchronous`` level last set on it."""
        self._detached = 0
        """Operations queued whose callers did not wait, not committed yet."""
        self._armed = False
        """The flusher was told about deferred operations and has not committed them yet."""
        self._flusher: _Flusher | None = None

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

    def run(self, op: Operation, *, durable: bool = True) -> Any:
        """``op(conn)`` inside a committed transaction; its result, or its exception raised here."""
        slot = _Slot(op, durable)
        with self._lock:
            if self._pid != os.getpid():  # a forked child: the parent's queue is not ours
                self._forked()
            self._queue.append(slot)
            slot.lead = not self._busy
            self._busy = True
            if not slot.lead:
                slot.done = done = _thread.allocate_lock()
                done.acquire()  # taken now: the acquire below returns once the leader releases it
        if not slot.lead:
            done.acquire()
        if slot.lead:  # arrived first, or handed the lead when the group before it committed
            slot.done = None  # released already: its own group's end must not release it again
            self._lead(flush=op is _nothing)
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
            if self._pid != os.getpid():
                self._forked()
            self._queue.append(slot)
            self._detached += 1
            if self._busy or self._armed:
                return  # the leader of the group being committed or the flusher sees it
            self._armed = True
            flusher = self._flusher
            if flusher is None:
                flusher = self._flusher = _Flusher(self)
        flusher.poke()

    def settle(self) -> None:
        """Return once every operation handed to :meth:`defer` before is committed."""
        with self._lock:
            self._armed = False
            if not self._detached:
                return
        self.run(_nothing, durable=False)

    def close(self) -> None:
        """Let go of a writer from :meth:`open`; the last to let go closes its connections."""
        self.settle()
        with _WRITERS_LOCK:
            self._users -= 1
            if self._users > 0 or self._shared is None:
                return
            if _WRITERS.get(self._shared) is self:
                del _WRITERS[self._shared]
        flusher, self._flusher = self._flusher, None
        if flusher is not None:
            flusher.stop()
        self._db.close()

    def _forked(self) -> None:
        """In a forked child: the parent's queue and flusher thread are not this process's."""
        self._queue, self._busy, self._pid = [], False, os.getpid()
        self._detached, self._armed, self._flusher = 0, False, None

    def _lead(self, flush: bool = False) -> None:
        with self._lock:
            queue = self._queue
            if flush or (len(queue) == 1 and not queue[0].detached):  # everything, or a lone caller
                group, self._queue = queue, []
            else:
                group = [slot for slot in queue if not slot.detached]
                self._queue = [slot for slot in queue if slot.detached]
        try:
            self._commit(group)
        except BaseException as exc:  # the commit failed: nothing of the group is written
            for slot in group:
                slot.error = exc
        with self._lock:
            queue = self._queue
            heir = next((slot for slot in queue if slot.done is not None), None) if queue else None
            if heir is not None:
                heir.lead = True
                _wake(heir)
            self._busy = heir is not None
            if self._detached:
                self._detached -= sum([slot.detached for slot in group])
            # Only deferred operations queued behind the group: the flusher commits them
            # unless another caller's write takes them first; the leader's caller goes on.
            poke = heir is None and bool(queue) and not self._armed
            if poke:
                self._armed = True
                if self._flusher is None:
                    self._flusher = _Flusher(self)
            flusher = self._flusher
        if poke and flusher is not None:
            flusher.poke()
        for slot in group:
            slot.lead = False
            if slot.done is not None:
                slot.done.release()
            elif slot.detached and slot.error is not None:
                _log.error("a queued write to %s failed", self._db.path, exc_info=slot.error)

    def _commit(self, group: list[_Slot]) -> None:
        # A settle's own operation writes nothing: it needs neither a savepoint nor a transaction.
        ops = group if len(group) == 1 else [slot for slot in group if slot.op is not _nothing]
        if not ops or ops[0].op is _nothing:
            return
        durable = ops[0].durable if len(ops) == 1 else any([slot.durable for slot in ops])
        level = self._db.synchronous if durable else "NORMAL"
        conn = self._db.writer()  # only the leader of a group uses it
        if self._level != (conn, level):  # kept until it changes
            conn.execute(f"PRAGMA synchronous = {level}")
            self._level = (conn, level)
        conn.execute("BEGIN IMMEDIATE")  # as SqliteConnections.write, without its context manager
        try:
            if len(ops) > 1:
                _each_in_a_savepoint(conn, ops)
            elif ops is group:  # alone: no savepoint needed, an error rolls the transaction back
                ops[0].result = ops[0].op(conn)
            elif not _alone_beside_settles(conn, ops[0]):
                return  # it failed and was rolled back: the settles waiting with it wrote nothing
        except BaseException:
            conn.rollback()
            raise
        conn.commit()


def _alone_beside_settles(conn: sqlite3.Connection, slot: _Slot) -> bool:
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


def _each_in_a_savepoint(conn: sqlite3.Connection, group: list[_Slot]) -> None:
    for slot in group:
        conn.execute("SAVEPOINT op")
        try:
            slot.result = slot.op(conn)
        except Exception as exc:
            conn.execute("ROLLBACK TO op")
            slot.error = exc
        conn.execute("RELEASE op")


class _Flusher:
    """A writer's thread committing deferred operations nobody else's transaction took.

    It holds its writer weakly: a writer its stores dropped without closing goes, and the thread
    with it.
    """

    def __init__(self, writer: GroupCommit) -> None:
        self._poked = threading.Event()
        self._stopped = False
        ref = weakref.ref(writer)
        self._thread = threading.Thread(
            target=self._loop, args=(ref,), name=f"actionspace-flush-{writer._db.path.name}", daemon=True
        )
        self._thread.start()

    def poke(self) -> None:
        self._poked.set()

    def stop(self) -> None:
        self._stopped = True
        self._poked.set()

    def _loop(self, ref: weakref.ReferenceType[GroupCommit]) -> None:
        poked = self._poked
        while not self._stopped:
            if not poked.wait(timeout=5.0):
                if ref() is None:
                    return
                continue
            time.sleep(LINGER_S)  # what more is deferred meanwhile goes in the same transaction
            poked.clear()
            writer = ref()
            if writer is None or self._stopped:
                return
            try:
                writer.settle()
            except Exception:  # a closed store, a full disk: reported, the thread stays
                _log.exception("committing deferred writes to %s failed", writer._db.path)
            del writer


def _settle_all() -> None:
    """At the interpreter's exit: commit every writer's deferred operations."""
    with _WRITERS_LOCK:
        writers = list(_WRITERS.values())
    for writer in writers:
        if writer._pid == os.getpid():
            with contextlib.suppress(Exception):
                writer.settle()


atexit.register(_settle_all)


def _wake(slot: _Slot) -> None:
    if slot.done is not None:
        slot.done.release()


def _nothing(conn: sqlite3.Connection) -> None:
    return None
