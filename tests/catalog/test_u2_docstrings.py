"""Parameter descriptions come from Google, NumPy and reST docstrings alike."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from actionspace.catalog import spec_from_function
from actionspace.errors import ToolDefinitionError

if TYPE_CHECKING:
    from decimal import Decimal


def numpy_style(city: str, days: int = 3) -> str:
    """Forecast the weather.

    Looks a few days ahead.

    Parameters
    ----------
    city : str
        Name of the city,
        in English.
    days : int, optional
        How many days ahead.

    Returns
    -------
    str
        The forecast.
    """
    return city


def test_numpy_parameter_sections_describe_the_parameters_and_leave_the_description() -> None:
    spec = spec_from_function(numpy_style, effect="read")
    props = spec.input_schema["properties"]
    assert props["city"]["description"] == "Name of the city, in English."
    assert props["days"]["description"] == "How many days ahead."
    assert spec.description == "Forecast the weather.\n\nLooks a few days ahead."
    assert "----" not in spec.description


def test_a_documented_parameter_that_does_not_exist_adds_nothing_to_the_schema() -> None:
    def google(a: int) -> int:
        """Sum.

        Args:
            a: the value
            ghost: not a parameter
        """
        return a

    spec = spec_from_function(google, effect="read")
    assert list(spec.input_schema["properties"]) == ["a"]
    assert spec.input_schema["properties"]["a"]["description"] == "the value"


def only_when_checking(amount: Decimal) -> str:
    return str(amount)


def test_a_type_imported_only_for_type_checking_is_refused_with_advice() -> None:
    with pytest.raises(ToolDefinitionError, match=r"Decimal.*import"):
        spec_from_function(only_when_checking, effect="read")
