"""Budget meters kept in the database every process of a deployment shares.

A :class:`~actionspace.policy.budget.Meter` in memory is per process: two processes doubled a
principal's budget, and a restart reset it. Here the usage of each run and of each principal
(id and tenant) is a row of ``budget_usage``; admitting a call reads the applicable rows, checks
every budget and adds the reservation in one write transaction, so concurrent processes cannot
both spend the last unit. Settling adds the difference between what was reserved and what the
call used, once: it deletes the reservation's row, and only the settle that deleted it changes the
usage, so copies of a reservation in forked processes never charge it twice.

Each reservation is also a row of ``budget_reservations`` naming its owner: one meter of one
process, registered in ``budget_owners`` with its host, its pid and that process's start time, and
a lease its timer renews (every third of ``lease_s``). A process killed between admitting a call
and settling it leaves its reservation behind; :meth:`~_StoredMeter.reclaim` (run when a meter
opens, on every renewal and before refusing a call) settles the reservations of an owner that is
provably gone — on this host, its process (pid and start time) no longer runs; from another host,
its lease ran out — at what the ledger says happened: a call the ledger shows dispatched or beyond
(or a call it does not track, such as a read) stays charged, without the observation bytes nobody
was shown; a call that never reached dispatch is freed. An owner that only stalled past its lease
and settles later settles exactly: its rows keep what was charged for them.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Final, TypeVar

from actionspace.errors import ActionError
from actionspace.ledger import budget_owners as owners
from actionspace.ledger._budget_forks import follow_forks
from actionspace.ledger._budget_reclaim import reclaim_gone, values
from actionspace.ledger._budget_rows import (
    PG_USAGE_TABLES,
    SQLITE_SCHEMA,
    add_usage,
    counts_in_run,
    forget_run,
    insert_row,
    lower_row,
    run_usage,
    settle_rows,
    usage_row,
    whole_run_usage,
)
from actionspace.ledger._budget_rows import principal_key as _principal_key
from actionspace.ledger._budget_rows import run_key as _run_key
from actionspace.ledger.budget_owners import LEASE_S, PG_OWNER_TABLES
from actionspace.policy._budget_usage import ZERO, Usage, admissible, as_usage, vector
from actionspace.policy.budget import (
    Budgets,
    Meter,
    Reservation,
    _capped,
    _draw_on,
    _held_if_sent,
    _holding,
    _refill,
    _refilled,
    _take,
)

__all__ = ["PostgresMeter", "SqliteMeter", "open_meter"]

SCHEMA_VERSION: Final = 1
"""Unchanged by the owner and reservation tables: they are only added, and a meter that does not
know them still counts correctly (its reservations are only never reclaimed)."""
T = TypeVar("T")
Vector = tuple[float, float, float, float]


def _negated(usage: Usage) -> Vector:
    return (-usage.calls, -usage.items, -usage.bytes, -usage.money)


class _StoredMeter(Meter):
    """A meter whose vectors live in a database (subclasses give the SQL and the transaction)."""

    _placeholder = "?"
    _lock_rows = ""
    """Appended to the reads of an admission (SQLite's write transaction already excludes others)."""
    _now_sql = "(julianday('now') - 2440587.5) * 86400.0"
    """The database's clock, in seconds since the epoch: leases of every host are read on it."""
    _collate = ""
    """The collation in which an index on ``scope`` orders it by bytes (SQLite's key: ``BINARY``)."""

    def __init__(self, budgets: Budgets, *, lease_s: float) -> None:
        super().__init__(budgets)
        if not lease_s > 0:
            raise ValueError(f"lease_s must be > 0, got {lease_s!r}")
        self._lease_s, self._host = lease_s, owners.this_host()
        self._holds = threading.RLock()
        """Held while a hold is drawn on, refilled or settled, and while a settle claims its
        reservations, so none of these reads a hold another thread is changing."""
        self._identify()
        self._renew_due = self._closed = False
        """``_renew_due``: a forked child renews its lease from its first reservation on."""
        follow_forks(self)

    def _identify(self) -> None:
        """Take an owner identity of this process: a new id, its pid and start time, a lease timer."""
        self._owner = uuid.uuid4().hex
        self._pid = os.getpid()
        self._start = owners.started_of(self._pid) if self._host else ""
        self._swept = 0.0
        self._renewal = owners.Renewal(self, self._lease_s / 3)

    def after_fork(self) -> None:
        """In a child forked after this meter was created: reserve under an owner of its own, so
        that its parent never takes the child's reservations for its own and the child's death is
        seen (the lock a thread of the parent may have held is new); its lease is renewed from its
        first reservation on."""
        self._lock, self._holds = threading.Lock(), threading.RLock()
        self._identify()
        self._renew_due = not self._closed

    def _opened(self) -> None:
        """Register this meter, reclaim for the dead, start renewing (the schema exists)."""
        self.renew()
        self._renewal.start()

    def _start_renewal(self) -> None:
        with self._lock:
            due, self._renew_due = self._renew_due, False
        if due:
            self._renewal.start()

    def _write(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def _read(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def _transact(self, work: Callable[[Any], T]) -> T:
        """``work(conn)`` inside one write transaction; its result."""
        with self._write() as conn:
            return work(conn)

    def _ledger_state(self, conn: Any, key: str) -> str | None:
        """The ledger's state of ``key`` (None: no entry); raises when the store has no ledger."""
        row = conn.execute(
            f"SELECT state FROM ledger_entries WHERE key = {self._placeholder}", (key,)
        ).fetchone()
        return None if row is None else str(values(row)[0])

    def _row(self, conn: Any, scope: str, *, lock: bool = False) -> list[float]:
        return usage_row(conn, self._placeholder, scope, self._lock_rows if lock else "")

    def _add(self, conn: Any, scope: str, delta: Vector) -> None:
        add_usage(conn, self._placeholder, scope, delta)

    def _register(self, conn: Any) -> None:
        """Record (or renew) this meter's registration and lease."""
        p = self._placeholder
        conn.execute(
            f"INSERT INTO budget_owners (owner, host, pid, started, expires)"
            f" VALUES ({p}, {p}, {p}, {p}, {self._now_sql} + {p})"
            " ON CONFLICT (owner) DO UPDATE SET expires = excluded.expires",
            (self._owner, self._host, self._pid, self._start, self._lease_s),
        )

    def used(self, *, run_id: str | None = None, principal: tuple[str, str | None] | None = None) -> Usage:
        p = self._placeholder
        with self._read() as conn:
            if run_id is not None and principal is not None:
                return as_usage(run_usage(conn, p, run_id, principal))
            if run_id is not None:
                return as_usage(whole_run_usage(conn, p, run_id, self._collate))
            return ZERO if principal is None else as_usage(self._row(conn, _principal_key(principal)))

    def remaining(self, run_id: str | None, principal: tuple[str, str | None]) -> dict[str, float]:
        with self._read() as conn:
            run = run_usage(conn, self._placeholder, run_id, principal) if run_id is not None else None
            return self._remaining(run, self._row(conn, _principal_key(principal)))

    def admit(
        self,
        run_id: str,
        principal: tuple[str, str | None],
        amount: Usage,
        *,
        key: str | None = None,
        if_sent: Usage | None = None,
    ) -> Reservation | ActionError:
        # one at a time while a hold is drawn on: what it still holds is read, written, then taken
        drawing = self._holds if _holding(run_id, principal) is not None else contextlib.nullcontext()
        with drawing:
            reserved = self._admit(run_id, principal, amount, key, if_sent)
            if isinstance(reserved, ActionError) and self._sweep_due() and self.reclaim():
                reserved = self._admit(run_id, principal, amount, key, if_sent)
        return reserved

    def _admit(
        self,
        run_id: str,
        principal: tuple[str, str | None],
        amount: Usage,
        key: str | None,
        if_sent: Usage | None,
    ) -> Reservation | ActionError:
        keys = (_run_key(run_id, principal), _principal_key(principal))
        need, amount = admissible(amount, self._limited)
        sent = vector(if_sent) if if_sent is not None else (need[0], need[1], 0, need[3])
        group = _holding(run_id, principal)
        if group is not None and group.ledger_key is not None:
            key = group.ledger_key  # a member is sent exactly when its group is
        token = uuid.uuid4().hex  # a zero estimate too: its settle may charge, once, what it used
        took: list[tuple[list[float], list[float] | None]] = []
        """What it drew on ``group`` and the hold's charge if sent then, as its transaction saw."""

        def reserve(conn: Any) -> Reservation | ActionError:
            took.clear()
            # a hold whose run was forgotten since holds nothing of the run's row
            live = group is not None and (
                group.token is None or counts_in_run(conn, self._placeholder, group.token)
            )
            drawn = _draw_on(group if live else None, need)
            hold = group if any(drawn) else None
            held_sent = None if hold is None else _held_if_sent(hold, drawn, sent)
            extra = (need[0] - drawn[0], need[1] - drawn[1], need[2] - drawn[2], need[3] - drawn[3])
            run = run_usage(conn, self._placeholder, run_id, principal, self._lock_rows)
            shared = self._row(conn, keys[1], lock=True)
            refused = self._check(run, shared, amount, list(extra))
            if refused is not None:
                return refused
            remaining = self._remaining(run, shared)
            if any(extra):
                for scope in keys:
                    self._add(conn, scope, extra)
            self._register(conn)
            insert_row(conn, self._placeholder, token, self._owner, keys, key, need, sent)
            if hold is not None and hold.token is not None:  # what it drew is now this call's
                lower_row(conn, self._placeholder, hold.token, drawn, held_sent)
            took.append((drawn, held_sent))
            return Reservation(
                run,
                shared,
                amount,
                remaining,
                keys=keys,
                scope=(run_id, principal),
                token=token,
                drawn=None if hold is None else as_usage(drawn),
                drawn_from=hold,
                issuer=self,
            )

        reserved = self._transact(reserve)
        if isinstance(reserved, Reservation):  # committed: what it drew is no longer held
            _take(*took[-1])
            if self._renew_due:
                self._start_renewal()
        return reserved

    def settle(self, reservation: Reservation, actual: Usage) -> None:
        self._own((reservation,))
        if not self._claim((reservation,)):
            return
        try:
            self._transact(lambda conn: self._settled(conn, reservation, actual))
        except BaseException:
            self._unclaim((reservation,))
            raise

    def _claim(self, reservations: Iterable[Reservation]) -> list[Reservation]:
        """Mark settled, and return, those of ``reservations`` not settled yet (each once)."""
        claimed: list[Reservation] = []
        with self._holds:
            for reservation in reservations:
                if not reservation.settled:  # a reservation listed twice is claimed once
                    reservation.settled = True
                    claimed.append(reservation)
        return claimed

    def _unclaim(self, reservations: Iterable[Reservation]) -> None:
        """Undo :meth:`_claim` once the store did not take the settlement (it stays counted)."""
        with self._holds:
            for reservation in reservations:
                reservation.settled = False

    def _settled(self, conn: Any, held: Reservation, actual: Usage) -> bool:
        """Replace ``held`` (kept in the store) by ``actual`` in the usage rows; False when the
        store had it settled already (by a copy of it in a forked process, or by a reclaim)."""
        assert held.keys is not None
        return settle_rows(conn, self._placeholder, held.token, held.keys, held.amount, actual)

    def settle_all(
        self,
        settled: Iterable[tuple[Reservation, Usage]],
        *,
        hold: Reservation | None = None,
        if_sent: Usage | None = None,
        refill: bool = False,
    ) -> None:
        pairs = list(settled)
        self._own([hold, *(r for r, _a in pairs)])
        with self._holds:
            claimed = self._claim(r for r, _a in pairs)
            try:
                self._settle_claimed(pairs, claimed, hold, if_sent, refill)
            except BaseException:
                self._unclaim(claimed)
                raise

    def _settle_claimed(
        self,
        pairs: list[tuple[Reservation, Usage]],
        claimed: list[Reservation],
        hold: Reservation | None,
        if_sent: Usage | None,
        refill: bool,
    ) -> None:
        """:meth:`settle_all` of the reservations ``claimed`` (their first pair each in ``pairs``);
        a reservation the store had settled already gives nothing back to ``hold``."""
        stored, todo = list[tuple[Reservation, Usage, Usage | None]](), {id(r) for r in claimed}
        for reservation, actual in pairs:
            if id(reservation) not in todo:
                continue
            todo.discard(id(reservation))
            stored.append((reservation, actual, _refilled(reservation, hold, actual) if refill else None))
        live = None if hold is None or hold.settled else hold

        def work(conn: Any) -> tuple[Usage, list[float] | None]:
            back = ZERO
            for reservation, actual, drew in stored:
                if drew is None:
                    self._settled(conn, reservation, actual)
                elif self._settled(conn, reservation, actual + drew):  # counts it again, under the hold
                    back += drew
            sent = None if live is None or if_sent is None else _capped(if_sent, live, back)
            if live is not None and live.token is not None and (sent is not None or back != ZERO):
                lower_row(conn, self._placeholder, live.token, _negated(back), sent)
            return back, sent

        if stored or (live is not None and live.token is not None and if_sent is not None):
            back, sent = self._transact(work)
        else:
            back, sent = ZERO, None if live is None or if_sent is None else _capped(if_sent, live)
        _refill(hold, back, [r for r, _a, _d in stored])
        if live is not None and sent is not None:
            live.if_sent = as_usage(sent)

    def forget_run(self, run_id: str) -> None:
        self._transact(lambda conn: forget_run(conn, self._placeholder, run_id, self._collate))

    def renew(self) -> int:
        """Renew this meter's lease and :meth:`reclaim` in one transaction; how many were reclaimed."""

        def work(conn: Any) -> int:
            self._register(conn)
            return self._reclaim(conn)

        return self._transact(work)

    def reclaim(self) -> int:
        """Settle, at what the ledger says happened, the reservations of owners that are provably
        gone (see the module's docstring); how many."""
        return self._transact(self._reclaim)

    def _sweep_due(self) -> bool:
        """At most one extra reclaim a second, before refusing calls."""
        now = time.monotonic()
        if now - self._swept < 1.0:
            return False
        self._swept = now
        return True

    def _reclaim(self, conn: Any) -> int:
        return reclaim_gone(
            conn,
            p=self._placeholder,
            now_sql=self._now_sql,
            me=self._owner,
            host=self._host,
            add=self._add,
            ledger_state=self._ledger_state,
        )

    def _deregister(self, conn: Any) -> None:
        """Drop this meter's registration unless a reservation of it is still open."""
        p = self._placeholder
        conn.execute(
            f"DELETE FROM budget_owners WHERE owner = {p} AND NOT EXISTS (SELECT 1 FROM"
            f" budget_reservations WHERE owner = {p} AND reclaimed IS NULL)",
            (self._owner, self._owner),
        )

    def _closing(self) -> None:
        """Stop renewing, and deregister when nothing of this meter is open (best effort)."""
        self._closed, self._renew_due = True, False
        self._renewal.stop()
        with contextlib.suppress(Exception):  # else its lease lapses, or its process ends: reclaimed then
            self._transact(self._deregister)


class SqliteMeter(_StoredMeter):
    """Usage in the SQLite file shared with the ledger (table ``budget_usage``).

    Admissions and settlements go through the file's writer, shared with the ledger: they wait
    for the WAL write, not for an fsync (a power loss may forget the latest usage).
    """

    def __init__(
        self, budgets: Budgets, path: str | Path, *, busy_timeout_s: float = 30.0, lease_s: float = LEASE_S
    ) -> None:
        super().__init__(budgets, lease_s=lease_s)
        from actionspace.ledger.sqlite import GroupCommit, SqliteConnections

        self._db = SqliteConnections(path, synchronous="NORMAL", busy_timeout_s=busy_timeout_s)
        try:
            self._db.init_schema(SQLITE_SCHEMA, "budget_meta", "schema_version", SCHEMA_VERSION)
        except BaseException:
            self._db.close()
            raise
        self._group = GroupCommit.open(path, busy_timeout_s=busy_timeout_s)
        self._opened()

    def _transact(self, work: Callable[[Any], T]) -> T:
        self._db.check_open()
        result: T = self._group.run(work, durable=False)
        return result

    @contextmanager
    def _read(self) -> Iterator[Any]:
        yield self._db.conn()

    def close(self) -> None:
        if not self._db.closed:
            self._closing()
            self._group.close()
        self._db.close()


class PostgresMeter(_StoredMeter):
    """Usage in PostgreSQL (table ``budget_usage``), rows locked while a call is admitted."""

    _placeholder = "%s"
    _lock_rows = " FOR UPDATE"
    _collate = ' COLLATE "C"'

    _now_sql = "extract(epoch from clock_timestamp())::double precision"

    def __init__(
        self, budgets: Budgets, url: str, *, connect_timeout_s: float = 10.0, lease_s: float = LEASE_S
    ) -> None:
        super().__init__(budgets, lease_s=lease_s)
        from actionspace.ledger.postgres import PostgresConnections

        self._db = PostgresConnections(url, name="budgets", max_size=4, connect_timeout_s=connect_timeout_s)
        try:
            self._db.init_schema(
                (*PG_USAGE_TABLES, *PG_OWNER_TABLES),
                meta_table="budget_meta",
                meta_key="schema_version",
                version=SCHEMA_VERSION,
                what="the budget meters",
            )
            self._opened()
        except BaseException:
            self._db.close()
            raise

    def _ledger_state(self, conn: Any, key: str) -> str | None:
        with conn.transaction():  # a savepoint: a store without a ledger leaves the rest standing
            return super()._ledger_state(conn, key)

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
        self._closing()
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
