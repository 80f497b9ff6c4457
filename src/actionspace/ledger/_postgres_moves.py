"""A ledger intent or transition of a PostgreSQL store, asked again when the server ended its
session under it.

A transition is one compare-and-set statement in autocommit. When the session ends under it (a
server restart, a failover, ``pg_terminate_backend``), the statement either never committed or
committed with its answer lost. Asked again on a new connection, the guard answers both: it moves
the entry (the first never landed), or finds it moved, and the entry stored is read back: the one
just written (state, sends, update time, remote id) is the first statement's own, anything else
another writer's. Without this, an outcome the process knew was lost with the connection, and the
next process answered ``unknown_commit`` for a send whose result had been shown. A statement whose
answer did not come within the read timeout (its connection closed) is asked again the same way:
in autocommit it may have landed.

An intent (an insert unless its node or key is stored) asked again finds, when the first landed,
a row of its key: the caller's own when it carries the caller's nonce (``intent_nonce``, random,
drawn for each intent and written with it), so the caller sends it; else another writer's, begun
by it. Without this, the call answered ``transient`` with nothing sent, and its entry,
``dispatched`` with no sender, made every later proposal of it ``unknown_commit``. The row's
content cannot tell the two apart: two processes beginning one node at the same instant write
equal rows, and each would take the row as its own and send.

The column is added to a table made before it (:func:`add_intent_nonce`, nullable: no row is
rewritten); a release that does not know it writes no nonce (NULL), so its rows are never taken
as another process's own, and it reads and writes the table as before.
"""

from __future__ import annotations

import secrets
from typing import Any, Final, LiteralString

import psycopg

from actionspace.ledger._postgres_tenants import retried
from actionspace.ledger.entries import Begun, LedgerEntry
from actionspace.ledger.postgres_pool import PostgresConnections

__all__ = ["add_intent_nonce", "begun", "moved"]

_MAX_RACE_RETRIES: Final = 8
"""How often an intent is inserted again when the row it collided with vanished before being read."""
_INSERT: Final = (
    "INSERT INTO ledger_entries (key, run_id, node_id, tool, args_digest, arguments, state, attempts,"
    " created_at, updated_at, remote_id, observation, error, resolution, intent_nonce) VALUES"
    " (%(key)s, %(run_id)s, %(node_id)s, %(tool)s, %(args_digest)s, %(arguments)s, %(state)s,"
    " %(attempts)s, %(created_at)s, %(updated_at)s, %(remote_id)s, %(observation)s, %(error)s,"
    " %(resolution)s, %(intent_nonce)s)"
    " ON CONFLICT DO NOTHING"
)
_FOUND: Final = (
    "SELECT key, run_id, node_id, tool, args_digest, arguments, state, attempts, created_at, updated_at,"
    " remote_id, observation, error, resolution, intent_nonce FROM ledger_entries"
    " WHERE (run_id = %s AND node_id = %s) OR key = %s ORDER BY (run_id = %s AND node_id = %s) DESC LIMIT 1"
)

_HAS_NONCE: Final = (
    "SELECT count(*) AS n FROM pg_attribute WHERE attrelid = to_regclass('ledger_entries')"
    " AND attname = 'intent_nonce' AND NOT attisdropped"
)
_STORED: Final = (
    "SELECT run_id, node_id, tool, args_digest, state, attempts, updated_at, remote_id"
    " FROM ledger_entries WHERE key = %s"
)


def moved(
    db: PostgresConnections, sql: LiteralString, params: dict[str, Any], ours: tuple[Any, ...]
) -> dict[str, Any] | None:
    """The row ``sql`` (an ``UPDATE … RETURNING`` guarded by ``params``) returned, or None when
    its guard refused; ``ours``: (state, attempts, updated_at, remote_id) the statement writes."""
    used: list[psycopg.Connection[Any]] = []
    try:
        with db.connection() as conn:
            used.append(conn)
            row: dict[str, Any] | None = conn.execute(sql, params).fetchone()
            return row
    except psycopg.OperationalError:
        if not (used and _lost(used[0])):
            raise
    with db.connection() as conn:
        row = conn.execute(sql, params).fetchone()
        if row is not None:
            return row
        stored: dict[str, Any] | None = conn.execute(_STORED, (params["where_key"],)).fetchone()
    if stored is None:
        return None
    found = (stored["state"], stored["attempts"], stored["updated_at"], stored["remote_id"])
    return stored if found == ours else None


def _lost(conn: psycopg.Connection[Any]) -> bool:
    """Whether ``conn``'s session was lost under its statement: ended by the server, or closed past
    its read timeout (the statement, in autocommit, may have landed all the same)."""
    return conn.broken or bool(getattr(conn, "timed_out", False))


def add_intent_nonce(db: PostgresConnections) -> None:
    """Give ``ledger_entries`` its ``intent_nonce`` column when it lacks it (a table made by an
    earlier release): read first, so a table that has it takes no lock; nullable, so adding it
    rewrites no row."""
    with db.connection() as conn:
        row = conn.execute(_HAS_NONCE).fetchone()
    if row is None or not row["n"]:
        retried(db, _add_nonce)


def _add_nonce(conn: psycopg.Connection[Any]) -> None:
    conn.execute("ALTER TABLE ledger_entries ADD COLUMN IF NOT EXISTS intent_nonce text")


def begun(db: PostgresConnections, entry: LedgerEntry, params: dict[str, Any]) -> Begun:
    """``entry`` inserted (``params``: its columns) unless its node or key is stored; the stored entry."""
    params = {**params, "intent_nonce": secrets.token_hex(8)}
    used: list[psycopg.Connection[Any]] = []
    try:
        with db.connection() as conn:
            used.append(conn)
            return _begun(conn, entry, params, again=False)
    except psycopg.OperationalError:
        if not (used and _lost(used[0])):
            raise
    with db.connection() as conn:
        return _begun(conn, entry, params, again=True)


def _begun(conn: Any, entry: LedgerEntry, params: dict[str, Any], *, again: bool) -> Begun:
    for _ in range(_MAX_RACE_RETRIES):
        if conn.execute(_INSERT, params).rowcount == 1:
            return Begun(entry, True)
        # The insert waited for any concurrent writer of the row, which is now committed.
        row = conn.execute(
            _FOUND, (entry.run_id, entry.node_id, entry.key, entry.run_id, entry.node_id)
        ).fetchone()
        if row is not None:
            mine = again and row["key"] == entry.key and row["intent_nonce"] == params["intent_nonce"]
            return Begun(LedgerEntry.from_dict(row), mine)
    raise RuntimeError(f"ledger entry {entry.key} kept being removed while it was begun")
