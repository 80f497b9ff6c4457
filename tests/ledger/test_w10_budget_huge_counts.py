"""Counts of 2**63 or more (a tool declaring a huge ``max_observation_bytes``, an estimate built by
hand) are stored by the meters kept in SQLite and PostgreSQL as the memory meter counts them:
never refused by the store as ``transient``. A count too large for a float counts as infinite:
it never fits a budget that limits its unit (``budget_exceeded``), and counts nothing in a unit
no budget limits, as an infinite money estimate does."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.errors import ConfigurationError
from actionspace.policy.budget import Budget, Budgets, Meter, Reservation, Usage
from tests.pg import fresh_schema

WHO = ("alice", "t1")
CALLS_ONLY = Budgets(Budget(calls=50, per="run"), Budget(calls=50, per="principal"))
HUGE = 2**63


@pytest.mark.parametrize("unit", ["calls", "items", "bytes"])
def test_a_count_of_two_to_the_63_is_admitted_settled_and_read_back(
    open_meter: Callable[[Budgets], Meter], unit: str
) -> None:
    meter = open_meter(Budgets(Budget(**{unit: 2**70}, per="run")))
    held = meter.admit("r1", WHO, Usage(**{unit: HUGE}))
    assert isinstance(held, Reservation), held
    assert float(getattr(meter.used(run_id="r1"), unit)) == float(HUGE)
    meter.settle(held, Usage(**{unit: HUGE + 1}))
    assert float(getattr(meter.used(principal=WHO), unit)) == float(HUGE + 1)
    refused = meter.admit("r1", WHO, Usage(**{unit: 2**70}))
    assert not isinstance(refused, Reservation) and refused.category == "budget_exceeded"


def test_a_count_too_large_for_a_float_never_fits_a_limit_and_counts_nothing_unlimited(
    open_meter: Callable[[Budgets], Meter],
) -> None:
    meter = open_meter(CALLS_ONLY)
    held = meter.admit("r1", WHO, Usage(calls=1, bytes=10**400))
    assert isinstance(held, Reservation), held  # bytes are not limited here
    meter.settle(held, Usage(calls=1, bytes=10))
    assert meter.used(run_id="r1") == Usage(calls=1, bytes=10)
    limited = open_meter(Budgets(Budget(bytes=2**1000, per="run")))
    refused = limited.admit("r2", WHO, Usage(calls=1, bytes=10**400))
    assert not isinstance(refused, Reservation) and refused.category == "budget_exceeded"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    counts=st.lists(
        st.tuples(st.integers(0, 2**66), st.integers(0, 2**66), st.integers(0, 2**66)), min_size=1, max_size=4
    )
)
def test_any_large_counts_are_stored_as_the_memory_meter_counts_them(
    open_meter: Callable[[Budgets], Meter], counts: list[tuple[int, int, int]]
) -> None:
    meter = open_meter(Budgets(Budget(calls=2**80, per="run")))
    total = [0.0, 0.0, 0.0]
    run = f"r-{uuid.uuid4().hex}"  # the store outlives one example
    for calls, items, nbytes in counts:
        held = meter.admit(run, WHO, Usage(calls=calls, items=items, bytes=nbytes))
        assert isinstance(held, Reservation), held
        meter.settle(held, Usage(calls=calls, items=items, bytes=nbytes))
        total = [total[0] + calls, total[1] + items, total[2] + nbytes]
    used = meter.used(run_id=run)
    for got, want in zip((used.calls, used.items, used.bytes), total, strict=True):
        assert float(got) == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_a_call_estimated_at_two_to_the_63_bytes_runs_instead_of_failing_transient(
    request: pytest.FixtureRequest, tmp_path: Path, store: str
) -> None:
    if store == "sqlite":
        urls: Iterator[str] = iter([f"sqlite:///{tmp_path / 'rt.db'}"])
    else:
        urls = fresh_schema(request.getfixturevalue("pg_url"))
    url = next(urls)
    rt = Runtime(url, budgets=[Budget(calls=5, per="run")], recover_on_start=False)
    try:

        @rt.tool(effect="read", max_observation_bytes=HUGE)
        def big(x: int) -> int:
            """Give ``x`` back."""
            return x

        ok = rt.call({"name": "big", "arguments": {"x": 1}}, run_id="r-big")
        assert ok.status == "ok", ok.error
        assert ok.data == 1
        limited = Runtime(url, budgets=[Budget(bytes=2**62, per="run")], recover_on_start=False)
        try:
            limited.add_tool(
                name="big",
                input_schema={"type": "object"},
                fn=lambda: 1,
                effect="read",
                max_observation_bytes=HUGE,
            )
            refused = limited.call({"name": "big", "arguments": {}}, run_id="r-big-2")
            assert refused.error is not None and refused.error.category == "budget_exceeded", refused.error
        finally:
            limited.close()
    finally:
        rt.close()
        for _ in urls:  # drops a PostgreSQL schema
            pass


def test_a_budget_limit_beyond_any_float_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError):
        Budget(bytes=10**400)
