"""A tool whose declared cost is hostile (NaN, infinite, negative, an int too large for a float, a
string, a callable), set past the constructor that refuses it, never crashes a call or an estimate and
never lets a run spend past its money limit; an estimate that differs from the actual usage settles
to the actual usage."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Budget, Runtime
from actionspace.catalog.spec import Cost
from actionspace.policy.budget import Budgets, Meter, Usage

LIMIT = 1.0

hostile = st.one_of(
    st.sampled_from(
        [math.nan, math.inf, -math.inf, -1.0, 10**400, -(10**400), 2**70, "5", "nan", b"1", None]
    ),
    st.just(lambda: 0.1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**500), max_value=10**500),
    st.text(max_size=5),
)


def _runtime(cost: Cost, ran: list[str]) -> Runtime:
    rt = Runtime("memory://", recover_on_start=False, budgets=[Budget(money=LIMIT), Budget(calls=5)])

    @rt.tool(effect="read", cost=cost)
    def odd() -> str:
        """A tool whose cost is misconfigured."""
        ran.append("odd")
        return "ok"

    @rt.tool(effect="read", cost=Cost(per_call=0.4))
    def dear() -> str:
        """A tool that costs 0.4."""
        ran.append("dear")
        return "ok"

    return rt


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=hostile, field=st.sampled_from(["per_call", "per_item", "per_byte"]))
def test_a_hostile_cost_is_refused_or_charged_as_nothing_never_an_internal_error(
    value: Any, field: str
) -> None:
    ran: list[str] = []
    cost = Cost()  # the constructor refuses these; a cost built around it still meets the run-time guard
    object.__setattr__(cost, field, value)
    rt = _runtime(cost, ran)
    try:
        run = rt.new_run()
        shown = rt.estimate({"name": "odd", "arguments": {}}, run_id=run)
        money = shown["estimate"]["money"]
        assert isinstance(money, float) and not math.isnan(money) and money >= 0
        for name in ("odd", "odd", "dear", "dear", "dear"):
            obs = rt.call({"name": name, "arguments": {}}, run_id=run)
            assert obs.ok or (obs.error is not None and obs.error.category == "budget_exceeded"), obs.error
        assert rt.meter is not None
        used = rt.meter.used(run_id=run)
        assert 0 <= used.money <= LIMIT + 1e-9
        assert ran.count("dear") <= 2  # 0.4 each: never more than the limit allows
        assert rt.budget(run_id=run)["money"] == max(0.0, LIMIT - used.money)
    finally:
        rt.close()


@settings(max_examples=60, deadline=None)
@given(
    reserved=st.floats(min_value=0, max_value=0.5),
    actual=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-(10**30), 10**30)),
)
def test_a_settlement_that_differs_from_the_estimate_never_leaves_usage_unreadable(
    reserved: float, actual: Any
) -> None:
    meter = Meter(Budgets(Budget(money=LIMIT)))
    reservation = meter.admit("r", ("p", None), Usage(calls=1, money=reserved))
    assert not isinstance(reservation, Usage) and hasattr(reservation, "amount")
    meter.settle(reservation, Usage(calls=1, money=actual))  # type: ignore[arg-type]
    used = meter.used(run_id="r").money
    assert not math.isnan(used) and used >= 0
    left = meter.remaining("r", ("p", None))["money"]
    assert 0 <= left <= LIMIT
