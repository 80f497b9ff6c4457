"""Hostile values reaching an observation: what a read-back finds in a store (any Python value,
of any size) and numpy-like results, whose ``repr`` elides what it cannot show."""

from __future__ import annotations

import datetime
import decimal
import json
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.observation import shape
from actionspace.observation.postconditions import read_back
from actionspace.types import Observation


class _Unequal:
    def __eq__(self, other: object) -> bool:
        return False

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return "W" * 100_000


_STORED: list[Any] = [
    {"x": _Unequal()},
    {"x": datetime.datetime(2024, 1, 2, 3, 4, 5)},
    {"x": decimal.Decimal("1.5")},
    {"x": "a" * 1_000_000},
    {"x": b"\xff\x00"},
    {"x": float("nan")},
    {"x": {1, 2}},
]


@pytest.mark.parametrize("stored", _STORED, ids=lambda s: type(s["x"]).__name__)
def test_a_read_back_mismatch_on_any_stored_value_is_a_bounded_json_error(stored: dict[str, Any]) -> None:
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="write", writes=["ev:{x}"], verify=[read_back(fields=["x"], read=lambda a, d: stored)])
    def put(x: str) -> dict[str, Any]:
        """Store x."""
        return {"x": x}

    obs = rt.call({"name": "put", "arguments": {"x": "v"}})
    assert obs.error is not None and obs.error.category == "permanent"
    assert obs.error.details["reason"] == "read_back_mismatch"
    text = json.dumps(obs.to_dict(), allow_nan=False)
    assert len(text) < 20_000
    again = Observation.from_dict(json.loads(text))
    assert again.error is not None and again.error.details["expected"] == "v"


np = pytest.importorskip("numpy")


def test_a_numpy_array_is_its_values_not_its_elided_repr() -> None:
    shaped = shape({"a": np.array([[1, 2], [3, 4]]), "n": np.int64(5), "f": np.float32(1.5)})
    assert shaped.data == {"a": [[1, 2], [3, 4]], "n": 5, "f": 1.5}
    assert shaped.complete


def test_a_large_numpy_array_is_cut_and_says_so() -> None:
    shaped = shape(np.zeros(5_000_000))
    assert not shaped.complete
    assert isinstance(shaped.data, list) and shaped.data and shaped.data[0] == 0.0
    assert "..." not in json.dumps(shaped.data)


def test_non_finite_numpy_values_read_as_the_other_non_finite_numbers() -> None:
    shaped = shape([np.float64("nan"), np.array([np.inf])])
    assert shaped.data == ["NaN", ["Infinity"]]
