"""A per-run budget is kept per principal: a caller (a process, a library user) naming another
principal's run id spends an allowance of its own, never that run's, on every meter (memory,
SQLite, PostgreSQL) and through the runtime. A store written before keeps counting: a run's usage
recorded under the run alone still counts in that run, and a reservation left open then is
still reclaimed."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

from actionspace import Principal, Runtime
from actionspace.ledger.budget_store import SqliteMeter
from actionspace.policy.budget import Budget, Budgets, Meter, Reservation, Usage

ALICE = ("alice", "t1")
BOB = ("bob", "t1")
MALLORY = ("alice", "t2")  # alice's id in another tenant: another principal
TWO_PER_RUN = Budgets(Budget(calls=2, per="run"))
ONE = Usage(calls=1)


def _spend(meter: Meter, run: str, who: tuple[str, str | None]) -> Reservation:
    held = meter.admit(run, who, ONE)
    assert isinstance(held, Reservation), held
    meter.settle(held, ONE)
    return held


def test_another_principal_naming_a_run_id_never_spends_that_runs_budget(
    open_meter: Callable[[Budgets], Meter],
) -> None:
    meter = open_meter(TWO_PER_RUN)
    _spend(meter, "r1", ALICE)
    for other in (BOB, MALLORY):  # its own allowance in "r1": two calls each
        _spend(meter, "r1", other)
        _spend(meter, "r1", other)
        refused = meter.admit("r1", other, ONE)
        assert not isinstance(refused, Reservation) and refused.category == "budget_exceeded"
    assert meter.used(run_id="r1", principal=ALICE) == Usage(calls=1)
    assert meter.remaining("r1", ALICE) == {"calls": 1}
    _spend(meter, "r1", ALICE)  # alice's second call still fits
    assert meter.used(run_id="r1") == Usage(calls=6)  # the run, of every principal in it


def test_forgetting_a_run_drops_the_usage_of_every_principal_in_it(
    open_meter: Callable[[Budgets], Meter],
) -> None:
    meter = open_meter(TWO_PER_RUN)
    for who in (ALICE, BOB):
        _spend(meter, "r:1%", who)
        _spend(meter, "r:1%", who)
    _spend(meter, "r", ALICE)  # a run whose id the other's starts with is not forgotten
    meter.forget_run("r:1%")
    assert meter.used(run_id="r:1%") == Usage()
    assert meter.used(run_id="r", principal=ALICE) == Usage(calls=1)
    _spend(meter, "r:1%", ALICE)


def test_through_the_runtime_another_principal_in_a_run_spends_its_own_allowance(tmp_path: Path) -> None:
    alice = Principal(id="alice", tenant="t1", scopes=["*"])
    bob = Principal(id="bob", tenant="t1", scopes=["*"])
    rt = Runtime(
        f"sqlite:///{tmp_path / 'rt.db'}", budgets=[Budget(calls=2, per="run")], recover_on_start=False
    )
    try:

        @rt.tool(effect="read")
        def look(x: int) -> int:
            """Give ``x`` back."""
            return x

        run = rt.new_run("shared-run", principal=alice)
        assert rt.call({"name": "look", "arguments": {"x": 1}}, run_id=run, principal=alice).status == "ok"
        for x in (2, 3):
            obs = rt.call({"name": "look", "arguments": {"x": x}}, run_id=run, principal=bob)
            assert obs.status == "ok", obs.error
        refused = rt.call({"name": "look", "arguments": {"x": 4}}, run_id=run, principal=bob)
        assert refused.error is not None and refused.error.category == "budget_exceeded"
        assert rt.budget(run_id=run, principal=alice) == {"calls": 1}
        assert rt.call({"name": "look", "arguments": {"x": 5}}, run_id=run, principal=alice).status == "ok"
    finally:
        rt.close()


def _old_store(path: Path) -> None:
    """A store as earlier versions wrote it: run "r1" used 2 calls (kept under the run alone), and
    a reservation of 1 call in it is left open by an owner whose process is gone."""
    SqliteMeter(TWO_PER_RUN, path).close()  # the tables
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO budget_usage VALUES ('run:r1', 3, 0, 0, 0)")
        conn.execute("INSERT INTO budget_usage VALUES ('principal:t1:alice', 3, 0, 0, 0)")
        conn.execute("INSERT INTO budget_usage VALUES ('run:r2', 1, 0, 0, 0)")
        conn.execute("INSERT INTO budget_usage VALUES ('principal:t1:bob', 1, 0, 0, 0)")
        conn.execute(
            "INSERT INTO budget_owners VALUES ('gone', ?, ?, 'not-its-start', 1e18)",
            (_this_host(), os.getpid()),
        )
        conn.execute(
            "INSERT INTO budget_reservations VALUES ('tok', 'gone', 'run:r1', 'principal:t1:alice', NULL,"
            " 1, 0, 0, 0, 0, 0, 0, 0, NULL)"
        )


def _this_host() -> str:
    from actionspace.ledger.budget_owners import this_host

    return this_host()


def test_a_store_written_before_keeps_counting_a_runs_usage(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _old_store(path)
    meter = SqliteMeter(TWO_PER_RUN, path)  # reclaims the gone owner's reservation on opening
    try:
        if _this_host():
            assert meter.used(run_id="r1", principal=ALICE) == Usage(calls=2)
            assert meter.used(principal=ALICE) == Usage(calls=2)
        refused = meter.admit("r1", ALICE, ONE)
        assert not isinstance(refused, Reservation) and refused.category == "budget_exceeded"
        assert meter.used(run_id="r2", principal=BOB) == Usage(calls=1)
        _spend(meter, "r2", BOB)  # the old row and the new one together: 2 of 2
        refused = meter.admit("r2", BOB, ONE)
        assert not isinstance(refused, Reservation)
        meter.forget_run("r2")
        _spend(meter, "r2", BOB)
    finally:
        meter.close()
