"""PostgreSQL trace store: one trace shared by many runtime processes and hosts (DESIGN §10).

Events live in ``trace_events``, unique on ``(run_id, seq)``; ``trace_runs`` keeps each run's time
span so that listing the recent runs reads an index instead of every event. A batch and the span it
moves are written in one transaction, so readers see whole batches only.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Iterator, Sequence
from typing import Any, Final, LiteralString

import psycopg
from psycopg.types.json import Jsonb

from actionspace._unicode import text_for_postgres
from actionspace.errors import ConfigurationError, StoreNotFoundError
from actionspace.ledger.postgres import PostgresConnections, redacted
from actionspace.ledger.postgres_pool import READ_TIMEOUT_S, SETTLE_S
from actionspace.trace._postgres_runs import (
    CALL_EVENTS,
    HEADS,
    HEADS_MANY,
    RUNS,
    RUNS_AFTER,
    add_run_tenants,
    streamed_runs,
    tenant_runs_query,
)
from actionspace.trace._runs_events import PAGE_ROWS, RunEvents
from actionspace.trace._stored_rows import stored_event
from actionspace.trace.events import CLAIM_EXPIRY_S, EventRecord, RunSummary, TraceEvent, claim_expiry
from actionspace.trace.memory import runs_limit
from actionspace.trace.store_encoding import call_id_for_postgres, check_event, encode_for_postgres

__all__ = ["SCHEMA_VERSION", "PostgresTraceReader", "PostgresTraceStore"]

SCHEMA_VERSION: Final = 1
"""Version of the tables below; stored in ``trace_meta`` and checked on open."""

_SCHEMA: Final[tuple[LiteralString, ...]] = (
    """
    CREATE TABLE IF NOT EXISTS trace_meta (
        key   text PRIMARY KEY,
        value text NOT NULL
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS trace_events (
        run_id  text             NOT NULL,
        seq     bigint           NOT NULL,
        kind    text             NOT NULL,
        ts      double precision NOT NULL,
        call_id text,
        data    jsonb            NOT NULL,
        PRIMARY KEY (run_id, seq)
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS trace_runs (
        run_id     text             PRIMARY KEY,
        started_at double precision NOT NULL,
        last_at    double precision NOT NULL
    )
    """,
    "CREATE INDEX IF NOT EXISTS trace_runs_recent ON trace_runs (last_at DESC)",
    """
    CREATE TABLE IF NOT EXISTS trace_claims (
        run_id     text             PRIMARY KEY,
        claimed_at double precision NOT NULL
    )
    """,
)

_INSERT: Final = (
    "INSERT INTO trace_events (run_id, seq, kind, ts, call_id, data)"
    " SELECT * FROM unnest(%s::text[], %s::bigint[], %s::text[], %s::float8[], %s::text[], %s::jsonb[])"
)
_INSERT_NEW: Final = _INSERT + " ON CONFLICT (run_id, seq) DO NOTHING"
_LOCK_RUN: Final = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))"
_NEXT_SEQ: Final = "SELECT coalesce(max(seq) + 1, 0) AS next FROM trace_events WHERE run_id = %s"
# Run ids are sorted before the upsert so that two batches touching the same runs lock their
# trace_runs rows in the same order and cannot deadlock.
_TOUCH_RUNS: Final = """
INSERT INTO trace_runs (run_id, started_at, last_at)
SELECT * FROM unnest(%s::text[], %s::float8[], %s::float8[])
ON CONFLICT (run_id) DO UPDATE SET
    started_at = least(trace_runs.started_at, excluded.started_at),
    last_at    = greatest(trace_runs.last_at, excluded.last_at)
"""
# A claim is a row of its own, never an event nor a run listed: it takes a run id with no event,
# or one whose earlier claim is older than the bound (its starter recorded nothing: it died). The
# database's clock stamps claims, so hosts whose clocks differ agree on which claims expired.
_CLAIM: Final = """
INSERT INTO trace_claims (run_id, claimed_at)
SELECT %(run)s, extract(epoch FROM clock_timestamp())::float8
WHERE NOT EXISTS (SELECT 1 FROM trace_events WHERE run_id = %(run)s)
ON CONFLICT (run_id) DO UPDATE SET claimed_at = excluded.claimed_at
WHERE trace_claims.claimed_at <= excluded.claimed_at - %(expiry)s::float8
"""
# The previous version claimed a run id with a row of trace_runs whose span is empty (started at
# +inf, last at -inf) until its first event: such a row is a claim made when first seen here.
_ADOPT_OLD_CLAIM: Final = """
INSERT INTO trace_claims (run_id, claimed_at)
SELECT %(run)s, extract(epoch FROM clock_timestamp())::float8
WHERE EXISTS (SELECT 1 FROM trace_runs WHERE run_id = %(run)s AND started_at > last_at)
ON CONFLICT (run_id) DO NOTHING
"""
_SPAN_FROM_EVENTS: Final = """
INSERT INTO trace_runs (run_id, started_at, last_at)
SELECT run_id, min(ts), max(ts) FROM trace_events WHERE run_id = ANY(%s) GROUP BY run_id
ON CONFLICT (run_id) DO UPDATE SET started_at = excluded.started_at, last_at = excluded.last_at
"""
_RUNS: Final = RUNS
_RUNS_AFTER: Final = RUNS_AFTER
"""``_postgres_runs``'s listing of the recent runs (also narrowed there to one tenant's), and after a row."""
_COLUMNS: Final = ("run_id", "seq", "kind", "ts", "call_id", "data")
"""An event row's columns, in the order :func:`~actionspace.trace._stored_rows.stored_event` takes them."""
_EVENTS: Final = (
    "SELECT run_id, seq, kind, ts, call_id, data FROM trace_events WHERE run_id = %s ORDER BY seq"
)


class PostgresTraceStore:
    """A :class:`~actionspace.trace.events.TraceStore` in a PostgreSQL database.

    ``url`` is a libpq URL (``postgresql://user@host/db``); the tables are created if missing and
    may share the database with the ledger and approval stores. Raises
    :class:`~actionspace.errors.ConfigurationError` when the database cannot be reached within
    ``connect_timeout_s`` (seconds, default 10) or was written by a newer schema version.
    ``claim_expiry_s`` (seconds, default :data:`~actionspace.trace.events.CLAIM_EXPIRY_S`): how
    long a run claim no event followed keeps the id taken, by the database's clock.
    ``read_timeout_s`` (seconds, default 60; None: no bound): how long a statement waits for the
    server's answer before its connection is taken as cut (a network that stopped forwarding).
    ``settle_s`` (seconds, default 30): how long a write whose ``COMMIT`` got no answer is asked
    about before it is ``unknown_commit`` (``PostgresConnections.transaction_again``).
    """

    holds_nul = False
    """Its text columns (run id, kind) cannot hold U+0000: imports refuse such a file whole."""

    def __init__(
        self,
        url: str,
        *,
        connect_timeout_s: float = 10.0,
        claim_expiry_s: float = CLAIM_EXPIRY_S,
        read_timeout_s: float | None = READ_TIMEOUT_S,
        settle_s: float = SETTLE_S,
    ) -> None:
        self._claim_expiry_s = claim_expiry(claim_expiry_s)
        self._db = PostgresConnections(
            url,
            name="trace",
            connect_timeout_s=connect_timeout_s,
            read_timeout_s=read_timeout_s,
            settle_s=settle_s,
        )
        try:
            self._db.init_schema(
                _SCHEMA,
                meta_table="trace_meta",
                meta_key="schema_version",
                version=SCHEMA_VERSION,
                what="the trace store",
            )
            add_run_tenants(self._db)
        except BaseException:
            self._db.close()
            raise

    # -- the TraceStore protocol --------------------------------------------------------------

    def append_many(self, events: Sequence[TraceEvent]) -> None:
        """Write every event in one transaction: all of the batch or none of it.

        Raises ``ValueError`` (and writes nothing) when an event repeats a stored ``(run_id, seq)``.
        """
        if events:
            self._write(_rows(events), skip_existing=False)

    def events(self, run_id: str) -> list[TraceEvent]:
        """Every event of ``run_id``, ordered by ``seq``."""
        with self._db.connection() as conn:
            rows = conn.execute(_EVENTS, (run_id,)).fetchall()
        return [stored_event(*(row[k] for k in _COLUMNS), parsed=True) for row in rows]

    def runs(self, *, limit: int = 50, since: float | None = None) -> list[RunSummary]:
        """At most ``limit`` runs, the most recently active first (only those active at or after
        ``since``, when given). Raises ``ValueError`` for a ``limit`` that is not a positive int."""
        limit = runs_limit(limit)
        with self._db.connection() as conn:
            rows = conn.execute(_RUNS, (-math.inf if since is None else since, limit)).fetchall()
        return [_summary(row) for row in rows]

    def runs_after(
        self, after: tuple[float, str], *, limit: int = 50, since: float | None = None
    ) -> list[RunSummary]:
        """As :meth:`runs`, after the row ``(last_at, run_id)`` (see ``PagesRuns``)."""
        limit = runs_limit(limit)
        at, run_id = after
        with self._db.connection() as conn:
            params = (-math.inf if since is None else since, at, at, run_id, limit)
            rows = conn.execute(_RUNS_AFTER, params).fetchall()
        return [_summary(row) for row in rows]

    def tenant_runs(
        self, tenant: str | None, *, limit: int = 50, after: tuple[float, str] | None = None
    ) -> list[RunSummary]:
        """As :meth:`runs` (:meth:`runs_after` with ``after``), of ``tenant``'s runs only, read through
        the tenant's index (see ``ListsTenantRuns``, and ``_postgres_runs`` for where it is kept)."""
        limit = runs_limit(limit)
        if tenant is not None and text_for_postgres(tenant) != tenant:
            return []  # U+0000 or an unpaired surrogate: no stored tenant holds one
        params: list[Any] = [] if tenant is None else [tenant]
        params.append(-math.inf)
        if after is not None:
            params += [after[0], after[0], after[0], after[1]]
        with self._db.connection() as conn:
            query = tenant_runs_query(_RUNS, tenant, after is not None)
            rows = conn.execute(query, (*params, limit)).fetchall()
        return [_summary(row) for row in rows]

    def heads(self, run_id: str) -> list[TraceEvent]:
        """The run's ``run_started`` and ``run_finished`` events, in order, read through the partial
        index on them: what a tenant check or a listing's row reads, whatever the run's length."""
        if text_for_postgres(run_id) != run_id:  # no stored run id holds U+0000 nor a lone surrogate
            return []
        with self._db.connection() as conn:
            rows = conn.execute(HEADS, (run_id,)).fetchall()
        return [stored_event(*(row[k] for k in _COLUMNS), parsed=True) for row in rows]

    def heads_many(self, run_ids: Sequence[str]) -> dict[str, list[TraceEvent]]:
        """:meth:`heads` of several runs in one query (a page of a run listing)."""
        out: dict[str, list[TraceEvent]] = {run_id: [] for run_id in run_ids}
        stored = [run_id for run_id in out if text_for_postgres(run_id) == run_id]
        if stored:
            with self._db.connection() as conn:
                rows = conn.execute(HEADS_MANY, (stored,)).fetchall()
            for row in rows:
                out[row["run_id"]].append(stored_event(*(row[k] for k in _COLUMNS), parsed=True))
        return out

    def call_events(self, run_id: str, call_ids: Collection[str], kinds: Collection[str]) -> list[TraceEvent]:
        """The run's events of ``call_ids`` of ``kinds``, in order, and no others read
        (``_call_events.ReadsCallEvents``)."""
        ids = [c for c in dict.fromkeys(call_ids) if text_for_postgres(c) == c]
        wanted = [k for k in dict.fromkeys(kinds) if text_for_postgres(k) == k]
        if not ids or not wanted or text_for_postgres(run_id) != run_id:
            return []  # no stored id holds U+0000 nor an unpaired surrogate
        with self._db.connection() as conn:
            rows = conn.execute(CALL_EVENTS, (run_id, ids, wanted)).fetchall()
        return [stored_event(*(row[k] for k in _COLUMNS), parsed=True) for row in rows]

    def events_of_runs(self, run_ids: Sequence[str], *, page: int = PAGE_ROWS) -> Iterator[RunEvents]:
        """``_runs_events.ReadsManyRuns``: one statement, streamed ``page`` rows at a time."""
        return streamed_runs(self._db, run_ids, page)

    def next_seq(self, run_id: str) -> int:
        """The next free ``seq`` of ``run_id`` (0 for a new run)."""
        with self._db.connection() as conn:
            row = conn.execute(_NEXT_SEQ, (run_id,)).fetchone()
        return int(row["next"]) if row is not None else 0

    def close(self) -> None:
        """Close the connection pool; later calls raise ``ValueError``."""
        self._db.close()

    # -- optional capabilities ----------------------------------------------------------------

    def append_records(self, run_id: str, records: Sequence[EventRecord]) -> None:
        """Append one call's records, numbering them after the run's last stored event.

        The numbers the caller proposed only fix the order: several processes may record into one
        run, and the store is the only place that knows the next seq. Writers of one run take a
        transaction-scoped advisory lock on it, so they number one after another and none is lost.
        Raises ``ValueError`` (nothing written) when a writer at a number of its own (a run's end)
        took one of theirs meanwhile: numbered again, they are stored after it.
        """
        if not records:
            return
        check_event(run_id, "records", 0.0, postgres=True)
        ordered = sorted(records, key=lambda r: r[0])
        first, last = min(r[2] for r in ordered), max(r[2] for r in ordered)

        def append(conn: Any) -> None:
            conn.execute(_LOCK_RUN, (run_id,))
            row = conn.execute(_NEXT_SEQ, (run_id,)).fetchone()
            base = int(row["next"]) if row is not None else 0
            columns: list[list[Any]] = [
                [run_id] * len(ordered),
                [base + i for i in range(len(ordered))],
                [text_for_postgres(r[1]) for r in ordered],
                [r[2] for r in ordered],
                [call_id_for_postgres(r[3]) for r in ordered],
                [Jsonb(dict(r[4]), dumps=encode_for_postgres) for r in ordered],
            ]
            conn.execute(_INSERT, columns)
            conn.execute(_TOUCH_RUNS, ([run_id], [first], [last]))

        try:  # a session lost under it (a restart), or under its commit: see ``transaction_again``
            self._db.transaction_again(append)
        except psycopg.errors.UniqueViolation as exc:  # a writer at a chosen number (a run's end)
            raise ValueError(f"a record's number was taken meanwhile; nothing was written: {exc}") from exc

    def append_new(self, events: Sequence[TraceEvent]) -> int:
        """Write, in one transaction, the events whose ``(run_id, seq)`` is not stored yet.

        Returns how many were written; used by imports so that importing twice changes nothing.
        """
        if not events:
            return 0
        return self._write(_rows(events), skip_existing=True)

    def claim_run(self, run_id: str) -> bool:
        """True when ``run_id`` had no event and no live claim in the database, and is claimed now
        (see ``ClaimsRuns``): one transaction holding the run's advisory lock, so that it waits for
        the run's writers and other claims, and whose upsert the primary key of ``trace_claims``
        makes one winner of."""
        with self._db.transaction() as conn:
            conn.execute(_LOCK_RUN, (run_id,))
            conn.execute(_ADOPT_OLD_CLAIM, {"run": run_id})
            return conn.execute(_CLAIM, {"run": run_id, "expiry": self._claim_expiry_s}).rowcount == 1

    def run_ids(self, prefix: str = "", *, limit: int | None = None) -> list[str]:
        """Run ids starting with ``prefix`` (case-sensitive), sorted; at most ``limit`` of them."""
        with self._db.connection() as conn:
            rows = conn.execute(
                'SELECT run_id FROM trace_runs WHERE starts_with(run_id, %s) ORDER BY run_id COLLATE "C"'
                " LIMIT %s",
                (prefix, limit),
            ).fetchall()
        return [row["run_id"] for row in rows]

    def __enter__(self) -> PostgresTraceStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PostgresTraceStore({redacted(self._db.url)!r})"

    # -- internals ----------------------------------------------------------------------------

    def _write(self, rows: Sequence[_Row], *, skip_existing: bool) -> int:
        for run_id, _, kind, ts, _, _ in rows:
            check_event(run_id, kind, ts, postgres=True)
        spans: dict[str, tuple[float, float]] = {}
        for run_id, _, _, ts, _, _ in rows:
            first, last = spans.get(run_id, (ts, ts))
            spans[run_id] = (min(first, ts), max(last, ts))
        run_ids = sorted(spans)
        columns = [list(column) for column in zip(*rows, strict=True)]
        columns[4] = [call_id_for_postgres(call_id) for call_id in columns[4]]
        columns[5] = [Jsonb(dict(data), dumps=encode_for_postgres) for data in columns[5]]

        def write(conn: Any) -> int:
            written = int(conn.execute(_INSERT_NEW if skip_existing else _INSERT, columns).rowcount)
            if skip_existing:
                # Skipped events may carry other timestamps than the stored ones: re-read the span.
                conn.execute(_SPAN_FROM_EVENTS, (run_ids,))
            else:
                conn.execute(
                    _TOUCH_RUNS, (run_ids, [spans[r][0] for r in run_ids], [spans[r][1] for r in run_ids])
                )
            return written

        try:  # a session lost under it, or under its commit: see ``transaction_again``
            return self._db.transaction_again(write)
        except psycopg.errors.UniqueViolation as exc:
            raise ValueError(
                f"an event repeats a (run_id, seq) already stored; nothing of the batch was written: {exc}"
            ) from exc


class PostgresTraceReader:
    """The trace in the PostgreSQL database ``url`` names, read without writing: the read-only open.

    No DDL; every query runs in a ``READ ONLY`` transaction. Raises StoreNotFoundError when the
    database holds no trace (``no trace in …``), ConfigurationError when it cannot be reached within
    ``connect_timeout_s`` (seconds, default 10) or was written by a newer schema version. Appends
    raise ConfigurationError.
    """

    def __init__(self, url: str, *, connect_timeout_s: float = 10.0) -> None:
        self._db = PostgresConnections(
            url, name="trace-read", min_size=1, max_size=1, connect_timeout_s=connect_timeout_s
        )
        try:
            self._check()
        except BaseException:
            self._db.close()
            raise

    def events(self, run_id: str) -> list[TraceEvent]:
        if text_for_postgres(run_id) != run_id:  # no stored run id holds U+0000 nor a lone surrogate
            return []
        return [stored_event(*(r[k] for k in _COLUMNS), parsed=True) for r in self._read(_EVENTS, (run_id,))]

    def runs(self, *, limit: int = 50, since: float | None = None) -> list[RunSummary]:
        """As :meth:`PostgresTraceStore.runs`."""
        rows = self._read(_RUNS, (-math.inf if since is None else since, runs_limit(limit)))
        return [_summary(r) for r in rows]

    def run_ids(self, prefix: str = "", *, limit: int | None = None) -> list[str]:
        """Run ids starting with ``prefix`` (case-sensitive), sorted; at most ``limit`` of them."""
        if text_for_postgres(prefix) != prefix:
            return []
        sql: LiteralString = (
            'SELECT run_id FROM trace_runs WHERE starts_with(run_id, %s) ORDER BY run_id COLLATE "C" LIMIT %s'
        )
        return [r["run_id"] for r in self._read(sql, (prefix, limit))]

    def next_seq(self, run_id: str) -> int:
        if text_for_postgres(run_id) != run_id:
            return 0
        return int(self._read(_NEXT_SEQ, (run_id,))[0]["next"])

    def heads(self, run_id: str) -> list[TraceEvent]:
        """As :meth:`PostgresTraceStore.heads`: the run's head events alone, through the partial index
        on them (a tenant check or a listing's row reads two rows, not the run)."""
        if text_for_postgres(run_id) != run_id:
            return []
        return [stored_event(*(r[k] for k in _COLUMNS), parsed=True) for r in self._read(HEADS, (run_id,))]

    def heads_many(self, run_ids: Sequence[str]) -> dict[str, list[TraceEvent]]:
        """:meth:`heads` of several runs in one query (a page of a run listing)."""
        out: dict[str, list[TraceEvent]] = {run_id: [] for run_id in run_ids}
        stored = [run_id for run_id in out if text_for_postgres(run_id) == run_id]
        for row in self._read(HEADS_MANY, (stored,)) if stored else ():
            out[row["run_id"]].append(stored_event(*(row[k] for k in _COLUMNS), parsed=True))
        return out

    def events_of_runs(self, run_ids: Sequence[str], *, page: int = PAGE_ROWS) -> Iterator[RunEvents]:
        """As :meth:`PostgresTraceStore.events_of_runs` (its statement), in a ``READ ONLY`` transaction."""
        return streamed_runs(self._db, run_ids, page, read_only=True)

    def append_many(self, events: Sequence[TraceEvent]) -> None:
        raise ConfigurationError(f"the trace store {redacted(self._db.url)} is open for reading only")

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> PostgresTraceReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _read(self, sql: LiteralString, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        with self._db.transaction() as conn:
            conn.execute("SET TRANSACTION READ ONLY")
            return conn.execute(sql, params).fetchall()

    def _check(self) -> None:
        found = self._read(
            "SELECT to_regclass('trace_events') IS NOT NULL AND to_regclass('trace_runs') IS NOT NULL AS ok,"
            " to_regclass('trace_meta') IS NOT NULL AS meta"
        )[0]
        if not found["ok"]:
            raise StoreNotFoundError(
                f"no trace in {redacted(self._db.url)} (nothing has been recorded there yet)"
            )
        if not found["meta"]:
            return
        for row in self._read("SELECT value FROM trace_meta WHERE key = 'schema_version'"):
            if not str(row["value"]).isdecimal() or int(row["value"]) > SCHEMA_VERSION:
                raise ConfigurationError(
                    f"{redacted(self._db.url)} has schema version {row['value']} (schema_version); this"
                    f" actionspace reads up to {SCHEMA_VERSION}; upgrade actionspace"
                )


_Row = tuple[str, int, str, float, "str | None", Any]


def _rows(events: Iterable[TraceEvent]) -> list[_Row]:
    return [(e.run_id, e.seq, e.kind, e.ts, e.call_id, e.data) for e in events]


def _summary(row: Any) -> RunSummary:
    """A run's row of ``_RUNS`` as its summary."""
    return RunSummary(
        run_id=row["run_id"],
        started_at=row["started_at"],
        last_at=row["last_at"],
        events=row["events"],
        calls=row["calls"],
        errors=row["errors"],
        finished=bool(row["finished"]),
    )
