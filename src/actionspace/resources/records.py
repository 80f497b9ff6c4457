"""A versioned record store on SQLite: key → JSON value, version, content hash, full history.

``RecordStore(path)`` gives the read modes (``Latest``, ``AtVersion``, :meth:`RecordStore.snapshot`)
and write modes (``Overwrite``, ``Conditional``, ``Append``) of :mod:`actionspace.resources.modes`,
and :meth:`RecordStore.transaction` for writes that must become visible together.

Versions are integers counting from 1 per key (0 / ``ABSENT`` = the key does not exist); the
content hash is the sha256 of the value's canonical JSON (sorted keys, no spaces). Every version
stays in the ``history`` table, which is what ``AtVersion`` reads.

Concurrency: every write takes SQLite's write lock (``BEGIN IMMEDIATE``) and checks its condition
under it, so of two conditional writers on the same base exactly one wins. The other gets
``stale_reference`` when it took the lock after the winner committed, or ``conflict`` when the lock
was still held after ``lock_timeout_s``. Readers never block writers (WAL); a snapshot is one read
transaction and sees one committed state.

The store is also a :class:`~actionspace.resources.Transactional` of mode ``"transaction"``:
register it with ``rt.environment(name, store)`` and tools declaring ``transaction=name`` receive
the open :class:`RecordTransaction` in a plan group (their writes commit together, or not at all).

Keys and values UTF-8 or JSON cannot hold are ``invalid_arguments``; a database that refuses a
write is typed by SQLite's code (full → ``transient``, read-only → ``permanent``, locked →
``conflict``, else ``unclassified``), and the refused transaction is rolled back whole.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from actionspace.errors import Category, ToolError
from actionspace.resources.modes import (
    LATEST,
    Append,
    AtVersion,
    Conditional,
    EnvironmentMode,
    ReadMode,
    WriteMode,
    conflict,
    sha256_hex,
    stale,
    version_matches,
)

__all__ = ["Record", "RecordSnapshot", "RecordStore", "RecordTransaction", "value_hash"]

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS records (key TEXT PRIMARY KEY, value TEXT NOT NULL,"
    " version INTEGER NOT NULL, hash TEXT NOT NULL, at REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS history (key TEXT NOT NULL, version INTEGER NOT NULL,"
    " value TEXT NOT NULL, hash TEXT NOT NULL, at REAL NOT NULL, PRIMARY KEY (key, version))",
    "CREATE TABLE IF NOT EXISTS transaction_commits (key TEXT PRIMARY KEY, at REAL NOT NULL)",
)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


_CATEGORIES: dict[int, Category] = {
    sqlite3.SQLITE_FULL: "transient",
    sqlite3.SQLITE_READONLY: "permanent",
    sqlite3.SQLITE_PERM: "permanent",
    sqlite3.SQLITE_BUSY: "conflict",
    sqlite3.SQLITE_LOCKED: "conflict",
}
"""SQLite's primary result codes a caller can act on; any other is ``unclassified``."""


@contextmanager
def _refusals(resource_id: str) -> Iterator[None]:
    """Raise every ``sqlite3.Error`` of the block as a :class:`ToolError` typed by its code."""
    try:
        yield
    except sqlite3.Error as exc:
        code = getattr(exc, "sqlite_errorcode", None)
        category = _CATEGORIES.get(code & 0xFF, "unclassified") if isinstance(code, int) else "unclassified"
        name = getattr(exc, "sqlite_errorname", None) or type(exc).__name__
        details = {"written": False} if category == "transient" else {}
        raise ToolError(
            category, f"{resource_id}: {exc}", vendor_code=name, resource_ids=[resource_id], details=details
        ) from exc


def _checked(key: Any) -> str:
    """``key``, refused (``invalid_arguments``) unless it is text UTF-8 can hold."""
    if not isinstance(key, str):
        raise ToolError("invalid_arguments", f"a record key is text, not {type(key).__name__}")
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        raise ToolError(
            "invalid_arguments", "record key is not valid UTF-8 text (a lone surrogate)"
        ) from None
    return key


def value_hash(value: Any) -> str:
    """The content hash of a record value: sha256 hex of its canonical JSON."""
    return sha256_hex(_canonical(value).encode("utf-8"))


@dataclass(frozen=True, slots=True, kw_only=True)
class Record:
    """One version of one record."""

    key: str
    value: Any
    version: int
    """1 for the first write of the key, +1 per write."""
    hash: str
    """:func:`value_hash` of ``value``."""
    at: float
    """Unix time (seconds) of the write that made this version."""


def _record(key: str, row: tuple[str, int, str, float] | None) -> Record | None:
    if row is None:
        return None
    return Record(key=key, value=json.loads(row[0]), version=row[1], hash=row[2], at=row[3])


def _read(conn: sqlite3.Connection, key: str, mode: ReadMode) -> Record | None:
    key = _checked(key)
    row = conn.execute("SELECT value, version, hash, at FROM records WHERE key = ?", (key,)).fetchone()
    current = _record(key, row)
    if not isinstance(mode, AtVersion) or (current is not None and str(current.version) == str(mode.version)):
        return current
    old = conn.execute(
        "SELECT value, version, hash, at FROM history WHERE key = ? AND CAST(version AS TEXT) = ?",
        (key, str(mode.version)),
    ).fetchone()
    if old is None:
        raise stale(
            f"record:{key}",
            f"{key} has no version {mode.version}",
            current.version if current is not None else None,
        )
    return _record(key, old)


def _write(conn: sqlite3.Connection, key: str, value: Any, mode: WriteMode) -> Record:
    """Apply one write inside an open write transaction (the caller holds the write lock)."""
    current = _read(conn, key, LATEST)
    if isinstance(mode, Conditional) and not version_matches(
        mode, current.version if current else None, current.hash if current else None
    ):
        raise stale(
            f"record:{key}",
            f"{key} changed since it was read",
            current.version if current else None,
            expected=mode.version if mode.version is not None else mode.content_hash,
        )
    if isinstance(mode, Append):
        base = current.value if current is not None else []
        if not isinstance(base, list):
            raise ToolError(
                "invalid_arguments", f"{key} is not a list; append needs one", resource_ids=[f"record:{key}"]
            )
        value = [*base, value]
    try:
        text = _canonical(value)
        encoded = text.encode("utf-8")  # a lone surrogate in a string or a name: not storable text
    except (TypeError, ValueError, RecursionError) as exc:
        kind = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise ToolError("invalid_arguments", f"value of {key} is not JSON: {kind}") from None
    new = Record(
        key=key,
        value=json.loads(text),
        version=(current.version if current else 0) + 1,
        hash=sha256_hex(encoded),
        at=time.time(),
    )
    row = (new.key, text, new.version, new.hash, new.at)
    conn.execute("INSERT OR REPLACE INTO records (key, value, version, hash, at) VALUES (?, ?, ?, ?, ?)", row)
    conn.execute("INSERT INTO history (key, value, version, hash, at) VALUES (?, ?, ?, ?, ?)", row)
    return new


class RecordTransaction:
    """An open write transaction (holds the write lock until commit or rollback).

    Its writes are visible to its own reads at once and to everyone else only after :meth:`commit`.
    """

    def __init__(self, conn: sqlite3.Connection, key: str | None) -> None:
        self.connection = conn
        self.key = key
        self.writes: list[Record] = []

    def read(self, key: str, *, mode: ReadMode = LATEST) -> Record | None:
        with _refusals(f"record:{key}"):
            return _read(self.connection, key, mode)

    def write(self, key: str, value: Any, *, mode: WriteMode) -> Record:
        """Write in ``mode``; a failed condition raises ``stale_reference`` and leaves the
        transaction open (the caller decides whether to roll it back)."""
        with _refusals(f"record:{key}"):
            record = _write(self.connection, key, value, mode)
        self.writes.append(record)
        return record

    def commit(self) -> None:
        """Make every write visible together and record ``key`` (when given) in the same commit."""
        try:
            with _refusals("records"):
                if self.key is not None:
                    try:
                        self.connection.execute(
                            "INSERT INTO transaction_commits (key, at) VALUES (?, ?)", (self.key, time.time())
                        )
                    except sqlite3.IntegrityError:
                        raise ToolError(
                            "conflict", f"transaction {self.key} was committed already; nothing was written"
                        ) from None
                self.connection.execute("COMMIT")
        finally:
            self.connection.close()  # closing an uncommitted transaction rolls it back

    def rollback(self) -> None:
        """Discard every write of this transaction."""
        try:
            with contextlib.suppress(sqlite3.Error):  # SQLite may have rolled it back already (disk full)
                self.connection.execute("ROLLBACK")
        finally:
            self.connection.close()


@dataclass(slots=True)
class RecordSnapshot:
    """One read transaction: every read sees the same committed state."""

    connection: sqlite3.Connection
    versions: dict[str, int] = field(default_factory=dict)
    """Key → version of every record read through this snapshot (0 = absent)."""

    def read(self, key: str, *, mode: ReadMode = LATEST) -> Record | None:
        found = _read(self.connection, key, mode)
        self.versions[key] = found.version if found is not None else 0
        return found


class RecordStore:
    """Versioned JSON records in one SQLite file; see the module docstring.

    ``lock_timeout_s``: how long a writer waits for another writer's lock before the write is a
    ``conflict`` (seconds, default 5).
    """

    mode: EnvironmentMode = "transaction"
    """As a :class:`~actionspace.resources.Transactional`: the environment's own transaction."""

    def __init__(self, path: str | Path, *, lock_timeout_s: float = 5.0) -> None:
        self.path = Path(path)
        self.lock_timeout_s = lock_timeout_s
        with closing(self._connect()) as conn:
            conn.execute("PRAGMA journal_mode=WAL")
            for statement in _SCHEMA:
                conn.execute(statement)

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(
            self.path, timeout=self.lock_timeout_s, isolation_level=None, check_same_thread=False
        )

    def read(self, key: str, *, mode: ReadMode = LATEST) -> Record | None:
        """The record now (None when absent) or at ``AtVersion`` (missing → ``stale_reference``)."""
        with _refusals(f"record:{key}"), closing(self._connect()) as conn:
            return _read(conn, key, mode)

    def history(self, key: str) -> list[Record]:
        """Every version of ``key``, oldest first."""
        key = _checked(key)
        with _refusals(f"record:{key}"), closing(self._connect()) as conn:
            rows = conn.execute(
                "SELECT value, version, hash, at FROM history WHERE key = ? ORDER BY version", (key,)
            ).fetchall()
        return [r for r in (_record(key, row) for row in rows) if r is not None]

    def write(self, key: str, value: Any, *, mode: WriteMode) -> Record:
        """One write in its own transaction; see the module docstring for the errors raised."""
        with self.transaction() as tx:
            return tx.write(key, value, mode=mode)

    @contextmanager
    def snapshot(self) -> Iterator[RecordSnapshot]:
        """Several reads that see one consistent committed state, whatever commits meanwhile."""
        with closing(self._connect()) as conn:
            conn.execute("BEGIN DEFERRED")
            conn.execute("SELECT count(*) FROM records").fetchone()  # fixes the read snapshot now
            try:
                yield RecordSnapshot(conn)
            finally:
                conn.execute("ROLLBACK")

    @contextmanager
    def transaction(self, *, key: str | None = None) -> Iterator[RecordTransaction]:
        """Writes that become visible together: committed when the block exits normally, rolled
        back when it raises. ``key`` is recorded with the commit (for :meth:`committed`)."""
        tx = self.begin(key)
        try:
            yield tx
        except BaseException:
            tx.rollback()
            raise
        tx.commit()

    def begin(self, key: str | None = None) -> RecordTransaction:
        """Open a write transaction (``conflict`` when another writer holds the lock too long)."""
        conn = self._connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            conn.close()
            if "locked" in str(exc) or "busy" in str(exc):
                raise conflict(
                    f"records:{self.path.name}",
                    f"another writer held {self.path.name} for {self.lock_timeout_s}s",
                ) from exc
            with _refusals(f"records:{self.path.name}"):
                raise
        return RecordTransaction(conn, key)

    def committed(self, key: str) -> bool | None:
        """Whether the transaction recorded with ``key`` was committed; None when unreadable."""
        try:
            with closing(self._connect()) as conn:
                row = conn.execute("SELECT 1 FROM transaction_commits WHERE key = ?", (key,)).fetchone()
        except sqlite3.Error:
            return None
        return row is not None
