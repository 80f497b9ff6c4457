"""A reservation admitted before its run was forgotten no longer counts in that run, whatever it
reserved: settled afterwards (above its estimate too, as a zero estimate is whenever the call
used anything), it changes only its principal's usage, on the memory meter and on the meters kept
in SQLite and PostgreSQL alike, so the run's next calls find its whole allowance."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from actionspace.ledger.budget_store import PostgresMeter, SqliteMeter
from actionspace.policy.budget import Budget, Budgets, Meter, Reservation, Usage
from tests.pg import fresh_schema

WHO = ("alice", "t1")
BUDGETS = Budgets(Budget(calls=10, money=10.0, per="principal"), Budget(calls=2, per="run"))
USED = Usage(calls=1, items=1, bytes=10, money=0.5)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def meter(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Meter]:
    if request.param == "memory":
        m: Meter = Meter(BUDGETS)
        yield m
        return
    if request.param == "sqlite":
        m = SqliteMeter(BUDGETS, tmp_path / "m.db")
        try:
            yield m
        finally:
            m.close()
        return
    for url in fresh_schema(request.getfixturevalue("pg_url")):
        m = PostgresMeter(BUDGETS, url)
        try:
            yield m
        finally:
            m.close()


@pytest.mark.parametrize("estimate", [Usage(), Usage(calls=1)], ids=["zero", "one_call"])
@pytest.mark.parametrize("via", ["settle", "settle_all"])
def test_a_reservation_settled_above_its_estimate_after_its_run_was_forgotten_charges_only_its_principal(
    meter: Meter, estimate: Usage, via: str
) -> None:
    held = meter.admit("r1", WHO, estimate)
    assert isinstance(held, Reservation)
    meter.forget_run("r1")
    if via == "settle":
        meter.settle(held, USED)
    else:
        meter.settle_all([(held, USED)])
    assert meter.used(run_id="r1") == Usage()
    assert meter.used(principal=WHO) == USED
    admitted = [meter.admit("r1", WHO, Usage(calls=1)) for _ in range(3)]
    assert [isinstance(a, Reservation) for a in admitted] == [True, True, False]  # 2 calls per run


def test_a_zero_reservation_of_the_runs_current_life_still_counts_in_it(meter: Meter) -> None:
    """Forgetting a run drops what came before it only: a zero estimate admitted since counts."""
    meter.forget_run("r1")
    held = meter.admit("r1", WHO, Usage())
    assert isinstance(held, Reservation)
    meter.settle(held, USED)
    assert meter.used(run_id="r1") == USED
    assert meter.used(principal=WHO) == USED
