"""SQLite ledger store: the embedded default (DESIGN §6).

The ledger shares one file with the trace and the approval requests (its tables are prefixed
``ledger_``). The database runs in WAL mode. Every write of one process to one file goes through
that file's :class:`GroupCommit` (shared with the trace, run-state and budget stores of the
file), so concurrent writers share a transaction and its fsync instead of waiting for each
other's locks.

Durability, exactly: a ``begin`` and a transition into ``accepted`` or ``dispatched`` (or carrying
a person's resolution) return once their transaction is on disk (an ``fdatasync`` of the WAL file
after its commit, what ``synchronous=FULL`` does; see :class:`GroupCommit`): the intent recorded
before a dispatch survives the process being killed and the machine losing power. A transition into
an outcome (``committed``, ``failed``, ``unknown``, ``unknown_commit``) returns once its transaction
is in the WAL file (``synchronous=NORMAL``, no sync): it survives the process being killed; a
power loss before the next fsync of the file (any later durable write) can lose it, which leaves
the entry ``dispatched`` for ``recover()`` to settle by the status query (or report
``unknown_commit``), never to send again blindly. The WAL is one sequence, so a power loss loses
at most the latest outcomes, never an intent written after them.

Uniqueness of ``key`` and of ``(run_id, node_id)`` is a table constraint, and a transition is one
``UPDATE … WHERE state IN (…)``: the database, not a Python lock, decides which of several threads,
processes or hosts sharing the file wins.
"""

from __future__ import annotations

import builtins
import json
import os
import sqlite3
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Final

from actionspace._canonical import strict_dumps
from actionspace._unicode import json_for_utf8, text_for_utf8
from actionspace.ledger._sqlite_layout import INDEX, PENDING_WHERE, PURGED_WHERE, adopt, listed_where
from actionspace.ledger._sqlite_tenants import LEDGER_TENANT, add_listing_tenants
from actionspace.ledger.entries import (
    STATES,
    TERMINAL,
    Begun,
    Encoded,
    Identity,
    LedgerEntry,
    begun_new,
    with_identity,
)
from actionspace.ledger.sqlite_writer import GroupCommit, SqliteConnections

__all__ = ["SCHEMA_VERSION", "GroupCommit", "SqliteConnections", "SqliteLedgerStore", "from_json", "to_json"]

SCHEMA_VERSION: Final = 1
"""Version of the ledger tables; stored in ``ledger_meta`` and checked on open."""

_SCHEMA: Final = f"""
CREATE TABLE IF NOT EXISTS ledger_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS ledger_entries (
    key         TEXT    PRIMARY KEY,
    run_id      TEXT    NOT NULL,
    node_id     TEXT    NOT NULL,
    tool        TEXT    NOT NULL,
    args_digest TEXT    NOT NULL,
    arguments   TEXT    NOT NULL,
    state       TEXT    NOT NULL,
    attempts    INTEGER NOT NULL,
    created_at  REAL    NOT NULL,
    updated_at  REAL    NOT NULL,
    remote_id   TEXT,
    observation TEXT,
    error       TEXT,
    resolution  TEXT,
    UNIQUE (run_id, node_id)
);
{INDEX};
"""
"""The table and its one secondary index (``_sqlite_layout``: what it answers, and the move of a file
with the earlier two)."""

_COLUMNS: Final = (
    "key", "run_id", "node_id", "tool", "args_digest", "arguments", "state", "attempts", "created_at",
    "updated_at", "remote_id", "observation", "error", "resolution",
)  # fmt: skip
_JSON_COLUMNS: Final = frozenset({"arguments", "observation", "error", "resolution"})
_SELECT: Final = f"SELECT {', '.join(_COLUMNS)} FROM ledger_entries"
_INSERT: Final = (
    f"INSERT OR IGNORE INTO ledger_entries ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})"
)
"""The intent's insert: nothing when the key or the ``(run_id, node_id)`` is stored. ``OR IGNORE``
rather than ``ON CONFLICT DO NOTHING`` (the same for any row :func:`_row` makes, whose ``NOT NULL``
columns are always set): SQLite keeps a statement journal, a copy of every page a statement is about
to change, for a statement that runs a trigger (the file's tenant trigger, ``_sqlite_tenants``) and
may abort partway (the ``NOT NULL`` checks at their default ``ABORT``). Under ``IGNORE`` no check
aborts, so the intent copies no page. A row a check would refuse is not written, and ``_begin``
then finds no entry and raises."""
_INSERT_UNLESS_PENDING: Final = (
    f"INSERT OR IGNORE INTO ledger_entries ({', '.join(_COLUMNS)}) VALUES (?, CASE WHEN EXISTS"
    f" (SELECT 1 FROM ledger_entries {PENDING_WHERE} AND key <> ?) THEN NULL ELSE ? END,"
    f" {', '.join('?' * (len(_COLUMNS) - 2))})"
)
""":data:`_INSERT` unless an identical action of the run is unsettled under another key, one statement
(parameters: key, run, tool, digest, then the row): that check, a subquery, makes ``run_id`` NULL,
which ``OR IGNORE`` does not write. One ``VALUES`` row: an ``INSERT … SELECT`` reading the table it
inserts into is copied to a temporary table first."""
_ARGUMENTS: Final = _COLUMNS.index("arguments")
_IDENTITY: Final = 5
"""Leading columns (of :data:`_COLUMNS` and :func:`_row`) that name the action."""
_UPDATED: Final = _COLUMNS[_IDENTITY:]
"""What a transition writes; the indexed identity (key, run, node, tool, digest) is fixed at begin,
so a transition does not rewrite the indexes over it."""
_UPDATE: Final = f"UPDATE ledger_entries SET {', '.join(f'{c} = ?' for c in _UPDATED)} WHERE key = ?"


_SAME: Final = " AND run_id = ? AND node_id = ? AND tool = ? AND args_digest = ?"
"""A transition of an entry carrying the begun identity, the usual case: a changed row then says
all, and nothing is read back (a ``RETURNING`` clause costs SQLite a table of its own per run)."""
_RETURNING: Final = " RETURNING run_id, node_id, tool, args_digest"
"""What a transition reads back when its entry names another identity: the identity it keeps."""


_MOVED: Final = ("state", "attempts", "updated_at", "remote_id", "observation", "error", "resolution")
"""What a transition of an entry this store began changes: not its arguments nor ``created_at``."""
_UPDATE_MOVED: Final = (
    f"UPDATE ledger_entries SET {', '.join(f'{c} = ?' for c in _MOVED)}"
    " WHERE rowid = ? AND key = ? AND arguments = ? AND created_at = ?"
)
"""The transition of an entry this store began, handed the arguments object it was begun with and
its ``created_at``: the row sought by the rowid its insert got, and only the columns that change
written (the arguments are not encoded again). The key guards a row purged or renumbered since,
the arguments' text and ``created_at`` a row another transition wrote others to: the statement
then changes nothing and the whole row is written, so it stores what that statement would."""


def _update_sql(condition: str) -> tuple[str, str, str]:
    """The transition statements under ``condition``: (same identity, read back, moved columns of
    an entry begun here with the same identity)."""
    return (
        f"{_UPDATE}{condition}{_SAME}",
        f"{_UPDATE}{condition}{_RETURNING}",
        f"{_UPDATE_MOVED}{condition}{_SAME}",
    )


def _in_states(states: int) -> tuple[str, str, str]:
    """The transition statements for ``states`` expected states."""
    return _update_sql(f" AND state IN ({', '.join('?' * states)})")


_UPDATES: Final = {n: _in_states(n) for n in range(1, len(STATES) + 1)}
_EXPECTED: dict[tuple[str, ...], tuple[tuple[str, str, str], tuple[str, ...]]] = {}
"""Per tuple of expected states a transition was handed (the protocol's few constants), its
statements and its states without repeats: not worked out again every transition."""
_KEPT_EXPECTED: Final = 64
_UPDATE_AT: Final = _update_sql(" AND state = ? AND attempts = ?")
"""A transition that also names how many sends the entry must still count."""
_KEPT_BEGUN: Final = 4096
"""Most entries begun here whose rowid and arguments are kept for their transitions."""
_BEFORE_SENDING: Final = frozenset({"accepted", "dispatched"})
"""States a transition must have on disk before returning: a send may follow at once."""
_PENDING: Final = f"{_SELECT} {PENDING_WHERE}"
"""The unsettled entries of a run's action (run, tool and arguments digest, in that order);
:func:`_oldest` picks one. Nearly always none: ordering them in SQL built a sorter on every
intent for nothing."""
_CREATED: Final = _COLUMNS.index("created_at")
_NODES_PER_READ: Final = 500
"""Most node ids one ``entries_of`` query names (SQLite bounds the parameters of a statement)."""


def to_json(value: Mapping[str, Any] | Sequence[Any] | None) -> str | None:
    """Stable JSON text for a mapping or sequence column; None stays SQL NULL."""
    if value is None:
        return None
    if type(value) is Encoded:  # its text made beside it: what the lines below would write
        return value.text
    if type(value) is not dict and type(value) is not list:
        value = dict(value) if isinstance(value, Mapping) else list(value)
    text = strict_dumps(value)
    return text if text.isascii() else json_for_utf8(text)  # an unpaired surrogate as its escape


def from_json(text: str | None) -> Any:
    """The value of a JSON column; SQL NULL is None."""
    return None if text is None else json.loads(text)


class SqliteLedgerStore:
    """A :class:`~actionspace.ledger.entries.LedgerStore` in one SQLite file.

    ``path`` is created (with its tables) if missing; its parent directory must exist. It may be the
    same file as the trace and approval stores. ``busy_timeout_s`` (seconds, default 10) bounds how
    long a call waits for another writer before ``sqlite3.OperationalError`` is raised.
    Raises :class:`~actionspace.errors.ConfigurationError` for ``":memory:"`` and for a file written
    by a newer schema version.
    """

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout_s: float = 10.0) -> None:
        self._db = SqliteConnections(path, synchronous="FULL", busy_timeout_s=busy_timeout_s)
        self.path = self._db.path
        try:
            self._db.init_schema(_SCHEMA, "ledger_meta", "schema_version", SCHEMA_VERSION)
            adopt(self._db)  # a file of the earlier layout loses its two indexes
        except BaseException:
            self._db.close()
            raise
        self._group = GroupCommit.open(self.path, busy_timeout_s=busy_timeout_s)
        self._begun: dict[str, tuple[int, Mapping[str, Any], float, str | None]] = {}
        """Of an entry this store inserted, by key: its rowid, the arguments object, the
        ``created_at`` it was begun with and the arguments' text written (what :meth:`_update`
        needs to write only what moved)."""
        self._cursor: tuple[sqlite3.Connection, sqlite3.Cursor] | None = None
        """A cursor of the writing connection, for the intent's and the outcome's statements
        (``Connection.execute`` makes a cursor a statement); only the writer's leader uses it."""

    def begin(self, entry: LedgerEntry) -> Begun:
        """Insert ``entry`` unless its ``(run_id, node_id)`` or its key is stored; return the stored one.

        Returns once the transaction holding the insert is on disk (concurrent callers share it).
        """
        return self._begin(entry, unless_pending=False)

    def begin_unless_pending(self, entry: LedgerEntry) -> Begun:
        """:meth:`begin`, unless an identical action of the run under another key is unsettled.

        The check and the insert are one transaction on the writing connection (no read of its
        own before it). Returns a :class:`Begun` naming that entry as ``pending`` then.
        """
        return self._begin(entry, unless_pending=True)

    def _begin(self, entry: LedgerEntry, *, unless_pending: bool) -> Begun:
        self._db.check_open()
        written = _row(entry)
        sql, params = _INSERT, written
        if unless_pending:
            sql, params = _INSERT_UNLESS_PENDING, (written[0], written[1], written[3], written[4], *written)

        def insert_at_once(conn: sqlite3.Connection) -> int | None:
            kept = self._cursor
            cursor = kept[1] if kept is not None and kept[0] is conn else self._cursor_of(conn)
            cursor.execute(sql, params)
            return cursor.lastrowid if cursor.rowcount == 1 else None

        # The usual intent: one statement in autocommit (no BEGIN, pending read or COMMIT of its own);
        # one written by nobody (stored, pending, refused): the reads and the insert in a transaction.
        rowid = self._group.run(insert_at_once, rerunnable=True, autocommit=True)  # it only writes conn
        stored: LedgerEntry | None = entry
        pending = False
        if rowid is None:
            find = self._insert_or_find(entry, written, unless_pending)
            rowid, stored, pending = self._group.run(find, rerunnable=True)
        if stored is None:
            # a row whose NOT NULL column was None is ignored by _INSERT, not written
            raise RuntimeError(f"ledger entry {entry.key} was neither written nor found in its transaction")
        if rowid is None:
            return Begun(stored, False, stored if pending else None)
        begun = self._begun
        if len(begun) >= _KEPT_BEGUN:
            begun.clear()
        begun[entry.key] = (rowid, entry.arguments, entry.created_at, written[_ARGUMENTS])
        return begun_new(entry)  # Begun(entry, True, None)

    def _insert_or_find(
        self, entry: LedgerEntry, written: tuple[Any, ...], unless_pending: bool
    ) -> Callable[[sqlite3.Connection], tuple[int | None, LedgerEntry | None, bool]]:
        """The intent's operation when its one statement wrote nothing: (the rowid written, the entry
        written or found, whether it is the pending one)."""

        def insert(conn: sqlite3.Connection) -> tuple[int | None, LedgerEntry | None, bool]:
            if unless_pending:
                rows = conn.execute(_PENDING, (entry.run_id, entry.tool, entry.args_digest)).fetchall()
                row = _oldest(rows) if rows else None
                if row is not None and row[0] != entry.key:
                    return None, _entry(row), True
            cursor = conn.execute(_INSERT, written)
            if cursor.rowcount == 1:  # stored when the statement ran, gone since (purged): written now
                return cursor.lastrowid, entry, False
            stored = self._select(conn, "WHERE run_id = ? AND node_id = ?", (entry.run_id, entry.node_id))
            if stored is None:
                stored = self._select(conn, "WHERE key = ?", (entry.key,))
            return None, stored, False

        return insert

    def transition(self, key: str, expected: Sequence[str], entry: LedgerEntry) -> LedgerEntry | None:
        """Store ``entry`` only if the state of ``key`` is in ``expected``; None when it was not.

        The entry's identity (key, run, node, tool, arguments digest) stays the one begun.

        Returns once on disk when ``entry`` may be sent next (``accepted``, ``dispatched``) or holds
        a person's resolution; an outcome once in the WAL (see the module docstring).
        Raises ``ValueError`` when ``entry.key`` is not ``key``.
        """
        self._db.check_open()
        if entry.key != key:
            raise ValueError(f"transition of {key} was given the entry of {entry.key}")
        hit = _EXPECTED.get(expected) if type(expected) is tuple else None
        if hit is None:
            states = tuple(dict.fromkeys(expected))
            if not states:
                return None
            hit = (_UPDATES.get(len(states)) or _in_states(len(states)), states)
            if type(expected) is tuple and len(_EXPECTED) < _KEPT_EXPECTED:
                _EXPECTED[expected] = hit
        return self._update(entry, hit[0], hit[1])

    def transition_at(self, key: str, state: str, attempts: int, entry: LedgerEntry) -> LedgerEntry | None:
        """:meth:`transition` from ``state`` only while the entry still counts ``attempts`` sends."""
        self._db.check_open()
        if entry.key != key:
            raise ValueError(f"transition of {key} was given the entry of {entry.key}")
        return self._update(entry, _UPDATE_AT, (state, attempts))

    def _update(
        self, entry: LedgerEntry, sqls: tuple[str, str, str], condition: tuple[Any, ...]
    ) -> LedgerEntry | None:
        """Run one transition; the entry as stored (its begun identity), or None.

        ``sqls`` is (the statement for an entry with the stored identity, the one reading the
        identity back, the one of an entry begun here: see :data:`_UPDATE_MOVED`), ``condition``
        the parameters of the expected state. An entry this store began, handed its arguments
        object and ``created_at`` as begun, is moved by the third, which writes the same row; the
        first runs when it changed nothing (or for any other entry), the second, in the same
        transaction, only when the first changed nothing.
        """
        same, read_back, moved = sqls
        key = entry.key
        identity_of_entry: Identity = (entry.run_id, entry.node_id, entry.tool, entry.args_digest)
        begun = self._begun.get(key)
        obs, error, resolution = entry.observation, entry.error, entry.resolution
        changed = (
            entry.state,
            entry.attempts,
            entry.updated_at,
            entry.remote_id,
            # mostly None (an outcome has one of them): no call for SQL NULL, none for an Encoded text
            None if obs is None else obs.text if type(obs) is Encoded else to_json(obs),
            None if error is None else to_json(error),
            None if resolution is None else to_json(resolution),
        )
        guard: tuple[Any, ...] | None = None
        if begun is not None and begun[1] is entry.arguments and begun[2] == entry.created_at:
            guard = (begun[0], key, begun[3], begun[2])

        def update(conn: sqlite3.Connection) -> Identity | None:
            kept = self._cursor
            if (
                guard is not None
                and (kept[1] if kept is not None and kept[0] is conn else self._cursor_of(conn))
                .execute(moved, (*changed, *guard, *condition, *identity_of_entry))
                .rowcount
            ):
                return identity_of_entry
            params = (to_json(entry.arguments), entry.state, entry.attempts, entry.created_at, *changed[2:])
            params = (*params, key, *condition)  # the identity columns stay as they are
            if conn.execute(same, (*params, *identity_of_entry)).rowcount == 1:
                return identity_of_entry
            rows = conn.execute(read_back, params).fetchall()  # a RETURNING statement runs to its end
            return (rows[0][0], rows[0][1], rows[0][2], rows[0][3]) if rows else None

        durable = entry.state in _BEFORE_SENDING or resolution is not None
        # autocommit: each statement is a whole transition, and one that changes nothing commits nothing
        identity: Identity | None = self._group.run(update, durable=durable, rerunnable=True, autocommit=True)
        if identity is not None and entry.state in TERMINAL:
            self._begun.pop(key, None)  # settled: nearly never moved again
        # every other column was set from ``entry``: only the identity is read back (the usual case: its own)
        return entry if identity is identity_of_entry else identity and with_identity(entry, identity)

    def get(self, key: str) -> LedgerEntry | None:
        return self._select(self._db.conn(), "WHERE key = ?", (key,))

    def get_node(self, run_id: str, node_id: str) -> LedgerEntry | None:
        return self._select(self._db.conn(), "WHERE run_id = ? AND node_id = ?", (run_id, node_id))

    def entries_of(self, run_id: str, node_ids: Collection[str]) -> dict[str, LedgerEntry]:
        nodes = list(dict.fromkeys(node_ids))
        found: dict[str, LedgerEntry] = {}
        conn = self._db.conn()
        for at in range(0, len(nodes), _NODES_PER_READ):
            part = nodes[at : at + _NODES_PER_READ]
            marks = ", ".join("?" * len(part))
            sql = f"{_SELECT} WHERE run_id = ? AND node_id IN ({marks})"
            for row in conn.execute(sql, (run_id, *part)):
                e = _entry(row)
                found[e.node_id] = e
        return found

    def pending_action(self, run_id: str, tool: str, args_digest: str) -> LedgerEntry | None:
        row = _oldest(self._db.conn().execute(_PENDING, (run_id, tool, args_digest)).fetchall())
        return _entry(row) if row is not None else None

    def list(self, *, state: str | None = None, limit: int = 100) -> list[LedgerEntry]:
        """At most ``limit`` entries (all of them in ``state`` if given), most recently updated first."""
        where, params = (listed_where(state), (state,)) if state is not None else ("", ())
        rows = self._db.conn().execute(
            f"{_SELECT} {where} ORDER BY updated_at DESC, key LIMIT ?", (*params, limit)
        )
        return [_entry(row) for row in rows]

    def tenant_entries(
        self, tenant: str | None, *, state: str | None = None, limit: int = 100
    ) -> builtins.list[LedgerEntry] | None:
        """:meth:`list` of the entries of ``tenant``'s runs only, through the tenant index
        (``_sqlite_tenants``; see ``ListsTenantEntries``); None for a file without its runs' trace,
        and for ``tenant`` None (the index holds no entry of a run without a tenant)."""
        if tenant is None or not add_listing_tenants(self._db):
            return None  # the tenant index holds no entry of a run without a tenant
        if text_for_utf8(tenant) != tenant:
            return []  # an unpaired surrogate: no stored tenant holds one
        tenant = tenant.partition("\x00")[0]  # SQLite's JSON functions read a text up to U+0000
        where = LEDGER_TENANT if state is None else f"{LEDGER_TENANT} AND state = ?"
        params: tuple[str | None, ...] = (tenant,) if state is None else (tenant, state)
        rows = self._db.conn().execute(
            f"{_SELECT} {where} ORDER BY updated_at DESC, key LIMIT ?", (*params, limit)
        )
        return [_entry(row) for row in rows]

    def purge(self, *, older_than: float) -> int:
        """Delete committed and failed entries last updated before ``older_than`` (unix s)."""
        self._db.check_open()

        def delete(conn: sqlite3.Connection) -> int:
            sql = f"DELETE FROM ledger_entries {PURGED_WHERE} AND updated_at < ?"
            return conn.execute(sql, (older_than,)).rowcount

        count: int = self._group.run(delete)
        return count

    def schema_version(self) -> int:
        """The ledger schema version recorded in the file."""
        row = self._db.conn().execute("SELECT value FROM ledger_meta WHERE key = 'schema_version'").fetchone()
        return int(row[0])

    def close(self) -> None:
        """Close every connection this store opened; later calls raise ``ValueError``."""
        if not self._db.closed:
            self._group.close()
        self._db.close()

    def using(self) -> Any:  # a context manager (SqliteConnections.using)
        """Statements from a thread ``close()`` does not wait for: see ``SqliteConnections.using``."""
        return self._group.using(self._db)

    def _conn(self) -> sqlite3.Connection:
        return self._db.conn()

    def _cursor_of(self, conn: sqlite3.Connection) -> sqlite3.Cursor:
        """A cursor kept for ``conn``, the writing connection (a new one in a forked child)."""
        cursor = conn.cursor()
        self._cursor = (conn, cursor)
        return cursor

    def __enter__(self) -> SqliteLedgerStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SqliteLedgerStore({str(self.path)!r})"

    @staticmethod
    def _select(conn: sqlite3.Connection, where: str, params: tuple[str, ...]) -> LedgerEntry | None:
        row = conn.execute(f"{_SELECT} {where}", params).fetchone()
        return _entry(row) if row is not None else None


def _row(entry: LedgerEntry) -> tuple[Any, ...]:
    return (
        entry.key,
        entry.run_id,
        entry.node_id,
        entry.tool,
        entry.args_digest,
        to_json(entry.arguments),
        entry.state,
        entry.attempts,
        entry.created_at,
        entry.updated_at,
        entry.remote_id,
        # mostly None (an intent has none of them, an outcome one): no call for SQL NULL
        None if entry.observation is None else to_json(entry.observation),
        None if entry.error is None else to_json(entry.error),
        None if entry.resolution is None else to_json(entry.resolution),
    )


def _oldest(rows: list[Any]) -> Any:
    """The row of the earliest ``created_at`` (then the smallest key) among ``rows``; None if none."""
    if not rows:
        return None
    return rows[0] if len(rows) == 1 else min(rows, key=lambda row: (row[_CREATED], row[0]))


def _entry(row: Sequence[Any]) -> LedgerEntry:
    data = {c: from_json(v) if c in _JSON_COLUMNS else v for c, v in zip(_COLUMNS, row, strict=True)}
    return LedgerEntry.from_dict(data)
