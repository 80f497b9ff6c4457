"""Run state that outlives a process: what any process continuing a run rebuilds it from.

A run's principal, its context label (everything the model was shown joins it), the artifacts it
was shown, its user turn and its offer pins decide what a later call of the run may do. Kept only
in the memory of the process that opened the run, they are lost when another process continues
it (a restart, an API resume, another worker): a secret read in one process could be sent out by
the next without the declassification gate. The engine writes a snapshot here whenever one of
them changes — before the observation that changed it reaches the caller — and any process that
opens the run reads it back. The call ids kept behind each label (which calls a label came from,
named in a denial's details) change with most calls and decide nothing: a snapshot that differs
from the saved one only in them is written without waiting (``save_later``, where a store has it;
the SQLite store's writer commits it within its linger).

A snapshot is a JSON object (see :meth:`actionspace.discovery.runs.RunState.snapshot`); the stores
here keep the latest one per run: in memory (``memory://``), in the SQLite file shared with the
ledger (table ``run_state``), or in PostgreSQL (table ``actionspace_run_state``).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Protocol, runtime_checkable

__all__ = [
    "MemoryRunStateStore",
    "RunStateStore",
    "SqliteRunStateStore",
    "open_run_states",
]

_SQLITE_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS run_state_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS run_state (
    run_id     TEXT PRIMARY KEY,
    state      TEXT NOT NULL,
    updated_at REAL NOT NULL
)
"""
SCHEMA_VERSION: Final = 1
_UPSERT_TAIL: Final = (
    " ON CONFLICT (run_id) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at"
)
_SQLITE_UPSERT: Final = "INSERT INTO run_state (run_id, state, updated_at) VALUES (?, ?, ?)" + _UPSERT_TAIL


@runtime_checkable
class RunStateStore(Protocol):
    """The latest snapshot of each run's state."""

    def load(self, run_id: str) -> Mapping[str, Any] | None:
        """The run's latest snapshot, or None when none was saved."""
        ...

    def save(self, run_id: str, state: Mapping[str, Any]) -> None:
        """Replace the run's snapshot (durable when this returns, for a database store).

        A store may also offer ``save_later(run_id, state)``: the same without waiting, used when
        only the call ids kept behind the run's labels changed; without it ``save`` is used.
        """
        ...


def _encode(state: Mapping[str, Any]) -> str:
    return json.dumps(dict(state), ensure_ascii=False, allow_nan=False, separators=(",", ":"))


class MemoryRunStateStore:
    """Snapshots in this process (``memory://``): a run evicted from the engine comes back from here."""

    def __init__(self) -> None:
        self._states: dict[str, str] = {}
        self._lock = threading.Lock()

    def load(self, run_id: str) -> Mapping[str, Any] | None:
        text = self._states.get(run_id)
        return None if text is None else dict(json.loads(text))

    def save(self, run_id: str, state: Mapping[str, Any]) -> None:
        text = _encode(state)  # a snapshot that cannot be encoded fails here, as in a database store
        with self._lock:
            self._states[run_id] = text

    save_later = save


class SqliteRunStateStore:
    """Snapshots in the SQLite file shared with the ledger and the trace (table ``run_state``).

    A save returns once on disk; it shares the file's writer (and its fsync) with the ledger.
    :meth:`save_later` returns at once: the snapshot is one of the writer's deferred operations,
    committed within its linger, unless a newer snapshot of the run was saved meanwhile.
    """

    def __init__(self, path: str | Path, *, busy_timeout_s: float = 30.0) -> None:
        from actionspace.ledger.sqlite import GroupCommit, SqliteConnections

        self._db = SqliteConnections(path, synchronous="FULL", busy_timeout_s=busy_timeout_s)
        try:
            self._db.init_schema(_SQLITE_SCHEMA, "run_state_meta", "schema_version", SCHEMA_VERSION)
        except BaseException:
            self._db.close()
            raise
        self._group = GroupCommit.open(path, busy_timeout_s=busy_timeout_s)
        self._latest: dict[str, int] = {}
        """Run → number of its newest snapshot handed in (a deferred older one is not written)."""
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()

    def load(self, run_id: str) -> Mapping[str, Any] | None:
        self._group.settle()  # a snapshot saved for later is read back like any other
        row = self._db.conn().execute("SELECT state FROM run_state WHERE run_id = ?", (run_id,)).fetchone()
        return None if row is None else dict(json.loads(row[0]))

    def save(self, run_id: str, state: Mapping[str, Any]) -> None:
        self._db.check_open()
        self._number(run_id)
        params = (run_id, _encode(state), time.time())
        self._group.run(lambda conn: conn.execute(_SQLITE_UPSERT, params))

    def save_later(self, run_id: str, state: Mapping[str, Any]) -> None:
        """:meth:`save` without waiting: the file's writer commits it within ``LINGER_S`` (or a
        read commits it first), unless a newer snapshot of the run was saved meanwhile."""
        self._db.check_open()
        number = self._number(run_id)
        params = (run_id, _encode(state), time.time())

        def write(conn: Any) -> None:
            if self._latest.get(run_id) == number:  # else a newer snapshot was saved: keep it
                conn.execute(_SQLITE_UPSERT, params)

        self._group.defer(write)

    def _number(self, run_id: str) -> int:
        with self._lock:
            number = self._latest[run_id] = next(self._numbers)
            if len(self._latest) > 65_536:  # runs long gone: their deferred writes are committed
                self._group.settle()
                self._latest = {run_id: number}
            return number

    def close(self) -> None:
        if not self._db.closed:
            self._group.close()
        self._db.close()


class PostgresRunStateStore:
    """Snapshots in PostgreSQL (table ``actionspace_run_state``), shared by every process and host."""

    def __init__(self, url: str, *, connect_timeout_s: float = 10.0) -> None:
        from actionspace.ledger.postgres import PostgresConnections

        self._db = PostgresConnections(url, name="run_state", max_size=4, connect_timeout_s=connect_timeout_s)
        try:
            self._db.init_schema(
                (
                    "CREATE TABLE IF NOT EXISTS actionspace_run_state_meta"
                    " (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
                    "CREATE TABLE IF NOT EXISTS actionspace_run_state"
                    " (run_id TEXT PRIMARY KEY, state TEXT NOT NULL, updated_at DOUBLE PRECISION NOT NULL)",
                ),
                meta_table="actionspace_run_state_meta",
                meta_key="schema_version",
                version=SCHEMA_VERSION,
                what="the run state",
            )
        except BaseException:
            self._db.close()
            raise

    def load(self, run_id: str) -> Mapping[str, Any] | None:
        with self._db.connection() as conn:
            row = conn.execute(
                "SELECT state FROM actionspace_run_state WHERE run_id = %s", (run_id,)
            ).fetchone()
        return None if row is None else dict(json.loads(row["state"]))

    def save(self, run_id: str, state: Mapping[str, Any]) -> None:
        text = _encode(state)
        with self._db.connection() as conn:
            conn.execute(
                "INSERT INTO actionspace_run_state (run_id, state, updated_at) VALUES (%s, %s, %s)"
                + _UPSERT_TAIL,
                (run_id, text, time.time()),
            )

    def close(self) -> None:
        self._db.close()


def open_run_states(url: str) -> RunStateStore:
    """The run-state store ``url`` names (the same URL as the ledger's)."""
    from actionspace.ledger.open import scheme_of, sqlite_file

    scheme = scheme_of(url)
    if scheme == "memory":
        return MemoryRunStateStore()
    if scheme == "sqlite":
        return SqliteRunStateStore(sqlite_file(url))
    return PostgresRunStateStore(url)
