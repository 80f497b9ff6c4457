"""A PostgreSQL session lost under a store's statement: a statement that waits at most a bound for
the server's answer, and how a transaction whose ``COMMIT`` answer was lost ended.

A network cut with no goodbye from the server (a proxy or a firewall that stops forwarding, a host
gone silent) shows only as a statement whose answer never comes: TCP acknowledges what a middlebox
took, so keepalives find nothing wrong, and psycopg would wait for ever. Each pooled connection
therefore waits at most ``read_timeout_s`` for one statement's answer; past it the connection is
closed and the statement raises ``OperationalError`` (not asked again: the network that swallowed
it is likely still cut). Schema changes (an index built over a large table) wait without a bound
(:func:`unbounded`).

A transaction whose session was lost during its ``COMMIT`` may or may not have landed. Its id
(``txid_current()``, read in the round trip of its ``BEGIN``) is asked on a new connection with
``txid_status``: committed or aborted are final; in progress means the old session still lives
(the server has not noticed the cut), so it is ended (``pg_terminate_backend``, only while it
still holds that transaction) and asked again: ended, it can no longer commit later.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

import psycopg
from psycopg import errors

if TYPE_CHECKING:
    from actionspace.ledger.postgres_pool import PostgresConnections

__all__ = ["BoundedConnection", "begin", "settled", "unbounded"]

_BEGIN: Final = "BEGIN; SELECT txid_current() AS xid"
_STATUS: Final = "SELECT txid_status(%s) AS status"
_END_HOLDER: Final = (
    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = %s AND backend_xid::text = %s"
)
_SETTLE_S: Final = 10.0
"""How long, at most, a transaction's old session is waited for once it was asked to end."""


class BoundedConnection(psycopg.Connection[dict[str, Any]]):
    """A connection whose every statement waits at most ``read_timeout_s`` for the server's answer
    (None: no bound); past it the connection is closed and ``OperationalError`` raised."""

    read_timeout_s: float | None = None

    def wait(self, gen: Any, interval: float = 0.1, timeout: float | None = None) -> Any:
        bound = self.read_timeout_s if timeout is None else timeout
        try:
            return super().wait(gen, interval, bound)
        except errors._WaitTimeout as exc:
            if timeout is not None:
                raise
            self.close()  # mid-answer: no statement can follow on it
            raise psycopg.OperationalError(
                f"no answer from the PostgreSQL server within {bound:g} s; its connection was closed"
            ) from exc


@contextmanager
def unbounded(conn: psycopg.Connection[Any]) -> Iterator[None]:
    """``conn``'s statements wait for their answer without a bound while inside."""
    if not isinstance(conn, BoundedConnection):
        yield
        return
    bound, conn.read_timeout_s = conn.read_timeout_s, None
    try:
        yield
    finally:
        conn.read_timeout_s = bound


def begin(conn: psycopg.Connection[Any]) -> tuple[int, int]:
    """Begin a transaction on ``conn`` (in autocommit mode); its id and its session's process id,
    in one round trip."""
    cur = conn.execute(_BEGIN)
    cur.nextset()
    row = cur.fetchone()
    assert row is not None
    return int(row["xid"]), conn.info.backend_pid


def settled(db: PostgresConnections, xid: int, pid: int) -> bool | None:
    """Whether the transaction ``xid`` of the session ``pid`` (lost) committed: True, or False when
    it ended without; None when the server no longer knows it or its session would not end."""
    deadline: float | None = None
    with db.connection() as conn:
        while True:
            row = conn.execute(_STATUS, (xid,)).fetchone()
            status = None if row is None else row["status"]
            if status != "in progress":
                return True if status == "committed" else False if status == "aborted" else None
            if deadline is None:
                deadline = time.monotonic() + _SETTLE_S
                conn.execute(_END_HOLDER, (pid, str(xid % 2**32)))
            elif time.monotonic() > deadline:
                return None
            time.sleep(0.01)
