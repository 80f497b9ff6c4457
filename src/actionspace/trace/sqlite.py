"""SQLite trace store: the embedded default (DESIGN §10).

One file, shared by every thread and every process of a host. The database runs in WAL mode and
batches are written without waiting for an fsync (``synchronous=NORMAL``); a batch cut short by a
kill is rolled back when the file is next opened, so readers only ever see whole batches.

Writes go through the file's writer in this process
(:meth:`~actionspace.ledger.sqlite_writer.GroupCommit.open`), shared with the ledger. A call's
records are not waited for: ``append_records`` encodes and holds them, and defers one operation to
the writer's flusher, which commits them :data:`~actionspace.ledger.sqlite_writer.LINGER_S` later
with every call's records appended meanwhile (each run's numbered after one read of its last
event); closing the store and the interpreter's exit commit them too. A process killed within that
moment loses them (a power loss may take the latest ones in any case); the ledger, not the trace,
is what recovery reads; :meth:`SqliteTraceStore.sync` commits them durably at once (before an
approval request is filed). Every read of this store first commits the deferred records (a read of
some runs, ``events`` or ``heads``, those of its runs only), so a thread reads what it appended;
another process sees them within the linger. Each thread reads on its own connection (SQLite
connections must not be used by two threads at once); writers in other processes wait up to
``busy_timeout_s`` for the lock.
"""

from __future__ import annotations

import math
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from operator import itemgetter
from pathlib import Path
from typing import Any, Final

from actionspace._store_url import sqlite_reading_uri
from actionspace._unicode import text_for_utf8
from actionspace.errors import ConfigurationError, StoreNotFoundError
from actionspace.ledger._connections import refuse_closed
from actionspace.ledger.sqlite import GroupCommit, SqliteConnections
from actionspace.trace._payload_texts import SHARED_KINDS, PayloadTexts
from actionspace.trace._sqlite_held import HELD_COLUMNS, insert_held
from actionspace.trace._sqlite_reads import PartsOfRuns
from actionspace.trace._sqlite_runs import (
    RUNS,
    RUNS_AFTER,
    TENANT_RUNS,
    TENANT_RUNS_AFTER,
    add_run_tenants,
    touch_run,
)
from actionspace.trace._sqlite_takes import ReadsOfRuns, Takes
from actionspace.trace._stored_rows import stored_event, stored_ts
from actionspace.trace.events import CLAIM_EXPIRY_S, EventRecord, RunSummary, TraceEvent, claim_expiry
from actionspace.trace.memory import runs_limit
from actionspace.trace.store_encoding import Texted, call_id_for_utf8, check_event, encode_data
from actionspace.types import SYSTEM_CLOCK, Clock

__all__ = ["SCHEMA_VERSION", "SqliteTraceReader", "SqliteTraceStore"]

SCHEMA_VERSION: Final = 1
"""Version of the tables below; stored in ``trace_meta`` and checked on open."""

# Tables are prefixed so the trace can share one database file with the ledger and approvals.
_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS trace_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS trace_events (
    id      INTEGER PRIMARY KEY,
    run_id  TEXT    NOT NULL,
    seq     INTEGER NOT NULL,
    kind    TEXT    NOT NULL,
    ts      REAL    NOT NULL,
    call_id TEXT,
    data    TEXT    NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS trace_events_run_seq ON trace_events (run_id, seq);
CREATE TABLE IF NOT EXISTS trace_runs (
    run_id     TEXT PRIMARY KEY,
    started_at REAL NOT NULL,
    last_at    REAL NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS trace_runs_recent ON trace_runs (last_at DESC, run_id);
CREATE TABLE IF NOT EXISTS trace_claims (
    run_id     TEXT PRIMARY KEY,
    claimed_at REAL NOT NULL
) WITHOUT ROWID;
"""

_NEXT_SEQ: Final = "SELECT coalesce(max(seq) + 1, 0) FROM trace_events WHERE run_id = ?"
_INSERT: Final = "INSERT INTO trace_events (run_id, seq, kind, ts, call_id, data) VALUES (?, ?, ?, ?, ?, ?)"
_INSERT_NEW: Final = _INSERT + " ON CONFLICT (run_id, seq) DO NOTHING"
# A claim is a row of its own, never an event nor a run listed: it takes a run id with no event,
# or one whose earlier claim is older than the bound (its starter recorded nothing: it died).
_CLAIM: Final = """
INSERT INTO trace_claims (run_id, claimed_at)
SELECT ?, ? WHERE NOT EXISTS (SELECT 1 FROM trace_events WHERE run_id = ?)
ON CONFLICT (run_id) DO UPDATE SET claimed_at = excluded.claimed_at
WHERE trace_claims.claimed_at <= excluded.claimed_at - ?
"""
# The previous version claimed a run id with a row of trace_runs whose span is empty (started at
# +inf, last at -inf) until its first event: such a row is a claim made when first seen here.
_ADOPT_OLD_CLAIM: Final = """
INSERT INTO trace_claims (run_id, claimed_at)
SELECT ?, ? WHERE EXISTS (SELECT 1 FROM trace_runs WHERE run_id = ? AND started_at > last_at)
ON CONFLICT (run_id) DO NOTHING
"""
_SPAN_FROM_EVENTS: Final = """
INSERT INTO trace_runs (run_id, started_at, last_at)
SELECT run_id, min(ts), max(ts) FROM trace_events WHERE run_id = ? GROUP BY run_id
ON CONFLICT (run_id) DO UPDATE SET started_at = excluded.started_at, last_at = excluded.last_at
"""
_EVENTS: Final = "SELECT run_id, seq, kind, ts, call_id, data FROM trace_events WHERE run_id = ? ORDER BY seq"
_MAX_CHAR: Final = "\U0010ffff"


_seq = itemgetter(0)
"""An event record's number (the sort key of a call's records)."""


class SqliteTraceStore(ReadsOfRuns):
    """A :class:`~actionspace.trace.events.TraceStore` in one SQLite file.

    ``path`` is created (with its tables) if missing; its parent directory must exist.
    ``busy_timeout_s`` (seconds, default 10) bounds how long a call waits for another writer.
    ``claim_expiry_s`` (seconds, default :data:`~actionspace.trace.events.CLAIM_EXPIRY_S`): how
    long a run claim no event followed keeps the id taken; ``clock``: where claims read the time.
    Raises :class:`~actionspace.errors.ConfigurationError` for ``":memory:"`` and for a file written
    by a newer schema version.
    """

    defers_appends = True
    """``append_records`` returns without waiting for the file (see the module docstring)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout_s: float = 10.0,
        claim_expiry_s: float = CLAIM_EXPIRY_S,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        if str(path) in ("", ":memory:"):
            raise ConfigurationError(
                "SqliteTraceStore needs a file path; use memory:// for a store in memory"
            )
        self._claim_expiry_s = claim_expiry(claim_expiry_s)
        self._clock = clock
        self.path = Path(path)
        self._db = SqliteConnections(self.path, synchronous="NORMAL", busy_timeout_s=busy_timeout_s)
        try:
            self._db.init_schema(_SCHEMA, "trace_meta", "schema_version", SCHEMA_VERSION)
            add_run_tenants(self._db)
        except BaseException:
            self._db.close()
            raise
        self._group = GroupCommit.open(self.path, busy_timeout_s=busy_timeout_s)
        self._held: dict[str, list[Any]] = {}
        """Per run, the encoded rows of the calls appended since the writer's last transaction took
        them, flat: kind, ts, call id, data, then the next row's (the statements' parameters as
        they are bound, built by the appending threads, not while the writer is held)."""
        self._held_lock = threading.Lock()
        self._texts = PayloadTexts(encode_data)
        self._takes = Takes()  # the runs whose rows the writer took, for the reads of one run

    # -- the TraceStore protocol --------------------------------------------------------------

    def append_many(self, events: Sequence[TraceEvent]) -> None:
        """Write every event in one transaction: all of the batch or none of it.

        Raises ``ValueError`` (and writes nothing) when an event repeats a stored ``(run_id, seq)``.
        """
        if not events:
            return
        try:
            self._write(events, skip_existing=False)
        except sqlite3.IntegrityError as exc:
            raise ValueError(
                f"an event repeats a (run_id, seq) already stored; nothing of the batch was written: {exc}"
            ) from exc

    def append_records(self, run_id: str, records: Sequence[EventRecord]) -> None:
        """Append one call's records, numbering them after the run's last stored event.

        The numbers the caller proposed only fix the order: several processes may record into one
        run, and the store (inside its write transaction) is the only place that knows the next seq.
        Returns before the write: the records wait in this store until the file's writer commits
        them (see the module docstring), together with every call's records appended meanwhile.
        """
        if not records:
            return
        self._db.check_open()
        texts = self._texts
        kept = texts.kept
        values: list[Any] = []
        for _, kind, ts, call_id, data in sorted(records, key=_seq):
            # A payload whose text its maker wrote beside it (a durable write's: store_encoding.Texted)
            # is that text; one recorded by every call of a tool is encoded once (its kept text found
            # here, without a call); one made per call, encoded here.
            if type(data) is Texted:
                text = data.text
            elif kind in SHARED_KINDS:
                hit = kept.get(id(data))
                text = hit[1] if hit is not None and hit[0] is data else texts.text(data)
            else:
                text = encode_data(data)
            values += (
                kind if kind.isascii() else text_for_utf8(kind),
                ts,
                call_id if call_id is None or call_id.isascii() else text_for_utf8(call_id),
                text,
            )
        with self._held_lock:
            held = self._held.get(run_id)
            if held is None:
                self._held[run_id] = values
            else:
                held += values
            if len(self._held) > 1 or held is not None:
                return  # the operation writing them is deferred already
        self._group.defer(self._write_held)

    def _write_held(self, conn: sqlite3.Connection) -> None:
        """The writer's deferred operation: the rows of every call appended since the last one,
        each run's numbered once after its last stored event (one read per run, not per call)."""
        with self._held_lock:
            held, self._held = self._held, {}
            self._takes.take(held)
        self._insert_held(conn, held)

    @staticmethod
    def _insert_held(conn: sqlite3.Connection, held: dict[str, list[Any]]) -> None:
        for run_id, values in held.items():  # per run, in the order the calls appended them
            base = int(conn.execute(_NEXT_SEQ, (run_id,)).fetchone()[0])
            insert_held(conn, run_id, base, values)
            stamps = values[1::HELD_COLUMNS]
            touch_run(conn, run_id, min(stamps), max(stamps))

    def events(self, run_id: str) -> list[TraceEvent]:
        self._settle_runs((run_id,))
        rows = self._db.conn().execute(_EVENTS, (run_id,)).fetchall()
        return [_event(row) for row in rows]

    def runs(self, *, limit: int = 50, since: float | None = None) -> list[RunSummary]:
        """At most ``limit`` runs, the most recently active first (only those active at or after
        ``since``, when given). Raises ``ValueError`` for a ``limit`` that is not a positive int."""
        limit = runs_limit(limit)
        self._settle()
        rows = self._db.conn().execute(RUNS, (-math.inf if since is None else since, limit)).fetchall()
        return [_summary(row) for row in rows]

    def runs_after(
        self, after: tuple[float, str], *, limit: int = 50, since: float | None = None
    ) -> list[RunSummary]:
        """As :meth:`runs`, after the row ``(last_at, run_id)`` (see ``PagesRuns``)."""
        limit = runs_limit(limit)
        at, run_id = after
        self._settle()
        params = (-math.inf if since is None else since, at, at, run_id, limit)
        return [_summary(row) for row in self._db.conn().execute(RUNS_AFTER, params).fetchall()]

    def tenant_runs(
        self, tenant: str | None, *, limit: int = 50, after: tuple[float, str] | None = None
    ) -> list[RunSummary]:
        """As :meth:`runs` (:meth:`runs_after` with ``after``), of ``tenant``'s runs only, read through
        the tenant's index (see ``ListsTenantRuns``, and ``_sqlite_runs`` for where it is kept)."""
        limit = runs_limit(limit)
        self._settle()
        if tenant is not None and text_for_utf8(tenant) != tenant:
            return []  # an unpaired surrogate: no stored tenant holds one
        if tenant is not None:
            tenant = tenant.partition("\x00")[0]  # SQLite's JSON functions read a text up to U+0000
        if after is None:
            rows = self._db.conn().execute(TENANT_RUNS, (tenant, -math.inf, limit)).fetchall()
        else:
            params = (tenant, after[0], -math.inf, after[0], after[0], after[1], limit)
            rows = self._db.conn().execute(TENANT_RUNS_AFTER, params).fetchall()
        return [_summary(row) for row in rows]

    def next_seq(self, run_id: str) -> int:
        self._settle()
        row = self._db.conn().execute(_NEXT_SEQ, (run_id,)).fetchone()
        return int(row[0])

    def sync(self) -> None:
        """Commit the records appended before now, durably (fsync'd), and return once they are.

        The records a call appended wait for the writer's flusher (see the module docstring): a
        caller that must not go on before they are on disk (an approval request is filed only once
        what the call was judged on is stored) calls this. Raises what the write raised (the records
        are then not stored), and ``ValueError`` once closed.
        """
        self._db.check_open()
        self._group.run(self._write_held, durable=True)
        self._group.settle()  # the other stores' deferred writes on the file, in their order

    def close(self) -> None:
        """Close every connection this store opened; later calls raise ``ValueError``."""
        if not self._db.closed:
            self._group.close()
        self._db.close()

    def append_new(self, events: Sequence[TraceEvent]) -> int:
        """Write, in one transaction, the events whose ``(run_id, seq)`` is not stored yet.

        Returns how many were written; used by imports so that importing twice changes nothing.
        """
        if not events:
            return 0
        return self._write(events, skip_existing=True)

    def claim_run(self, run_id: str) -> bool:
        """True when ``run_id`` had no event and no live claim in the file, and is claimed now: one
        ``INSERT`` in the write transaction, which SQLite gives one process at a time, after the
        records this process appended are written (see ``ClaimsRuns``)."""
        self._settle()
        expiry = self._claim_expiry_s

        def claim(conn: sqlite3.Connection) -> bool:
            now = self._clock.time()  # read inside the transaction: claims are stamped in order
            conn.execute(_ADOPT_OLD_CLAIM, (run_id, now, run_id))
            return conn.execute(_CLAIM, (run_id, now, run_id, expiry)).rowcount == 1

        won: bool = self._group.run(claim, durable=False)
        return won

    def run_ids(self, prefix: str = "", *, limit: int | None = None) -> list[str]:
        """Run ids starting with ``prefix`` (case-sensitive), sorted; at most ``limit`` of them."""
        self._settle()
        rows = self._db.conn().execute(
            "SELECT run_id FROM trace_runs WHERE run_id >= ? AND run_id < ? ORDER BY run_id LIMIT ?",
            (prefix, prefix + _MAX_CHAR, -1 if limit is None else limit),
        )
        return [run_id for (run_id,) in rows]

    def schema_version(self) -> int:
        """The schema version recorded in the file."""
        row = self._db.conn().execute("SELECT value FROM trace_meta WHERE key = 'schema_version'").fetchone()
        return int(row[0])

    def __enter__(self) -> SqliteTraceStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SqliteTraceStore({str(self.path)!r})"

    # -- internals ----------------------------------------------------------------------------

    def _write(self, events: Sequence[TraceEvent], *, skip_existing: bool) -> int:
        for e in events:
            check_event(e.run_id, e.kind, e.ts)
        if self._held:
            # Records this process appended before are numbered first, as they came: the writer
            # commits a waiting operation ahead of deferred ones.
            self._settle()
        rows = [
            (e.run_id, e.seq, e.kind, e.ts, call_id_for_utf8(e.call_id), encode_data(e.data)) for e in events
        ]
        spans: dict[str, tuple[float, float]] = {}
        for e in events:
            first, last = spans.get(e.run_id, (e.ts, e.ts))
            spans[e.run_id] = (min(first, e.ts), max(last, e.ts))
        self._db.check_open()

        def write(conn: sqlite3.Connection) -> int:
            before = conn.total_changes
            conn.executemany(_INSERT_NEW if skip_existing else _INSERT, rows)
            written = conn.total_changes - before
            if skip_existing:
                # Skipped events may carry other timestamps than the stored ones: re-read the span.
                conn.executemany(_SPAN_FROM_EVENTS, [(rid,) for rid in spans])
            else:
                for rid, (first, last) in spans.items():
                    touch_run(conn, rid, first, last)
            return written

        count: int = self._group.run(write, durable=False)
        return count


class SqliteTraceReader(PartsOfRuns):
    """The trace in the SQLite file ``path``, read without writing anything: the read-only open.

    The existing file is opened without creating it (``mode=rw``) and with ``PRAGMA query_only``:
    no table is made, the journal mode stays, every write statement fails; the file and its folder
    are left byte for byte as they were. Raises StoreNotFoundError when the file does not exist or
    holds no trace (``no trace in …``), ConfigurationError for a newer schema, and
    ``sqlite3.DatabaseError`` for a file that is not a database. Appends raise ConfigurationError.
    """

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout_s: float = 10.0) -> None:
        self.path = Path(path)
        if not self.path.exists():
            raise StoreNotFoundError(f"no trace store at {self.path} (nothing has been recorded there yet)")
        uri = sqlite_reading_uri(self.path)
        self._conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
        self._lock, self._closed = threading.Lock(), False
        try:
            self._conn.execute("PRAGMA query_only = ON")
            self._conn.execute(f"PRAGMA busy_timeout = {max(0, int(busy_timeout_s * 1000))}")
            self._check()
        except BaseException:
            self._conn.close()
            raise

    def events(self, run_id: str) -> list[TraceEvent]:
        if text_for_utf8(run_id) != run_id:  # an unpaired surrogate: no stored run id holds one
            return []
        return [_event(row) for row in self._read(_EVENTS, (run_id,))]

    def runs(self, *, limit: int = 50, since: float | None = None) -> list[RunSummary]:
        """As :meth:`SqliteTraceStore.runs`."""
        rows = self._read(RUNS, (-math.inf if since is None else since, runs_limit(limit)))
        return [_summary(row) for row in rows]

    def run_ids(self, prefix: str = "", *, limit: int | None = None) -> list[str]:
        """Run ids starting with ``prefix`` (case-sensitive), sorted; at most ``limit`` of them."""
        if text_for_utf8(prefix) != prefix:
            return []
        sql = "SELECT run_id FROM trace_runs WHERE run_id >= ? AND run_id < ? ORDER BY run_id LIMIT ?"
        return [r[0] for r in self._read(sql, (prefix, prefix + _MAX_CHAR, -1 if limit is None else limit))]

    def next_seq(self, run_id: str) -> int:
        return 0 if text_for_utf8(run_id) != run_id else int(self._read(_NEXT_SEQ, (run_id,))[0][0])

    def append_many(self, events: Sequence[TraceEvent]) -> None:
        raise ConfigurationError(f"the trace store {self.path} is open for reading only")

    def close(self) -> None:
        """Close its connection (once no read holds it); a read after this raises ``StoreClosedError``."""
        with self._lock:
            self._closed = True
            self._conn.close()

    def __enter__(self) -> SqliteTraceReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _read(self, sql: str, params: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:  # one connection, shared by the threads of a reader
            self._closed and refuse_closed(self.path)
            rows: list[tuple[Any, ...]] = self._conn.execute(sql, params).fetchall()
            return rows

    def _pages(self, sql: str, params: tuple[object, ...], size: int) -> Iterator[list[tuple[Any, ...]]]:
        """The rows of ``sql``, ``size`` at a time; the connection is held for each page only."""
        with self._lock:
            self._closed and refuse_closed(self.path)
            cursor = self._conn.execute(sql, params)
        try:
            while True:
                with self._lock:
                    self._closed and refuse_closed(self.path)
                    rows = cursor.fetchmany(size)
                if not rows:
                    return
                yield rows
        finally:
            with self._lock:
                cursor.close()

    def _check(self) -> None:
        tables = {r[0] for r in self._read("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"trace_events", "trace_runs"} <= tables:
            raise StoreNotFoundError(f"no trace in {self.path} (nothing has been recorded there yet)")
        if "trace_meta" not in tables:
            return
        for (value,) in self._read("SELECT value FROM trace_meta WHERE key = 'schema_version'"):
            if not str(value).isdecimal() or int(value) > SCHEMA_VERSION:
                raise ConfigurationError(
                    f"{self.path} has schema version {value} (schema_version); this actionspace reads"
                    f" up to {SCHEMA_VERSION}; upgrade actionspace"
                )


def _event(row: tuple[str, int, str, float, str | None, str]) -> TraceEvent:
    """A row as its event: one another version wrote, or edited by hand, too (see ``_stored_rows``)."""
    return stored_event(*row)


def _summary(row: Any) -> RunSummary:
    """A run's row of ``RUNS`` as its summary."""
    run_id, started, last, count, calls, errors, finished = row
    if type(started) is not float or type(last) is not float:  # a row edited by hand: a time as text
        started, last = stored_ts(started), stored_ts(last)
    return RunSummary(
        run_id=run_id,
        started_at=started,
        last_at=last,
        events=count,
        calls=calls,
        errors=errors,
        finished=bool(finished),
    )
