"""SQLite ledger store: the embedded default (DESIGN §6).

The ledger shares one file with the trace and the approval requests (its tables are prefixed
``ledger_``). The database runs in WAL mode. Every write of one process to one file goes through
that file's :class:`GroupCommit` (shared with the trace, run-state and budget stores of the
file), so concurrent writers share a transaction and its fsync instead of waiting for each
other's locks.

Durability, exactly: a ``begin`` and a transition into ``accepted`` or ``dispatched`` (or carrying
a person's resolution) return once their transaction is on disk (``synchronous=FULL``): the intent
recorded before a dispatch survives the process being killed and the machine losing power. A
transition into an outcome (``committed``, ``failed``, ``unknown``, ``unknown_commit``) returns
once its transaction is in the WAL file (``synchronous=NORMAL``): it survives the process being
killed; a power loss before the next fsync of the file (any later durable write) can lose it,
which leaves the entry ``dispatched`` for ``recover()`` to settle by the status query (or report
``unknown_commit``), never to send again blindly. The WAL is one sequence, so a power loss loses
at most the latest outcomes, never an intent written after them.

Uniqueness of ``key`` and of ``(run_id, node_id)`` is a table constraint, and a transition is one
``UPDATE … WHERE state IN (…)``: the database, not a Python lock, decides which of several threads,
processes or hosts sharing the file wins.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

from actionspace.errors import ConfigurationError
from actionspace.ledger.entries import TERMINAL, Begun, LedgerEntry

__all__ = [
    "SCHEMA_VERSION",
    "GroupCommit",
    "SqliteConnections",
    "SqliteLedgerStore",
    "from_json",
    "to_json",
]

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
_BEFORE_SENDING: Final = frozenset({"accepted", "dispatched"})
"""States a transition must have on disk before returning: a send may follow at once."""
_NODES_PER_READ: Final = 500
"""Most node ids one ``entries_of`` query names (SQLite bounds the parameters of a statement)."""


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
        self.synchronous = synchronous
        self._busy_timeout_s = busy_timeout_s
        self._lock = threading.Lock()
        self._local = threading.local()
        self._conns: list[tuple[threading.Thread, sqlite3.Connection]] = []
        self._inherited: list[tuple[threading.Thread, sqlite3.Connection]] = []
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
            conn.execute(f"PRAGMA synchronous = {self.synchronous}")
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


Operation = Callable[[sqlite3.Connection], Any]
"""What a caller hands the writer: it runs inside the shared transaction on the given connection."""


class _Slot:
    """One caller's operation waiting for a shared commit."""

    __slots__ = ("detached", "done", "durable", "error", "lead", "op", "result")

    def __init__(self, op: Operation, durable: bool) -> None:
        self.op = op
        self.durable = durable
        self.detached = False
        """Its caller did not wait: a failure is logged, not raised."""
        self.done: threading.Event | None = None
        """Set when the slot's group committed or it was handed the lead; only if it waits."""
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
    group holding any durable operation commits durably, the others' writes with it. An operation
    handed in with ``wait=False`` while a group is being committed returns at once and is
    committed with the next group; the leader does not leave while such operations are queued,
    and :meth:`settle` waits for them.
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
        self._levels = threading.local()
        """This thread's connection and the ``synchronous`` level last set on it."""
        self._detached = 0
        """Operations queued whose callers did not wait, not committed yet."""

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

    def run(self, op: Operation, *, durable: bool = True, wait: bool = True) -> Any:
        """``op(conn)`` inside a committed transaction; its result, or its exception raised here.

        With ``wait=False``, while another group is being committed, ``op`` is queued for the
        next one and None is returned at once (a failure of it is logged); when the writer is
        idle it runs at once as with ``wait=True``.
        """
        slot = _Slot(op, durable)
        with self._lock:
            if self._pid != os.getpid():  # a forked child: the parent's queue is not ours
                self._queue, self._busy, self._pid = [], False, os.getpid()
                self._detached = 0
            self._queue.append(slot)
            slot.lead = not self._busy
            self._busy = True
            if not slot.lead:
                if not wait:
                    slot.detached = True
                    self._detached += 1
                    return None
                slot.done = done = threading.Event()
        if not slot.lead:
            done.wait()
        if slot.lead:  # arrived first, or handed the lead when the group before it committed
            self._lead()
        if slot.error is not None:
            raise slot.error
        return slot.result

    def settle(self) -> None:
        """Return once every operation queued without waiting (``wait=False``) is committed."""
        with self._lock:
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
        self._db.close()

    def _lead(self) -> None:
        again = True
        while again:  # only queued operations nobody waits for: commit them before leaving
            with self._lock:
                group, self._queue = self._queue, []
            try:
                self._commit(group)
            except BaseException as exc:  # the commit failed: nothing of the group is written
                for slot in group:
                    slot.error = exc
            with self._lock:
                heir = next((slot for slot in self._queue if slot.done is not None), None)
                if heir is not None:
                    heir.lead = True
                    _wake(heir)
                again = heir is None and bool(self._queue)
                self._busy = bool(self._queue)
                if self._detached:
                    self._detached -= sum(slot.detached for slot in group)
            for slot in group:
                slot.lead = False
                if slot.done is not None:
                    slot.done.set()
                elif slot.detached and slot.error is not None:
                    _log.error("a queued write to %s failed", self._db.path, exc_info=slot.error)

    def _commit(self, group: list[_Slot]) -> None:
        level = self._db.synchronous if any(slot.durable for slot in group) else "NORMAL"
        conn = self._db.conn()
        last = self._levels
        if getattr(last, "conn", None) is not conn or last.level != level:  # kept until it changes
            conn.execute(f"PRAGMA synchronous = {level}")
            last.conn, last.level = conn, level
        conn.execute("BEGIN IMMEDIATE")  # as SqliteConnections.write, without its context manager
        try:
            if len(group) == 1:  # alone: no savepoint needed, an error rolls the transaction back
                slot = group[0]
                slot.result = slot.op(conn)
            else:
                _each_in_a_savepoint(conn, group)
        except BaseException:
            conn.rollback()
            raise
        conn.commit()


def _each_in_a_savepoint(conn: sqlite3.Connection, group: list[_Slot]) -> None:
    for slot in group:
        conn.execute("SAVEPOINT op")
        try:
            slot.result = slot.op(conn)
        except Exception as exc:
            conn.execute("ROLLBACK TO op")
            slot.error = exc
        conn.execute("RELEASE op")


def _wake(slot: _Slot) -> None:
    if slot.done is not None:
        slot.done.set()


def _nothing(conn: sqlite3.Connection) -> None:
    return None


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
        self._group = GroupCommit.open(self.path, busy_timeout_s=busy_timeout_s)

    def begin(self, entry: LedgerEntry) -> Begun:
        """Insert ``entry`` unless its ``(run_id, node_id)`` or its key is stored; return the stored one.

        Returns once the transaction holding the insert is on disk (concurrent callers share it).
        """
        self._db.check_open()

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

        Returns once on disk when ``entry`` may be sent next (``accepted``, ``dispatched``) or holds
        a person's resolution; an outcome once in the WAL (see the module docstring).
        Raises ``ValueError`` when ``entry.key`` is not ``key``.
        """
        self._db.check_open()
        if entry.key != key:
            raise ValueError(f"transition of {key} was given the entry of {entry.key}")
        states = list(dict.fromkeys(expected))
        if not states:
            return None
        where = f" AND state IN ({', '.join('?' * len(states))})"
        sql, params = _UPDATE + where, (*_row(entry)[1:], key, *states)

        def update(conn: sqlite3.Connection) -> bool:
            return conn.execute(sql, params).rowcount == 1

        durable = entry.state in _BEFORE_SENDING or entry.resolution is not None
        # every column was set from ``entry``: nothing to read back
        return entry if self._group.run(update, durable=durable) else None

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
        self._db.check_open()

        def delete(conn: sqlite3.Connection) -> int:
            sql = f"DELETE FROM ledger_entries WHERE state IN ({_TERMINAL_SQL}) AND updated_at < ?"
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
