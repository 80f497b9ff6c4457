"""A declared ``Cost`` is a finite real number >= 0 per unit: anything else (NaN, infinite,
negative, a string, a bool, an integer beyond a float) is refused when the tool is defined, with
``ToolDefinitionError``, as ``RetryPolicy`` refuses its bad bounds."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.catalog.spec import Cost
from actionspace.errors import ToolDefinitionError

FIELDS = ("per_call", "per_item", "per_byte")
BAD: list[Any] = [math.nan, math.inf, -math.inf, -1.0, -1, 10**400, "5", b"1", None, True, False, [1]]


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("value", BAD, ids=repr)
def test_a_cost_that_is_not_a_finite_non_negative_number_is_refused(field: str, value: Any) -> None:
    with pytest.raises(ToolDefinitionError, match=field):
        Cost(**{field: value})


def test_a_tool_declared_with_a_bad_cost_is_never_registered() -> None:
    rt = Runtime("memory://", recover_on_start=False)
    try:
        with pytest.raises(ToolDefinitionError):

            @rt.tool(effect="read", cost=Cost(per_call=math.nan))
            def odd() -> str:
                """Never registered."""
                return "ok"

        assert "odd" not in {spec.name for spec in rt.catalog}
    finally:
        rt.close()


@given(
    value=st.one_of(
        st.floats(allow_nan=True, allow_infinity=True),
        st.integers(min_value=-(10**400), max_value=10**400),
        st.text(max_size=3),
        st.booleans(),
        st.none(),
    ),
    field=st.sampled_from(FIELDS),
)
def test_a_cost_is_accepted_exactly_when_it_is_a_finite_number_at_least_zero(value: Any, field: str) -> None:
    try:
        as_float = float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
    except OverflowError:
        as_float = None
    good = as_float is not None and math.isfinite(as_float) and as_float >= 0
    if good:
        assert getattr(Cost(**{field: value}), field) == value
    else:
        with pytest.raises(ToolDefinitionError):
            Cost(**{field: value})


def test_a_good_cost_keeps_its_values() -> None:
    cost = Cost(per_call=0.25, per_item=2, per_byte=0.0)
    assert (cost.per_call, cost.per_item, cost.per_byte) == (0.25, 2, 0.0)
