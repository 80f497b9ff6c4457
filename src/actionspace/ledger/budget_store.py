"""Budget meters kept in the database every process of a deployment shares.

A :class:`~actionspace.policy.budget.Meter` in memory is per process: two processes doubled a
principal's budget, and a restart reset it. Here the usage of each run and of each principal
(id and tenant) is a row of ``budget_usage``; admitting a call reads the applicable rows, checks
every budget and adds the reservation in one write transaction, so concurrent processes cannot
both spend the last unit. Settling adds the difference between what was reserved and what the
call used.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Final, TypeVar

from actionspace.errors import ActionError
from actionspace.policy.budget import (
    ZERO,
    Budgets,
    Meter,
    Reservation,
    Usage,
    _drawn,
    _take,
    _usage,
    _vector,
)

__all__ = ["PostgresMeter", "SqliteMeter", "open_meter"]

_SQLITE_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS budget_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS budget_usage (
    scope TEXT PRIMARY KEY,
    calls REAL NOT NULL,
    items REAL NOT NULL,
    bytes REAL NOT NULL,
    money REAL NOT NULL
)
"""
SCHEMA_VERSION: Final = 1
T = TypeVar("T")


def _run_key(run_id: str) -> str:
    return f"run:{run_id}"


def _principal_key(principal: tuple[str, str | None]) -> str:
    """``principal:{tenant}:{id}``, the tenant with ``%`` and ``:`` percent-escaped (so the first
    ``:`` after it ends it) and None spelled empty; the empty tenant, another tenant than None
    (as for the meter in memory and for what a tenant may see), is spelled ``%``, which no
    escaped tenant is. Every other tenant without ``%`` or ``:`` keeps the spelling it always had.
    """
    pid, tenant = principal
    if tenant is None:
        return f"principal::{pid}"
    escaped = tenant.replace("%", "%25").replace(":", "%3A") if tenant else "%"
    return f"principal:{escaped}:{pid}"


class _StoredMeter(Meter):
    """A meter whose vectors live in a database (subclasses give the SQL and the transaction)."""

    _placeholder = "?"
    _lock_rows = ""
    """Appended to the reads of an admission (SQLite's write transaction already excludes others)."""

    def _write(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def _read(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def _transact(self, work: Callable[[Any], T]) -> T:
        """``work(conn)`` inside one write transaction; its result."""
        with self._write() as conn:
            return work(conn)

    def _row(self, conn: Any, scope: str, *, lock: bool = False) -> list[float]:
        p = self._placeholder
        sql = f"SELECT calls, items, bytes, money FROM budget_usage WHERE scope = {p}"
        row = conn.execute(sql + (self._lock_rows if lock else ""), (scope,)).fetchone()
        if row is None:
            return [0, 0, 0, 0.0]
        values = list(row.values()) if isinstance(row, dict) else list(row)
        return [float(v) for v in values]

    def _add(self, conn: Any, scope: str, delta: tuple[float, float, float, float]) -> None:
        p = self._placeholder
        conn.execute(
            f"INSERT INTO budget_usage (scope, calls, items, bytes, money) VALUES ({p}, {p}, {p}, {p}, {p})"
            " ON CONFLICT (scope) DO UPDATE SET calls = budget_usage.calls + excluded.calls,"
            " items = budget_usage.items + excluded.items, bytes = budget_usage.bytes + excluded.bytes,"
            " money = budget_usage.money + excluded.money",
            (scope, *delta),
        )

    def used(self, *, run_id: str | None = None, principal: tuple[str, str | None] | None = None) -> Usage:
        if run_id is None and principal is None:
            return ZERO
        scope = _run_key(run_id) if run_id is not None else _principal_key(principal)  # type: ignore[arg-type]
        with self._read() as conn:
            return _usage(self._row(conn, scope))

    def remaining(self, run_id: str | None, principal: tuple[str, str | None]) -> dict[str, float]:
        with self._read() as conn:
            run = self._row(conn, _run_key(run_id)) if run_id is not None else None
            return self._remaining(run, self._row(conn, _principal_key(principal)))

    def admit(
        self, run_id: str, principal: tuple[str, str | None], amount: Usage
    ) -> Reservation | ActionError:
        keys = (_run_key(run_id), _principal_key(principal))
        need = _vector(amount)
        drawn = _drawn(run_id, principal, need)
        extra = (need[0] - drawn[0], need[1] - drawn[1], need[2] - drawn[2], need[3] - drawn[3])

        def reserve(conn: Any) -> Reservation | ActionError:
            run = self._row(conn, keys[0], lock=True)
            shared = self._row(conn, keys[1], lock=True)
            refused = self._check(run, shared, amount, list(extra))
            if refused is not None:
                return refused
            remaining = self._remaining(run, shared)
            if any(extra):
                for key in keys:
                    self._add(conn, key, extra)
            return Reservation(run, shared, amount, remaining, keys=keys, scope=(run_id, principal))

        reserved = self._transact(reserve)
        if isinstance(reserved, Reservation):  # committed: what it drew is no longer held
            _take(drawn)
        return reserved

    def settle(self, reservation: Reservation, actual: Usage) -> None:
        if reservation.keys is None:
            super().settle(reservation, actual)
            return
        reserved, spent = _vector(reservation.amount), _vector(actual)
        delta = (
            spent[0] - reserved[0],
            spent[1] - reserved[1],
            spent[2] - reserved[2],
            spent[3] - reserved[3],
        )
        if not any(delta):
            return
        keys = reservation.keys

        def add(conn: Any) -> None:
            for key in keys:
                self._add(conn, key, delta)

        self._transact(add)

    def forget_run(self, run_id: str) -> None:
        sql = f"DELETE FROM budget_usage WHERE scope = {self._placeholder}"
        self._transact(lambda conn: conn.execute(sql, (_run_key(run_id),)))


class SqliteMeter(_StoredMeter):
    """Usage in the SQLite file shared with the ledger (table ``budget_usage``).

    Admissions and settlements go through the file's writer, shared with the ledger: they wait
    for the WAL write, not for an fsync (a power loss may forget the latest usage).
    """

    def __init__(self, budgets: Budgets, path: str | Path, *, busy_timeout_s: float = 30.0) -> None:
        super().__init__(budgets)
        from actionspace.ledger.sqlite import GroupCommit, SqliteConnections

        self._db = SqliteConnections(path, synchronous="NORMAL", busy_timeout_s=busy_timeout_s)
        try:
            self._db.init_schema(_SQLITE_SCHEMA, "budget_meta", "schema_version", SCHEMA_VERSION)
        except BaseException:
            self._db.close()
            raise
        self._group = GroupCommit.open(path, busy_timeout_s=busy_timeout_s)

    def _transact(self, work: Callable[[Any], T]) -> T:
        self._db.check_open()
        result: T = self._group.run(work, durable=False)
        return result

    @contextmanager
    def _read(self) -> Iterator[Any]:
        yield self._db.conn()

    def close(self) -> None:
        if not self._db.closed:
            self._group.close()
        self._db.close()


class PostgresMeter(_StoredMeter):
    """Usage in PostgreSQL (table ``budget_usage``), rows locked while a call is admitted."""

    _placeholder = "%s"
    _lock_rows = " FOR UPDATE"

    def __init__(self, budgets: Budgets, url: str, *, connect_timeout_s: float = 10.0) -> None:
        super().__init__(budgets)
        from actionspace.ledger.postgres import PostgresConnections

        self._db = PostgresConnections(url, name="budgets", max_size=4, connect_timeout_s=connect_timeout_s)
        try:
            self._db.init_schema(
                (
                    "CREATE TABLE IF NOT EXISTS budget_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
                    "CREATE TABLE IF NOT EXISTS budget_usage (scope TEXT PRIMARY KEY,"
                    " calls DOUBLE PRECISION NOT NULL, items DOUBLE PRECISION NOT NULL,"
                    " bytes DOUBLE PRECISION NOT NULL, money DOUBLE PRECISION NOT NULL)",
                ),
                meta_table="budget_meta",
                meta_key="schema_version",
                version=SCHEMA_VERSION,
                what="the budget meters",
            )
        except BaseException:
            self._db.close()
            raise

    @contextmanager
    def _write(self) -> Iterator[Any]:
        with self._db.transaction() as conn:
            # rows that do not exist yet cannot be locked: a transaction-scoped advisory lock per
            # deployment serializes the first admissions of a scope
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('actionspace.budget_usage'))")
            yield conn

    def _read(self) -> AbstractContextManager[Any]:
        return self._db.connection()

    def close(self) -> None:
        self._db.close()


def open_meter(url: str, budgets: Budgets) -> Meter:
    """The meter for ``budgets`` that the store URL names: in memory, SQLite or PostgreSQL."""
    from actionspace.ledger.open import scheme_of, sqlite_file

    scheme = scheme_of(url)
    if scheme == "memory":
        return Meter(budgets)
    if scheme == "sqlite":
        return SqliteMeter(budgets, sqlite_file(url))
    return PostgresMeter(budgets, url)
