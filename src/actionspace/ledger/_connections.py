"""The connections of one SQLite file in a process: one per reading thread, and the one writer.

Kept apart from :mod:`actionspace.ledger.sqlite_writer`, whose :class:`GroupCommit` decides who
uses the writing connection when; importable from there as before.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from actionspace.errors import ConfigurationError

__all__ = ["SqliteConnections"]

PID = os.getpid()
"""This process's id, kept current by a fork hook: ``os.getpid`` is a system call, and the stores
asked it several times a call to notice a forked child."""


def _forked_child() -> None:
    global PID
    PID = os.getpid()


os.register_at_fork(after_in_child=_forked_child)


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
        self._using: dict[int, int] = {}
        self._left_writer: sqlite3.Connection | None = None
        """Threads inside :meth:`using`, and how deep."""

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
        if conn is not None and self._pid == PID and not self._closed:
            return conn
        return self._open_for_this_thread()

    def writer(self) -> sqlite3.Connection:
        """The connection this process writes with, whichever thread writes (one at a time).

        A connection's page cache is dropped whenever another connection wrote to the file, so
        the writes of every thread go through this one, whose cache stays warm. The caller makes
        sure no two threads use it at once. Raises ``ValueError`` once closed.
        """
        conn = self._writer
        if conn is not None and self._writer_pid == PID and not self._closed:
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
        """Close every connection opened in this process; later calls raise ``ValueError``.

        The connection of a thread inside :meth:`using` may be running a statement right now:
        closing it under that statement frees what the statement uses and crashes the process. It
        is left to its thread, which closes it as it leaves :meth:`using`.
        """
        with self._lock:
            self._closed = True
            conns, self._conns = self._conns, []
            mine = self._pid == os.getpid()
            writer, self._writer = self._writer, None
            busy = set(self._using)
            if busy and writer is not None:  # a late write may be leading a group on it
                self._left_writer, writer = writer, None
        if writer is not None and self._writer_pid == os.getpid():
            writer.close()
        if mine:
            for thread, conn in conns:
                if thread.ident not in busy:
                    conn.close()

    @contextmanager
    def using(self) -> Iterator[None]:
        """Run statements on this thread's connection from a thread :meth:`close` does not wait for
        (a tool's thread writing a late outcome): ``close()`` then leaves this thread's connection
        open until the block ends, which closes it. Raises ``ValueError`` once closed."""
        me = threading.get_ident()
        with self._lock:
            if self._closed:
                raise ValueError(f"the store on {self.path} is closed")
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
            conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
            if closed and conn is not None and self._pid == PID:  # left open by close() for this block
                self._local.conn = None
                conn.close()
            if writer is not None and self._writer_pid == PID:
                writer.close()

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
