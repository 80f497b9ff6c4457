"""SQLite ledger store: the embedded default (DESIGN §6).

The ledger shares one file with the trace and the approval requests (its tables are prefixed
``ledger_``). The database runs in WAL mode with ``synchronous=FULL`` on the ledger's connections:
a ``begin`` or ``transition`` that returned has reached the disk, so the intent recorded before a
dispatch survives the process being killed and the machine losing power.

Uniqueness of ``key`` and of ``(run_id, node_id)`` is a table constraint, and a transition is one
``UPDATE … WHERE state IN (…)``: the database, not a Python lock, decides which of several threads,
processes or hosts sharing the file wins.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

from actionspace.errors import ConfigurationError
from actionspace.ledger.entries import TERMINAL, Begun, LedgerEntry

__all__ = ["SCHEMA_VERSION", "GroupCommit", "SqliteConnections", "SqliteLedgerStore", "from_json", "to_json"]

SCHEMA_VERSION: Final = 1
"""Version of the ledger tables; stored in ``ledger_meta`` and checked on open."""

_SCHEMA: Final = """
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
CREATE INDEX IF NOT EXISTS ledger_entries_state_updated ON ledger_entries (state, updated_at);
CREATE INDEX IF NOT EXISTS ledger_entries_action ON ledger_entries (run_id, tool, args_digest);
"""

_COLUMNS: Final = (
    "key",
    "run_id",
    "node_id",
    "tool",
    "args_digest",
    "arguments",
    "state",
    "attempts",
    "created_at",
    "updated_at",
    "remote_id",
    "observation",
    "error",
    "resolution",
)
_JSON_COLUMNS: Final = frozenset({"arguments", "observation", "error", "resolution"})
_SELECT: Final = f"SELECT {', '.join(_COLUMNS)} FROM ledger_entries"
_INSERT: Final = (
    f"INSERT INTO ledger_entries ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})"
    " ON CONFLICT DO NOTHING"
)
_UPDATED: Final = _COLUMNS[1:]
_UPDATE: Final = f"UPDATE ledger_entries SET {', '.join(f'{c} = ?' for c in _UPDATED)} WHERE key = ?"
_TERMINAL_SQL: Final = ", ".join(f"'{state}'" for state in sorted(TERMINAL))


def to_json(value: Mapping[str, Any] | Sequence[Any] | None) -> str | None:
    """Stable JSON text for a mapping or sequence column; None stays SQL NULL."""
    if value is None:
        return None
    plain: Any = dict(value) if isinstance(value, Mapping) else list(value)
    return json.dumps(plain, ensure_ascii=False, allow_nan=False)


def from_json(text: str | None) -> Any:
    """The value of a JSON column; SQL NULL is None."""
    return None if text is None else json.loads(text)


class SqliteConnections:
    """Connections to one SQLite file: one per thread, reopened in a forked child.

    ``synchronous`` is the SQLite level set on every connection (``FULL`` or ``NORMAL``);
    ``busy_timeout_s`` (seconds) bounds how long a write waits for another writer.
    Raises :class:`~actionspace.errors.ConfigurationError` for ``":memory:"``.
    """

    def __init__(self, path: str | os.PathLike[str], *, synchronous: str, busy_timeout_s: float) -> None:
        if str(path) in ("", ":memory:"):
            raise ConfigurationError("a SQLite store needs a file path; use memory:// for a store in memory")
        self.path = Path(path)
        self._synchronous = synchronous
        self._busy_timeout_s = busy_timeout_s
        self._lock = threading.Lock()
        self._local = threading.local()
        self._conns: list[tuple[threading.Thread, sqlite3.Connection]] = []
        self._inherited: list[tuple[threading.Thread, sqlite3.Connection]] = []
        self._pid = os.getpid()
        self._closed = False

    def conn(self) -> sqlite3.Connection:
        """This thread's connection in this process; raises ``ValueError`` once closed."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None and self._pid == os.getpid() and not self._closed:
            return conn
        return self._open_for_this_thread()

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
            conn = sqlite3.connect(
                self.path, timeout=self._busy_timeout_s, isolation_level=None, check_same_thread=False
            )
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_s * 1000)}")
            conn.execute(f"PRAGMA synchronous = {self._synchronous}")
            alive.append((threading.current_thread(), conn))
            self._conns = alive
            self._local.conn = conn
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


class _Slot:
    """One caller's operation waiting for a shared commit."""

    __slots__ = ("done", "error", "lead", "op", "result")

    def __init__(self, op: Callable[[sqlite3.Connection], Any]) -> None:
        self.op = op
        self.done = threading.Event()
        self.lead = False
        self.result: Any = None
        self.error: BaseException | None = None


class GroupCommit:
    """Concurrent writers of one process share a transaction, and so its fsync.

    Each caller hands in its operation and returns only after the transaction holding it
    committed: nothing is acknowledged before it is on disk. The first caller to arrive leads: it
    runs every queued operation, each inside its own savepoint (one that raises is rolled back
    alone and its caller gets the exception), then commits once. Callers arriving meanwhile queue
    up; when the leader is done the first of them leads the next group. A lone caller runs its
    operation at once, as a plain transaction would.
    """

    def __init__(self, db: SqliteConnections) -> None:
        self._db = db
        self._lock = threading.Lock()
        self._queue: list[_Slot] = []
        self._busy = False
        self._pid = os.getpid()

    def run(self, op: Callable[[sqlite3.Connection], Any]) -> Any:
        """``op(conn)`` inside a committed transaction; its result, or its exception raised here."""
        slot = _Slot(op)
        with self._lock:
            if self._pid != os.getpid():  # a forked child: the parent's queue is not ours
                self._queue, self._busy, self._pid = [], False, os.getpid()
            self._queue.append(slot)
            slot.lead = not self._busy
            self._busy = True
        if not slot.lead:
            slot.done.wait()
        if slot.lead:  # arrived first, or handed the lead when the group before it committed
            self._lead()
        if slot.error is not None:
            raise slot.error
        return slot.result

    def _lead(self) -> None:
        with self._lock:
            group, self._queue = self._queue, []
        try:
            self._commit(group)
        except BaseException as exc:  # the commit itself failed: nothing of the group is durable
            for slot in group:
                slot.error = exc
        finally:
            with self._lock:
                if self._queue:
                    self._queue[0].lead = True
                    self._queue[0].done.set()
                else:
                    self._busy = False
            for slot in group:
                slot.lead = False
                slot.done.set()

    def _commit(self, group: list[_Slot]) -> None:
        with self._db.write() as conn:
            if len(group) == 1:  # alone: no savepoint needed, an error rolls the transaction back
                slot = group[0]
                slot.result = slot.op(conn)
                return
            for slot in group:
                conn.execute("SAVEPOINT op")
                try:
                    slot.result = slot.op(conn)
                except Exception as exc:
                    conn.execute("ROLLBACK TO op")
                    slot.error = exc
                conn.execute("RELEASE op")


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
        except BaseException:
            self._db.close()
            raise
        self._group = GroupCommit(self._db)

    def begin(self, entry: LedgerEntry) -> Begun:
        """Insert ``entry`` unless its ``(run_id, node_id)`` or its key is stored; return the stored one.

        Returns once the transaction holding the insert committed (concurrent callers share it).
        """

        def insert(conn: sqlite3.Connection) -> tuple[bool, LedgerEntry | None]:
            created = conn.execute(_INSERT, _row(entry)).rowcount == 1
            if created:  # what was just written, without reading it back
                return True, entry
            stored = self._select(conn, "WHERE run_id = ? AND node_id = ?", (entry.run_id, entry.node_id))
            if stored is None:
                stored = self._select(conn, "WHERE key = ?", (entry.key,))
            return False, stored

        created, stored = self._group.run(insert)
        if stored is None:
            raise RuntimeError(f"ledger entry {entry.key} vanished inside its own transaction")
        return Begun(stored, created)

    def transition(self, key: str, expected: Sequence[str], entry: LedgerEntry) -> LedgerEntry | None:
        """Store ``entry`` only if the state of ``key`` is in ``expected``; None when it was not.

        Raises ``ValueError`` when ``entry.key`` is not ``key``.
        """
        if entry.key != key:
            raise ValueError(f"transition of {key} was given the entry of {entry.key}")
        states = list(dict.fromkeys(expected))
        if not states:
            return None
        where = f" AND state IN ({', '.join('?' * len(states))})"
        sql, params = _UPDATE + where, (*_row(entry)[1:], key, *states)

        def update(conn: sqlite3.Connection) -> bool:
            return conn.execute(sql, params).rowcount == 1

        return entry if self._group.run(update) else None  # every column was set from ``entry``

    def get(self, key: str) -> LedgerEntry | None:
        return self._select(self._db.conn(), "WHERE key = ?", (key,))

    def get_node(self, run_id: str, node_id: str) -> LedgerEntry | None:
        return self._select(self._db.conn(), "WHERE run_id = ? AND node_id = ?", (run_id, node_id))

    def pending_action(self, run_id: str, tool: str, args_digest: str) -> LedgerEntry | None:
        return self._select(
            self._db.conn(),
            "WHERE run_id = ? AND tool = ? AND args_digest = ? AND state IN ('dispatched', 'unknown', "
            "'unknown_commit') ORDER BY created_at LIMIT 1",
            (run_id, tool, args_digest),
        )

    def list(self, *, state: str | None = None, limit: int = 100) -> list[LedgerEntry]:
        """At most ``limit`` entries (all of them in ``state`` if given), most recently updated first."""
        where, params = ("WHERE state = ?", (state,)) if state is not None else ("", ())
        rows = self._db.conn().execute(
            f"{_SELECT} {where} ORDER BY updated_at DESC, key LIMIT ?", (*params, limit)
        )
        return [_entry(row) for row in rows]

    def purge(self, *, older_than: float) -> int:
        """Delete committed and failed entries last updated before ``older_than`` (unix s)."""
        with self._db.write() as conn:
            cursor = conn.execute(
                f"DELETE FROM ledger_entries WHERE state IN ({_TERMINAL_SQL}) AND updated_at < ?",
                (older_than,),
            )
            return cursor.rowcount

    def schema_version(self) -> int:
        """The ledger schema version recorded in the file."""
        row = self._db.conn().execute("SELECT value FROM ledger_meta WHERE key = 'schema_version'").fetchone()
        return int(row[0])

    def close(self) -> None:
        """Close every connection this store opened; later calls raise ``ValueError``."""
        self._db.close()

    def _conn(self) -> sqlite3.Connection:
        return self._db.conn()

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
        to_json(entry.observation),
        to_json(entry.error),
        to_json(entry.resolution),
    )


def _entry(row: Sequence[Any]) -> LedgerEntry:
    data = {c: from_json(v) if c in _JSON_COLUMNS else v for c, v in zip(_COLUMNS, row, strict=True)}
    return LedgerEntry.from_dict(data)
