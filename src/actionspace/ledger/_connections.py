"""The connections of one SQLite file in a process: one per reading thread, and the one writer.

Kept apart from :mod:`actionspace.ledger.sqlite_writer`, whose :class:`GroupCommit` decides who
uses the writing connection when; importable from there as before.

A thread's connection counts the statements running on it (:class:`Reader`): ``close()`` from
another thread closes the connections idle at that moment and leaves each busy one to its thread,
whose statement ends first and then closes it. A connection freed under a running statement
crashes the process; a statement that would start after the close raises
:class:`~actionspace.errors.StoreClosedError` instead, never touching the connection.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final, NoReturn, cast

from actionspace.errors import ConfigurationError, StoreClosedError

__all__ = ["Reader", "Rows", "SqliteConnections", "refuse_closed"]

PID = os.getpid()
"""This process's id, kept current by a fork hook: ``os.getpid`` is a system call, and the stores
asked it several times a call to notice a forked child."""


def _forked_child() -> None:
    global PID
    PID = os.getpid()


os.register_at_fork(after_in_child=_forked_child)

_execute = sqlite3.Connection.execute


class Reader(sqlite3.Connection):
    """One thread's connection to a store's file, whose statements are counted.

    :meth:`execute` runs the statement and reads every row it answers before it returns (the
    answer comes back as :class:`Rows`; a write's as its finished cursor), so no
    statement of it is left running once it returned; ``busy`` counts the statements (and
    :meth:`SqliteConnections.write` blocks) running now. Only its own thread changes ``busy``;
    ``shut`` is set once by :meth:`SqliteConnections.close`, after which no statement starts on it
    and whoever ends its last use closes it (``done``: closed, or being closed).
    """

    __slots__ = ("busy", "done", "owner", "pid", "shut", "thread")
    busy: int
    done: bool
    owner: SqliteConnections
    pid: int
    shut: bool
    thread: int

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        self.busy += 1
        try:
            if self.shut:
                raise _closed(self.owner.path)
            cursor = _execute(self, sql, parameters)
            rows = cursor.fetchall()
        finally:
            self.busy -= 1
            if self.shut:
                self.owner.release(self)
        # A write (rowcount counted): its finished cursor, rowcount and lastrowid kept; else the
        # rows, read as the cursor would give them (no row: the one shared empty answer, nothing
        # made). Never a reading cursor: asked for its rows after a close that came once this
        # returned, it would raise sqlite3's own error.
        if rows:
            return cast(sqlite3.Cursor, Rows(rows))
        return cursor if cursor.rowcount >= 0 else _NO_ROWS


class Rows(list[Any]):
    """The rows a statement of a :class:`Reader` answered, read as from its cursor (``fetchone``,
    ``fetchmany``, ``fetchall``, iterating); a list, so building one is a copy made in C."""

    __slots__ = ()
    rowcount = -1

    def fetchone(self) -> Any:
        return self.pop(0) if self else None

    def fetchmany(self, size: int = 1) -> list[Any]:
        rows = self[:size]
        del self[:size]
        return rows

    def fetchall(self) -> list[Any]:
        rows = self[:]
        self.clear()
        return rows

    def close(self) -> None:
        self.clear()


class _NoRows(Rows):
    """The answer of a statement that read no row, one object shared by every such answer: read
    as an empty cursor, never holding a row (what would add one refuses)."""

    __slots__ = ()

    def _refuse(self, *args: Any) -> Any:
        raise TypeError("the shared answer of no row holds no row")

    append = extend = insert = __setitem__ = __iadd__ = __imul__ = _refuse


_NO_ROWS: Final = cast(sqlite3.Cursor, _NoRows())


def _closed(path: Path) -> StoreClosedError:
    return StoreClosedError(f"the store on {path} is closed")


def refuse_closed(path: Path) -> NoReturn:
    """Raise the :class:`~actionspace.errors.StoreClosedError` of the closed store on ``path``."""
    raise _closed(path)


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
        self._conns: list[tuple[threading.Thread, Reader]] = []
        self._inherited: list[tuple[threading.Thread, sqlite3.Connection]] = []
        self._writer: sqlite3.Connection | None = None
        self._writer_pid = 0
        self._pid = os.getpid()
        self._closed = False
        self._using: dict[int, int] = {}
        self._left_writer: sqlite3.Connection | None = None
        """Threads inside :meth:`using`, and how deep."""

    @property
    def closed(self) -> bool:
        return self._closed

    def check_open(self) -> None:
        """Raise :class:`~actionspace.errors.StoreClosedError` (a ``ValueError``) once closed."""
        if self._closed:
            raise _closed(self.path)

    def conn(self) -> Reader:
        """This thread's connection in this process; raises ``StoreClosedError`` once closed."""
        conn: Reader | None = getattr(self._local, "conn", None)
        if conn is not None and self._pid == PID and not self._closed:
            return conn
        return self._open_for_this_thread()

    def writer(self) -> sqlite3.Connection:
        """The connection this process writes with, whichever thread writes (one at a time).

        A connection's page cache is dropped whenever another connection wrote to the file, so
        the writes of every thread go through this one, whose cache stays warm. The caller makes
        sure no two threads use it at once. Raises ``StoreClosedError`` once closed.
        """
        conn = self._writer
        if conn is not None and self._writer_pid == PID and not self._closed:
            return conn
        with self._lock:
            if self._closed:
                raise _closed(self.path)
            if self._writer is not None and self._writer_pid != os.getpid():
                # the parent's: a forked child must not touch it, not even to close it
                self._inherited.append((threading.current_thread(), self._writer))
            made: sqlite3.Connection = self._connect()
            self._writer, self._writer_pid = made, os.getpid()
            return made

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A ``BEGIN IMMEDIATE`` transaction: committed on exit, rolled back on an exception (one
        use of the connection, as a statement is: ``close()`` leaves it to this block)."""
        # Taking the write lock up front makes a busy file wait here, under busy_timeout, rather
        # than fail when a read lock would have to be upgraded mid-transaction.
        conn = self.conn()
        conn.busy += 1
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.rollback()
                raise
            conn.commit()
        finally:
            conn.busy -= 1
            if conn.shut:
                self.release(conn)

    def pages(self, sql: str, params: Any, size: int) -> Iterator[list[Any]]:
        """The rows of ``sql``, ``size`` at a time, read on this thread's connection as they are
        asked for (not all first, as ``execute`` does): one use of it from the first page to the
        last, so ``close()`` leaves it to this reader, whose next page raises ``StoreClosedError``.
        """
        conn = self.conn()
        conn.busy += 1
        try:
            if conn.shut:
                raise _closed(self.path)
            cursor = _execute(conn, sql, params)
            try:
                while rows := cursor.fetchmany(size):
                    yield rows
                    if conn.shut:
                        raise _closed(self.path)
            finally:
                cursor.close()
        finally:
            conn.busy -= 1
            if conn.shut:
                self.release(conn)

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
        """Close every connection opened in this process; later calls raise ``StoreClosedError``.

        Never waits for another thread. A connection running a statement right now (``busy``), or
        of a thread inside :meth:`using`, is not closed here: closing it under that statement
        frees what the statement uses and crashes the process. It is marked ``shut`` (no statement
        starts on it any more) and closed by its thread as its use ends (:meth:`release`).
        """
        with self._lock:
            self._closed = True
            conns, self._conns = self._conns, []
            mine = self._pid == os.getpid()
            writer, self._writer = self._writer, None
            busy = set(self._using)
            if busy and writer is not None:  # a late write may be leading a group on it
                self._left_writer, writer = writer, None
            idle: list[Reader] = []
            for thread, conn in conns:
                conn.shut = True  # before busy is read: a statement counted after this sees it
                if mine and not conn.busy and not conn.done and thread.ident not in busy:
                    conn.done = True
                    idle.append(conn)
        if writer is not None and self._writer_pid == os.getpid():
            writer.close()
        for conn in idle:
            conn.close()

    def release(self, conn: Reader) -> None:
        """Close ``conn``, of a closed store, unless a use of it still runs (the last use closes it)."""
        with self._lock:
            if conn.done or conn.busy or conn.thread in self._using or conn.pid != os.getpid():
                return
            conn.done = True
        conn.close()

    @contextmanager
    def using(self) -> Iterator[None]:
        """Run statements on this thread's connection from a thread :meth:`close` does not wait for
        (a tool's thread writing a late outcome): ``close()`` then leaves this thread's connection
        open until the block ends, which closes it. Raises ``StoreClosedError`` once closed."""
        me = threading.get_ident()
        with self._lock:
            if self._closed:
                raise _closed(self.path)
            self._using[me] = self._using.get(me, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                left = self._using[me] - 1
                if left:
                    self._using[me] = left
                else:
                    del self._using[me]
                closed = self._closed and not left
                writer = self._left_writer if closed and not self._using else None
                if writer is not None:
                    self._left_writer = None
            conn: Reader | None = getattr(self._local, "conn", None)
            if closed and conn is not None and self._pid == PID:  # left open by close() for this block
                self._local.conn = None
                self.release(conn)
            if writer is not None and self._writer_pid == PID:
                writer.close()

    def _open_for_this_thread(self) -> Reader:
        with self._lock:
            if self._closed:
                raise _closed(self.path)
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
            conn: Reader = self._connect(Reader)
            conn.owner, conn.thread, conn.pid = self, threading.get_ident(), os.getpid()
            conn.busy, conn.shut, conn.done = 0, False, False
            alive.append((threading.current_thread(), conn))
            self._conns = alive
            self._local.conn = conn
            return conn

    def _connect(self, factory: type[Any] = sqlite3.Connection) -> Any:
        conn = sqlite3.connect(
            self.path,
            timeout=self._busy_timeout_s,
            isolation_level=None,
            check_same_thread=False,
            factory=factory,
        )
        _execute(conn, f"PRAGMA busy_timeout = {int(self._busy_timeout_s * 1000)}")  # before it is counted
        _execute(conn, f"PRAGMA synchronous = {self.synchronous}")
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
