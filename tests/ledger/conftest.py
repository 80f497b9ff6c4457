"""Store fixtures: every behaviour test runs once per kind in ``STORE_KINDS``.

A kind ``k`` is served by the fixtures ``k_ledger_store`` and ``k_approval_store``. Another store
(PostgreSQL) joins the suite by defining those two fixtures in a conftest or plugin and adding its
name to ``STORE_KINDS``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from actionspace.approval.requests import ApprovalStore
from actionspace.ledger.entries import LedgerStore
from actionspace.ledger.memory import MemoryApprovalStore, MemoryLedgerStore
from actionspace.ledger.sqlite import SqliteLedgerStore
from actionspace.ledger.sqlite_approvals import SqliteApprovalStore
from actionspace.policy.budget import Budgets, Meter
from tests.pg import fresh_schema

STORE_KINDS: list[str] = ["memory", "sqlite", "postgres"]


@pytest.fixture(params=STORE_KINDS)
def ledger_store(request: pytest.FixtureRequest) -> LedgerStore:
    store: LedgerStore = request.getfixturevalue(f"{request.param}_ledger_store")
    return store


@pytest.fixture(params=STORE_KINDS)
def approval_store(request: pytest.FixtureRequest) -> ApprovalStore:
    store: ApprovalStore = request.getfixturevalue(f"{request.param}_approval_store")
    return store


@pytest.fixture
def memory_ledger_store() -> Iterator[LedgerStore]:
    store = MemoryLedgerStore()
    yield store
    store.close()


@pytest.fixture
def sqlite_ledger_store(tmp_path: Path) -> Iterator[LedgerStore]:
    store = SqliteLedgerStore(tmp_path / "actionspace.db")
    yield store
    store.close()


@pytest.fixture
def memory_approval_store() -> Iterator[ApprovalStore]:
    store = MemoryApprovalStore()
    yield store
    store.close()


@pytest.fixture
def sqlite_approval_store(tmp_path: Path) -> Iterator[ApprovalStore]:
    store = SqliteApprovalStore(tmp_path / "actionspace.db")
    yield store
    store.close()


@pytest.fixture
def postgres_ledger_store(pg_url: str) -> Iterator[LedgerStore]:
    from actionspace.ledger.postgres import PostgresLedgerStore
    from tests.pg import fresh_schema

    for url in fresh_schema(pg_url):
        store = PostgresLedgerStore(url)
        yield store
        store.close()


@pytest.fixture
def postgres_approval_store(pg_url: str) -> Iterator[ApprovalStore]:
    from actionspace.ledger.postgres import PostgresApprovalStore
    from tests.pg import fresh_schema

    for url in fresh_schema(pg_url):
        store = PostgresApprovalStore(url)
        yield store
        store.close()


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def open_meter(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[Budgets], Meter]]:
    """``make(budgets)``: a fresh meter of the kind (one SQLite file, one PostgreSQL schema per
    test), every one closed after the test."""
    from actionspace.ledger.budget_store import PostgresMeter, SqliteMeter

    made: list[Meter] = []
    schemas: Iterator[str] | None = None
    url = ""
    if request.param == "postgres":
        schemas = fresh_schema(request.getfixturevalue("pg_url"))
        url = next(schemas)

    def make(budgets: Budgets) -> Meter:
        if request.param == "memory":
            made.append(Meter(budgets))
        elif request.param == "sqlite":
            made.append(SqliteMeter(budgets, tmp_path / "m.db"))
        else:
            made.append(PostgresMeter(budgets, url))
        return made[-1]

    try:
        yield make
    finally:
        for meter in made:
            meter.close()
        if schemas is not None:
            for _ in schemas:  # drops the schema
                pass
