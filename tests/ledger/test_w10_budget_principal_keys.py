"""Budget rows of principals: one row per (id, tenant), whatever characters the tenant holds."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.ledger._budget_rows import principal_key as _principal_key
from actionspace.ledger.budget_store import PostgresMeter, SqliteMeter
from actionspace.policy.budget import Budget, Budgets, Meter, Reservation, Usage

ONE_CALL = Usage(calls=1)
SHARED_LIMIT = Budgets(Budget(calls=1, per="principal"))


@pytest.fixture(params=["sqlite", "postgres"])
def meter(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Meter]:
    if request.param == "sqlite":
        in_file = SqliteMeter(SHARED_LIMIT, tmp_path / "budgets.db")
        yield in_file
        in_file.close()
        return
    from tests.pg import fresh_schema

    for url in fresh_schema(request.getfixturevalue("pg_url")):
        shared = PostgresMeter(SHARED_LIMIT, url)
        yield shared
        shared.close()


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (("c", "a:b"), ("b:c", "a")),
        (("x", "a%3Ab"), ("x", "a:b")),
        (("x", ""), ("x", None)),
        (("b", "a:"), ("b", "a")),
    ],
)
def test_a_tenant_never_spends_another_tenants_budget(
    meter: Meter, first: tuple[str, str | None], second: tuple[str, str | None]
) -> None:
    assert isinstance(meter.admit("run-1", first, ONE_CALL), Reservation)
    admitted = meter.admit("run-2", second, ONE_CALL)
    assert isinstance(admitted, Reservation), admitted
    assert meter.used(principal=first).calls == 1
    assert meter.used(principal=second).calls == 1


def test_a_principal_spends_its_own_budget_once(meter: Meter) -> None:
    who = ("c", "a:b")
    assert isinstance(meter.admit("run-1", who, ONE_CALL), Reservation)
    refused = meter.admit("run-2", who, ONE_CALL)
    assert not isinstance(refused, Reservation)
    assert refused.category == "budget_exceeded"


def test_ordinary_principals_keep_the_rows_they_had(tmp_path: Path) -> None:
    path = tmp_path / "budgets.db"
    SqliteMeter(SHARED_LIMIT, path).close()
    with sqlite3.connect(path) as conn:  # usage written under the spelling of earlier versions
        conn.execute("INSERT INTO budget_usage VALUES ('principal:acme:alice', 1, 0, 0, 0)")
        conn.execute("INSERT INTO budget_usage VALUES ('principal::bob', 1, 0, 0, 0)")
    meter = SqliteMeter(SHARED_LIMIT, path)
    try:
        assert meter.used(principal=("alice", "acme")).calls == 1
        assert meter.used(principal=("bob", None)).calls == 1
        assert not isinstance(meter.admit("run-3", ("alice", "acme"), ONE_CALL), Reservation)
    finally:
        meter.close()


principals = st.tuples(st.text(max_size=6), st.none() | st.text(max_size=6))


@settings(max_examples=300)
@given(principals, principals)
def test_two_principals_share_a_row_only_when_they_are_one(
    a: tuple[str, str | None], b: tuple[str, str | None]
) -> None:
    assert (_principal_key(a) == _principal_key(b)) == (a == b)
