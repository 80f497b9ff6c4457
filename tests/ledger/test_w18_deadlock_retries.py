"""Schema steps PostgreSQL's deadlock detector ends are run again, one way for every step.

A process opening a store while another one writes the same tables (or builds an index of them
concurrently) can close a circle of waits; PostgreSQL then ends one transaction as a deadlock. The
schema's creation, the tenant columns of the ledger and of the trace's runs, and each concurrent
index build are run again a few times (nothing of the failed attempt kept); the last deadlock of a
migration is raised, a build is left to the next opener.

The deadlocks are injected at the end of each transaction, after every statement of it ran, so a
step run again must find nothing of the attempt before.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest

from actionspace import Runtime
from actionspace.ledger import _postgres_tenants
from actionspace.ledger._postgres_tenants import add_listing_tenants, build_concurrently
from actionspace.ledger.entries import LedgerEntry
from actionspace.ledger.postgres_pool import PostgresConnections, deadlock_retried
from actionspace.trace._postgres_runs import add_run_tenants
from actionspace.trace.events import TraceEvent
from tests.pg import fresh_schema


def _deadlock() -> psycopg.errors.DeadlockDetected:
    return psycopg.errors.DeadlockDetected("deadlock detected (injected)")


def test_a_step_ended_as_a_deadlock_is_run_again_until_it_completes() -> None:
    calls: list[int] = []

    def step() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise _deadlock()
        return "done"

    assert deadlock_retried(step) == "done"
    assert len(calls) == 3


def test_the_last_deadlock_is_raised_and_no_other_error_is_retried() -> None:
    calls: list[int] = []

    def always() -> None:
        calls.append(1)
        raise _deadlock()

    with pytest.raises(psycopg.errors.DeadlockDetected):
        deadlock_retried(always, attempts=3)
    assert len(calls) == 3

    def broken() -> None:
        calls.append(1)
        raise psycopg.errors.UndefinedTable("no such table")

    calls.clear()
    with pytest.raises(psycopg.errors.UndefinedTable):
        deadlock_retried(broken)
    assert len(calls) == 1


class _Deadlocking:
    """``db.transaction`` whose first ``times`` transactions end as a deadlock once their statements ran."""

    def __init__(self, db: PostgresConnections, times: int) -> None:
        self.left = times
        self.ended = 0
        self._real = db.transaction

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection[dict[str, Any]]]:
        with self._real() as conn:
            yield conn
            if self.left > 0:
                self.left -= 1
                self.ended += 1
                raise _deadlock()


@pytest.fixture
def pg(pg_url: str) -> Iterator[str]:
    yield from fresh_schema(pg_url)


def _stored(url: str) -> None:
    rt = Runtime(url, recover_on_start=False)
    try:
        rt.trace.append_many(
            [
                TraceEvent(run_id=r, seq=0, kind="run_started", ts=1.0, data={"principal": "p", "tenant": t})
                for r, t in (("qt", "quiet"), ("bz", "busy"))
            ]
        )
        rt.ledger.begin(
            LedgerEntry(
                key="as1_qt", run_id="qt", node_id="n", tool="t@1", args_digest="d", arguments={},
                created_at=1.0, updated_at=1.0,
            )
        )  # fmt: skip
    finally:
        rt.close()


def _columns(url: str, table: str) -> set[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attnum > 0"
            " AND NOT attisdropped",
            (table,),
        ).fetchall()
    return {str(r[0]) for r in rows}


def _strip_listing_tenants(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP TRIGGER trace_runs_tenant_to_listings_new ON trace_runs")
        conn.execute("DROP TRIGGER trace_runs_tenant_to_listings_moved ON trace_runs")
        conn.execute("DROP TRIGGER ledger_entries_tenant_of_new ON ledger_entries")
        conn.execute("DROP TRIGGER approval_requests_tenant_of_new ON approval_requests")
        conn.execute("ALTER TABLE ledger_entries DROP COLUMN tenant")
        conn.execute("ALTER TABLE approval_requests DROP COLUMN tenant")


def _strip_run_tenants(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP TRIGGER trace_runs_tenant_of_new_run ON trace_runs")
        conn.execute("DROP TRIGGER trace_runs_tenant_of_start ON trace_runs")
        conn.execute("ALTER TABLE trace_runs DROP COLUMN started_seq")


def test_the_listing_tenants_migration_ended_as_a_deadlock_twice_is_done_once(
    pg: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _stored(pg)
    _strip_listing_tenants(pg)
    db = PostgresConnections(pg, name="ledger")
    try:
        deadlocks = _Deadlocking(db, times=2)
        monkeypatch.setattr(db, "transaction", deadlocks.transaction)
        assert add_listing_tenants(db, indexes=False)
        assert deadlocks.ended == 2
        assert "tenant" in _columns(pg, "ledger_entries")
        with psycopg.connect(pg) as conn:
            triggers = conn.execute(
                "SELECT count(*) FROM pg_trigger WHERE tgname LIKE '%%tenant%%'"
            ).fetchone()
            tenants = conn.execute("SELECT DISTINCT tenant FROM ledger_entries").fetchall()
        assert triggers is not None and triggers[0] == 6  # the ledger's four and the trace's two
        assert tenants == [("quiet",)]
    finally:
        db.close()


def test_the_listing_tenants_migration_deadlocked_every_time_raises_and_keeps_nothing(
    pg: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _stored(pg)
    _strip_listing_tenants(pg)
    db = PostgresConnections(pg, name="ledger")
    try:
        deadlocks = _Deadlocking(db, times=1_000)
        monkeypatch.setattr(db, "transaction", deadlocks.transaction)
        with pytest.raises(psycopg.errors.DeadlockDetected):
            add_listing_tenants(db, indexes=False)
        assert deadlocks.ended == 5
        assert "tenant" not in _columns(pg, "ledger_entries")
        assert "tenant" not in _columns(pg, "approval_requests")
    finally:
        db.close()


def test_the_run_tenants_migration_ended_as_a_deadlock_is_run_again(
    pg: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _stored(pg)
    _strip_run_tenants(pg)
    db = PostgresConnections(pg, name="trace")
    try:
        deadlocks = _Deadlocking(db, times=4)
        monkeypatch.setattr(db, "transaction", deadlocks.transaction)
        add_run_tenants(db)
        assert deadlocks.ended == 4
        with psycopg.connect(pg) as conn:
            rows = conn.execute(
                "SELECT run_id, tenant, started_seq FROM trace_runs ORDER BY run_id"
            ).fetchall()
        assert rows == [("bz", "busy", 0), ("qt", "quiet", 0)]
    finally:
        db.close()


def _valid(url: str, name: str) -> bool:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)", (name,)
        ).fetchone()
    return row is not None and bool(row[0])


@pytest.mark.parametrize("deadlocks", [2, 5])
def test_an_index_build_ended_as_a_deadlock_is_tried_again_then_left_to_the_next_opener(
    pg: str, monkeypatch: pytest.MonkeyPatch, deadlocks: int
) -> None:
    _stored(pg)
    name, on = _postgres_tenants.INDEXES[0]
    with psycopg.connect(pg, autocommit=True) as conn:
        conn.execute(f"DROP INDEX {name}")
    build = _postgres_tenants._build
    builds: list[int] = []

    def deadlocking(conn: psycopg.Connection[Any], name: str, on: Any) -> bool:
        builds.append(1)
        if len(builds) <= deadlocks:
            raise _deadlock()
        return build(conn, name, on)

    monkeypatch.setattr(_postgres_tenants, "_build", deadlocking)
    db = PostgresConnections(pg, name="ledger")
    try:
        assert build_concurrently(db, name, on) is (deadlocks < 5)
        assert len(builds) == min(deadlocks + 1, 5)
        assert _valid(pg, name) is (deadlocks < 5)
        monkeypatch.setattr(_postgres_tenants, "_build", build)
        # the build's lock was let go either way: the next opener builds the index
        assert build_concurrently(db, name, on)
        assert _valid(pg, name)
    finally:
        db.close()
