"""Budgets with odd numbers: a limit that is not a number is a configuration error, and a cost
that is NaN or negative never lets a run spend past its limit."""

from __future__ import annotations

import math
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.catalog.spec import Cost
from actionspace.errors import ActionError, ConfigurationError
from actionspace.policy.budget import Budget, Budgets, Meter, Usage


@pytest.mark.parametrize(
    "limits",
    [
        {"money": math.nan},
        {"calls": True},
        {"items": False},
        {"calls": "5"},
        {"bytes": [1]},
        {"money": -0.5},
        {"calls": -1},
    ],
)
def test_a_limit_that_is_not_a_non_negative_number_is_refused_at_configuration(limits: Any) -> None:
    with pytest.raises(ConfigurationError):
        Budget(**limits)


@pytest.mark.parametrize("limits", [{"calls": 2**80}, {"money": 1e308}, {"money": math.inf}, {"money": -0.0}])
def test_large_infinite_and_negative_zero_limits_are_numbers(limits: dict[str, Any]) -> None:
    assert Budget(**limits).limits()


def test_a_nan_estimate_is_refused_and_leaves_the_usage_readable() -> None:
    meter = Meter(Budgets(Budget(money=1.0)))
    refused = meter.admit("r", ("p", None), Usage(calls=1, money=math.nan))
    assert isinstance(refused, ActionError) and refused.category == "budget_exceeded"
    assert meter.used(run_id="r") == Usage()
    assert isinstance(meter.admit("r", ("p", None), Usage(calls=1, money=2.0)), ActionError)


def test_a_negative_estimate_does_not_refund_the_budget() -> None:
    meter = Meter(Budgets(Budget(money=1.0)))
    meter.admit("r", ("p", None), Usage(calls=1, money=-1000.0))
    assert meter.used(run_id="r").money == 0.0
    assert isinstance(meter.admit("r", ("p", None), Usage(calls=1, money=5.0)), ActionError)


def test_a_settlement_below_zero_does_not_refund_more_than_was_reserved() -> None:
    meter = Meter(Budgets(Budget(money=1.0)))
    reservation = meter.admit("r", ("p", None), Usage(calls=1, money=0.5))
    assert not isinstance(reservation, ActionError)
    meter.settle(reservation, Usage(calls=1, money=-1000.0))
    assert meter.used(run_id="r").money == 0.0
    assert isinstance(meter.admit("r", ("p", None), Usage(calls=1, money=1.5)), ActionError)


def _bypassing(field: str, value: float) -> Cost:
    """A cost holding ``value``, which its constructor refuses (the run-time guard still applies)."""
    cost = Cost()
    object.__setattr__(cost, field, value)
    return cost


@pytest.mark.parametrize(
    "cost", [_bypassing("per_call", math.nan), _bypassing("per_call", -5.0), _bypassing("per_byte", -1.0)]
)
def test_a_tool_with_a_nan_or_negative_cost_never_lets_a_run_overspend(cost: Cost) -> None:
    rt = Runtime("memory://", recover_on_start=False, budgets=[Budget(money=1.0)])
    ran: list[str] = []

    @rt.tool(effect="read", cost=cost)
    def odd() -> str:
        """A tool whose cost is misconfigured."""
        ran.append("odd")
        return "ok"

    @rt.tool(effect="read", cost=Cost(per_call=0.6))
    def dear() -> str:
        """A tool that costs 0.6."""
        ran.append("dear")
        return "ok"

    run = rt.new_run()
    for name in ("odd", "dear", "dear", "dear"):
        rt.call({"name": name, "arguments": {}}, run_id=run)
    assert ran.count("dear") == 1
