"""A PostgreSQL session lost under a store's statement: a statement that waits at most a bound for
the server's answer, and how a transaction whose ``COMMIT`` answer was lost ended.

A network cut with no goodbye from the server (a proxy or a firewall that stops forwarding, a host
gone silent) shows only as a statement whose answer never comes: TCP acknowledges what a middlebox
took, so keepalives find nothing wrong, and psycopg would wait for ever. Each pooled connection
therefore waits at most ``read_timeout_s`` for one statement's answer; past it the connection is
closed (``timed_out``; the pool discards it) and the statement raises ``OperationalError``. A read
is not asked again (the network that swallowed it is likely still cut); a write that may have
landed is settled (an intent or a transition: ``_postgres_moves``; a transaction: below). Schema
changes (an index built over a large table) wait without a bound (:func:`unbounded`).

A transaction whose session was lost during its ``COMMIT`` may or may not have landed. Its id
(``txid_current()``, read in the round trip of its ``BEGIN``) is asked on a new connection with
``txid_status``: committed or aborted are final; in progress means the old session still lives
(the server has not noticed the cut), so it is ended (``pg_terminate_backend``, only while it
still holds that transaction) and asked again: ended, it can no longer commit later.

The question is asked on fresh connections, each bounded, again and again until ``settle_s`` has
passed: a read timeout during the ``COMMIT`` is most likely a network still cut, and a pooled
connection on the same path would wait out the same bound. What cannot be learnt within it is
:class:`CommitUnknown`, the ``unknown_commit`` of the error taxonomy (a ``ToolError`` of that
category, not a driver error saying "ask again"): written again, the transaction might land twice.

``statement_bound`` gives a long statement (a purge) its own bound: the server cancels it past
``statement_timeout`` (``QueryCanceled``, the session kept), and the socket waits a margin longer.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final

import psycopg
from psycopg import errors
from psycopg.rows import dict_row

from actionspace.errors import ToolError

__all__ = [
    "SETTLE_S",
    "BoundedConnection",
    "CommitUnknown",
    "begin",
    "settled",
    "statement_bound",
    "unbounded",
]

_BEGIN: Final = "BEGIN; SELECT txid_current() AS xid"
_STATUS: Final = "SELECT txid_status(%s) AS status"
_END_HOLDER: Final = (
    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = %s AND backend_xid::text = %s"
)
_SETTLE_S: Final = 10.0
"""How long, at most, a transaction's old session is waited for once it was asked to end."""
SETTLE_S: Final = 30.0
"""How long, by default, the end of a transaction whose ``COMMIT`` answer was lost is looked for on
fresh connections before it is :class:`CommitUnknown` (seconds)."""
_PAUSE_S: Final = 0.2
"""Pause between two fresh connections that could not ask."""
_TRY_CONNECT_S: Final = 2
"""How long one fresh connection may take to open before the next is tried (whole seconds; libpq's
shortest ``connect_timeout``)."""
_ANSWER_MARGIN_S: Final = 10.0
"""How much longer than its ``statement_timeout`` a bounded statement's socket waits for the server's
answer (the cancellation itself) before the network is taken as cut."""


class CommitUnknown(ToolError):
    """A transaction whose session was lost during its ``COMMIT`` and whose end could not be
    learnt within the bound: it may or may not have landed (``unknown_commit``; never sent again
    blindly). ``xid``: its transaction id, to ask ``txid_status`` later."""

    def __init__(self, xid: int, message: str) -> None:
        super().__init__("unknown_commit", message, details={"xid": xid})
        self.xid = xid


class BoundedConnection(psycopg.Connection[dict[str, Any]]):
    """A connection whose every statement waits at most ``read_timeout_s`` for the server's answer
    (None: no bound); past it the connection is closed and ``OperationalError`` raised."""

    read_timeout_s: float | None = None
    timed_out: bool = False
    """Closed past its read timeout (the pool discards a closed connection: never handed out again)."""

    def wait(self, gen: Any, interval: float = 0.1, timeout: float | None = None) -> Any:
        bound = self.read_timeout_s if timeout is None else timeout
        try:
            return super().wait(gen, interval, bound)
        except errors._WaitTimeout as exc:
            if timeout is not None:
                raise
            self.timed_out = True
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


@contextmanager
def statement_bound(conn: psycopg.Connection[Any], timeout_s: float | None) -> Iterator[None]:
    """Inside a transaction of ``conn``: its statements are cancelled by the server past
    ``timeout_s`` (``statement_timeout``; None: never) and its socket waits :data:`_ANSWER_MARGIN_S`
    longer for the answer (None: without a bound)."""
    millis = "0" if timeout_s is None else str(max(1, math.ceil(timeout_s * 1000)))
    conn.execute("SELECT set_config('statement_timeout', %s, true)", (millis,))
    if not isinstance(conn, BoundedConnection):
        yield
        return
    bound = conn.read_timeout_s
    conn.read_timeout_s = None if timeout_s is None else timeout_s + _ANSWER_MARGIN_S
    try:
        yield
    finally:
        conn.read_timeout_s = bound


def settled(
    url: str, xid: int, pid: int, *, within: float = SETTLE_S, read_timeout_s: float | None = None
) -> bool | None:
    """Whether the transaction ``xid`` of the session ``pid`` (lost) committed: True, or False when
    it ended without; None when the server no longer knows it, its session would not end, or no
    fresh connection could ask within ``within`` seconds (each tried for at most what is left, its
    statements for at most ``read_timeout_s`` too)."""
    deadline = time.monotonic() + within
    asked_end: list[float] = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        try:
            with BoundedConnection.connect(
                url, autocommit=True, row_factory=dict_row, connect_timeout=_TRY_CONNECT_S
            ) as conn:
                conn.read_timeout_s = max(0.05, left if read_timeout_s is None else min(left, read_timeout_s))
                return _asked(conn, xid, pid, asked_end)
        except psycopg.OperationalError:
            time.sleep(min(_PAUSE_S, max(0.0, deadline - time.monotonic())))


def _asked(conn: BoundedConnection, xid: int, pid: int, asked_end: list[float]) -> bool | None:
    """``settled``'s question on one connection; ``asked_end``: when the old session was asked to end."""
    while True:
        row = conn.execute(_STATUS, (xid,)).fetchone()
        status = None if row is None else row["status"]
        if status != "in progress":
            return True if status == "committed" else False if status == "aborted" else None
        if not asked_end:
            asked_end.append(time.monotonic())
            conn.execute(_END_HOLDER, (pid, str(xid % 2**32)))
        elif time.monotonic() > asked_end[0] + _SETTLE_S:
            return None
        time.sleep(0.01)
