"""The PostgreSQL connection pool every actionspace store of a database shares the design of:
autocommit connections, transactions on demand, schema creation under an advisory lock, a pool of
its own in a forked process, and URLs without their password in messages."""

from __future__ import annotations

import math
import os
import select
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Final, LiteralString, TypeVar

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool, PoolTimeout

from actionspace.errors import ConfigurationError
from actionspace.ledger._postgres_lost import (
    SETTLE_S,
    BoundedConnection,
    CommitUnknown,
    begin,
    settled,
    unbounded,
)

__all__ = ["READ_TIMEOUT_S", "SETTLE_S", "PostgresConnections", "deadlock_retried", "redacted"]

_T = TypeVar("_T")

READ_TIMEOUT_S: Final = 60.0
"""How long a statement waits for the server's answer by default (seconds), however busy the server:
past it the network is taken as cut (see ``_postgres_lost``)."""
_DDL_LOCK: Final = 0x6163_7473_7063_6501
"""Advisory lock id taken (per database) around every actionspace DDL."""
_GOODBYE_READS: Final = 3
"""Reads of an idle connection's socket, at most, before a session that keeps talking is given up."""
_DDL_ATTEMPTS: Final = 5
"""Times a schema step is run when PostgreSQL ends it as a deadlock (:func:`deadlock_retried`)."""


class PostgresConnections:
    """A connection pool (``min_size`` to ``max_size`` connections) to the database ``url`` names.

    Connections run in autocommit mode; :meth:`transaction` groups statements. A process forked
    after construction opens a pool of its own on first use and never touches its parent's.
    ``connect_timeout_s`` (seconds, default 10) bounds how long the first connection may take;
    ``read_timeout_s`` (seconds, default :data:`READ_TIMEOUT_S`; None: no bound) how long a statement
    waits for the server's answer (a network cut with no goodbye): past it the connection is closed
    and ``OperationalError`` raised. Schema changes wait without a bound. ``settle_s`` (seconds,
    default :data:`SETTLE_S`): how long the end of a transaction whose ``COMMIT`` answer was lost
    is looked for (:meth:`transaction_again`): a positive, finite number.
    Raises :class:`~actionspace.errors.ConfigurationError` when the database cannot be reached, or
    for a ``settle_s`` that is not such a number (before any connection is made).
    """

    def __init__(
        self,
        url: str,
        *,
        name: str,
        min_size: int = 1,
        max_size: int = 8,
        connect_timeout_s: float = 10.0,
        read_timeout_s: float | None = READ_TIMEOUT_S,
        settle_s: float = SETTLE_S,
    ) -> None:
        self.settle_s = _settle_bound(settle_s)
        self.url = url
        self._read_timeout_s = read_timeout_s
        self._name = name
        self._sizes = (min_size, max_size)
        self._connect_timeout_s = connect_timeout_s
        self._lock = threading.Lock()
        self._closed = False
        self._pid = os.getpid()
        self._pool = self._open_pool()

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[dict[str, Any]]]:
        """A connection of the pool, returned to it on exit; never one whose session the server
        ended while it sat in the pool (a restart, ``pg_terminate_backend``, a failover): that one
        is closed (the pool opens another) and the next is taken."""
        pool = self._current()
        for _ in range(self._sizes[1]):
            with pool.connection() as conn:
                if not _ended(conn):
                    yield conn
                    return
                conn.close()
        with pool.connection() as conn:  # every one taken was ended: this one is new
            yield conn

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection[dict[str, Any]]]:
        """A connection inside a transaction: committed on exit, rolled back on an exception."""
        with self.connection() as conn, conn.transaction():
            yield conn

    def transaction_again(self, step: Callable[[psycopg.Connection[dict[str, Any]]], _T]) -> _T:
        """What ``step(conn)`` returns, run in a transaction as by :meth:`transaction`, and run once
        more in a new one, on another connection, when the server ended the session under it (a
        restart, ``pg_terminate_backend``). A connection closed past its read timeout is raised.

        A session lost during the ``COMMIT`` itself may or may not have landed: the transaction's
        id, read with its ``BEGIN`` (the same round trip), is asked on fresh connections, again
        and again for at most ``settle_s`` (``_postgres_lost.settled``). Committed: the answer is
        ``step``'s, written once; ended without a commit: run again; still open (the network was
        cut, the server's session lives on): that session is ended first, so it cannot commit
        later, and its transaction's end read then. Not learnt (the server no longer knows, or no
        connection could ask in time): :class:`~actionspace.ledger._postgres_lost.CommitUnknown`
        (``unknown_commit``), never a driver error inviting the write again. A read timeout before
        the ``COMMIT`` is raised as it is: nothing of the transaction can land.
        """
        for attempt in range(2):
            used: list[BoundedConnection] = []
            began: list[tuple[int, int]] = []
            result: list[_T] = []
            try:
                with self.connection() as conn:
                    used.append(conn)  # type: ignore[arg-type]
                    began.append(begin(conn))
                    try:
                        result.append(step(conn))
                    except BaseException:
                        if not conn.closed:
                            conn.rollback()
                        raise
                    conn.commit()
                return result[0]
            except psycopg.OperationalError as exc:
                lost = bool(used) and (used[0].broken or (used[0].timed_out and bool(result)))
                if not lost:
                    raise
                landed = self._settled(*began[0]) if began else False
                if landed and result:
                    return result[0]  # committed: its answer was lost, not its write
                if landed is None and result:
                    xid = began[0][0]
                    raise CommitUnknown(
                        xid,
                        f"the COMMIT of transaction {xid} got no answer and its end could not be"
                        f" learnt within {self.settle_s:g} s: it may or may not have landed",
                    ) from exc
                if landed is None or landed or attempt == 1:
                    raise
        raise AssertionError("unreachable")

    def _settled(self, xid: int, pid: int) -> bool | None:
        return settled(self.url, xid, pid, within=self.settle_s, read_timeout_s=self._read_timeout_s)

    def init_schema(
        self,
        statements: Sequence[LiteralString],
        *,
        meta_table: LiteralString,
        meta_key: str,
        version: int,
        what: str,
    ) -> None:
        """Run ``statements`` (which create ``meta_table``), then check ``meta_key``'s stored version.

        Raises :class:`~actionspace.errors.ConfigurationError` when the stored version is newer.

        The statements are idempotent (``IF NOT EXISTS``) and run under one advisory lock, but
        ``CREATE INDEX IF NOT EXISTS`` still takes its table's lock before it finds the index there:
        a process opening the store while another one's calls write the same tables can be chosen
        by PostgreSQL's deadlock detector. The whole transaction is then run again (nothing of it
        was kept), a few times, after a short pause.
        """
        row = deadlock_retried(lambda: self._run_schema(statements, meta_table, meta_key, version))
        found = int(row["value"]) if row is not None else version
        if found > version:
            raise ConfigurationError(
                f"{what} at {redacted(self.url)} has schema version {found}; this actionspace reads up"
                f" to {version}; upgrade actionspace"
            )

    def _run_schema(
        self, statements: Sequence[LiteralString], meta_table: LiteralString, meta_key: str, version: int
    ) -> dict[str, Any] | None:
        """One transaction of :meth:`init_schema`: the statements, then ``meta_key``'s stored row."""
        with self.transaction() as conn, unbounded(conn):
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_DDL_LOCK,))
            for statement in statements:
                conn.execute(statement)
            conn.execute(
                "INSERT INTO " + meta_table + " (key, value) VALUES (%s, %s) ON CONFLICT (key) DO NOTHING",
                (meta_key, str(version)),
            )
            return conn.execute("SELECT value FROM " + meta_table + " WHERE key = %s", (meta_key,)).fetchone()

    def close(self) -> None:
        """Close the pool of this process; later calls raise ``ValueError``."""
        with self._lock:
            self._closed = True
            pool, mine = self._pool, self._pid == os.getpid()
        if mine:
            pool.close()

    def _current(self) -> ConnectionPool[BoundedConnection]:
        with self._lock:
            if self._closed:
                raise ValueError(f"the {self._name} store for {redacted(self.url)} is closed")
            if self._pid != os.getpid():
                # The parent's pool threads do not exist here and its sockets are the parent's.
                self._pid = os.getpid()
                self._pool = self._open_pool()
            return self._pool

    def _configure(self, conn: BoundedConnection) -> None:
        conn.read_timeout_s = self._read_timeout_s

    def _open_pool(self) -> ConnectionPool[BoundedConnection]:
        # One direct connection first: the pool would retry a refused or misconfigured connection
        # in the background until its timeout; this reports the server's reason at once.
        try:
            psycopg.connect(self.url, connect_timeout=max(1, math.ceil(self._connect_timeout_s))).close()
        except psycopg.OperationalError as exc:
            raise ConfigurationError(f"cannot connect to PostgreSQL at {redacted(self.url)}: {exc}") from exc
        except psycopg.ProgrammingError as exc:  # a malformed URL: its text, password and all, left out
            said = str(exc).replace(self.url, "…").strip()
            raise ConfigurationError(f"cannot connect to PostgreSQL: malformed URL: {said}") from exc
        min_size, max_size = self._sizes
        connect_timeout = max(1, math.ceil(self._connect_timeout_s))
        pool = ConnectionPool(
            self.url,
            connection_class=BoundedConnection,
            kwargs={"autocommit": True, "row_factory": dict_row, "connect_timeout": connect_timeout},
            configure=self._configure,
            min_size=min_size,
            max_size=max_size,
            name=f"actionspace-{self._name}",
            open=True,
        )
        try:
            pool.wait(timeout=self._connect_timeout_s)
        except PoolTimeout as exc:
            pool.close()
            raise ConfigurationError(
                f"cannot connect to PostgreSQL at {redacted(self.url)} within {self._connect_timeout_s:g} s"
            ) from exc
        return pool


def _ended(conn: psycopg.Connection[Any]) -> bool:
    """Whether the server ended the session of ``conn``, an idle connection: it then said so
    (its goodbye, then the end of the stream) while nobody asked it anything. One ``poll`` of the
    socket; an idle connection has nothing to read otherwise (a notice read here leaves it in use).
    A session the network cut without a goodbye is not seen here: its first statement fails."""
    pgconn = conn.pgconn
    try:
        poller = select.poll()
        poller.register(pgconn.socket, select.POLLIN)
        for _ in range(_GOODBYE_READS):
            if not poller.poll(0):
                return False
            pgconn.consume_input()  # the goodbye, then the end of the stream: OperationalError
    except psycopg.OperationalError:
        return True
    return True  # still more to read after all that: not a session to run statements on


def deadlock_retried(step: Callable[[], _T], *, attempts: int = _DDL_ATTEMPTS) -> _T:
    """What ``step()`` returns, run again when PostgreSQL's deadlock detector ended it: at most
    ``attempts`` times in all, after a pause growing by 50 ms each time; the last deadlock is raised.

    For schema changes (a table's columns, triggers, indexes, ``CREATE INDEX CONCURRENTLY``): the
    detector ends one of the statements in a circle of waits another process's schema change or
    index build closed; run again, the step finds what the other one did. ``step`` must leave
    nothing behind when it fails (one transaction, or statements that are each idempotent).
    """
    for attempt in range(attempts - 1):
        try:
            return step()
        except psycopg.errors.DeadlockDetected:
            time.sleep(0.05 * (attempt + 1))
    return step()


def _settle_bound(settle_s: object) -> float:
    """``settle_s`` of :class:`PostgresConnections` as a float; raises ConfigurationError naming the
    option when it is not a positive, finite number of seconds (a bool, a text, zero or less, NaN,
    infinity: a bound the settling loop would never reach)."""
    if isinstance(settle_s, bool) or not isinstance(settle_s, int | float) or not 0 < settle_s < math.inf:
        raise ConfigurationError(
            f"settle_s must be a positive, finite number of seconds, got {settle_s!r}"[:200]
        )
    return float(settle_s)


def redacted(url: str) -> str:
    """``url`` without its password, for messages."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "<unparsable PostgreSQL URL>"
    if "password" in info:
        info["password"] = "***"
    return psycopg.conninfo.make_conninfo("", **info)
