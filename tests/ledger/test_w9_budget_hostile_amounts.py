"""Amounts a meter never counts as NaN: an infinite estimate (a cost that is not a real number,
set past its constructor, prices a call as infinite money) is admitted only where no budget
limits that unit, and settling it at what the call used (finite or not) leaves every count a
number, on the memory meter and on the meters kept in SQLite and PostgreSQL alike; a store never
refuses such a settle or the reclaim of such a reservation, so the call is never left unsettled."""

from __future__ import annotations

import math
import os
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace.policy.budget import Budget, Budgets, Meter, Reservation, Usage

WHO = ("alice", "t1")
CALLS_ONLY = Budgets(Budget(calls=50, per="run"), Budget(calls=50, per="principal"))
INF = math.inf


def _admitted(meter: Meter, amount: Usage, run: str = "r1") -> Reservation:
    held = meter.admit(run, WHO, amount)
    assert isinstance(held, Reservation), held
    return held


def _numbers(usage: Usage) -> None:
    for unit in ("calls", "items", "bytes", "money"):
        assert not math.isnan(getattr(usage, unit)), usage


def test_an_infinite_estimate_settled_at_what_the_call_used_counts_what_it_used(
    open_meter: Callable[[Budgets], Meter],
) -> None:
    meter = open_meter(CALLS_ONLY)
    before = _admitted(meter, Usage(calls=1, money=0.25))
    meter.settle(before, Usage(calls=1, money=0.25))
    held = _admitted(meter, Usage(calls=1, money=INF))
    meter.settle(held, Usage(calls=1, money=0.5))
    assert meter.used(run_id="r1") == Usage(calls=2, money=0.75)
    assert meter.used(principal=WHO) == Usage(calls=2, money=0.75)


def test_an_infinite_charge_stays_infinite_and_never_becomes_nan(
    open_meter: Callable[[Budgets], Meter],
) -> None:
    meter = open_meter(CALLS_ONLY)
    meter.settle(_admitted(meter, Usage(calls=1, money=INF)), Usage(calls=1, money=INF))
    meter.settle(_admitted(meter, Usage(calls=1, money=INF)), Usage(calls=1))
    meter.settle(_admitted(meter, Usage(calls=1, money=1.0)), Usage(calls=1, money=math.nan))
    used = meter.used(principal=WHO)
    assert used.calls == 3 and used.money == INF, used
    limited = open_meter(Budgets(Budget(money=100.0, per="principal")))
    if type(meter) is not Meter:  # a store: the usage is shared
        refused = limited.admit("r2", WHO, Usage(calls=1, money=1.0))
        assert not isinstance(refused, Reservation)  # infinite money used: nothing more fits


def test_an_infinite_estimate_never_fits_a_budget_that_limits_its_unit(
    open_meter: Callable[[Budgets], Meter],
) -> None:
    meter = open_meter(Budgets(Budget(calls=5, money=10.0, per="run")))
    refused = meter.admit("r1", WHO, Usage(calls=1, money=INF))
    assert not isinstance(refused, Reservation) and refused.category == "budget_exceeded"
    assert meter.used(run_id="r1") == Usage()


def test_a_group_hold_and_its_members_with_infinite_estimates_count_numbers(
    open_meter: Callable[[Budgets], Meter],
) -> None:
    from actionspace.policy.budget import drawing_from

    meter = open_meter(CALLS_ONLY)
    hold = _admitted(meter, Usage(calls=2, money=INF))
    with drawing_from(hold):
        member = _admitted(meter, Usage(calls=1, money=INF))
    _numbers(meter.used(run_id="r1"))
    meter.settle_all([(member, Usage(calls=1, money=2.0))], hold=hold, if_sent=Usage(calls=1), refill=True)
    _numbers(meter.used(run_id="r1"))
    meter.settle(hold, Usage())
    assert meter.used(run_id="r1") == Usage(calls=1, money=2.0)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_the_reservation_of_a_dead_process_with_an_infinite_estimate_is_reclaimed(
    open_meter: Callable[[Budgets], Meter],
) -> None:
    probe = open_meter(CALLS_ONLY)
    if type(probe) is Meter:
        pytest.skip("in memory a reservation dies with its process")
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            child = open_meter(CALLS_ONLY)
            held = child.admit("r1", WHO, Usage(calls=1, money=INF), if_sent=Usage(calls=1, money=INF))
            code = 0 if isinstance(held, Reservation) else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    probe.reclaim()  # never refused by the store
    assert probe.reclaim() == 0
    used = probe.used(principal=WHO)
    assert used.calls == 1 and used.money == INF, used  # it may have run: charged as sent


amounts = st.builds(
    Usage,
    calls=st.integers(0, 2),
    items=st.integers(0, 3),
    money=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, 0.5, INF])),
)


def test_any_estimates_and_charges_leave_every_count_a_number(open_meter: Callable[[Budgets], Meter]) -> None:
    meter = open_meter(CALLS_ONLY)
    runs = iter(range(10**6))

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(steps=st.lists(st.tuples(amounts, amounts), min_size=1, max_size=6))
    def check(steps: list[tuple[Usage, Usage]]) -> None:
        run = f"r{next(runs)}"
        for estimate, actual in steps:
            held = meter.admit(run, WHO, estimate)
            if isinstance(held, Reservation):
                meter.settle(held, actual)
            _numbers(meter.used(run_id=run))
            _numbers(meter.used(principal=WHO))

    check()
