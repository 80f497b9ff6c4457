"""Reliability bins hold exactly the confidences their bounds say: [low, high), 1.0 in the last."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from actionspace.evaluation.calibration import reliability


def _bin_of(confidence: float, n_bins: int) -> dict[str, float]:
    bins: list[dict[str, float]] = [
        b for b in reliability([(confidence, True)], n_bins=n_bins)["bins"] if b["count"]
    ]
    assert len(bins) == 1
    return bins[0]


def test_a_confidence_on_a_bin_edge_goes_into_the_bin_that_starts_there() -> None:
    # 0.29 * 100 is 28.999999999999996: the edge value must still open the bin [0.29, 0.30)
    assert (_bin_of(0.29, 100)["low"], _bin_of(0.29, 100)["high"]) == (0.29, 0.3)
    assert _bin_of(15 / 22, 22)["low"] == 15 / 22


@st.composite
def _bins_and_confidence(draw: st.DrawFn) -> tuple[int, float]:
    """A bin count and a confidence, often exactly on (or next to) one of its bin edges."""
    n_bins = draw(st.integers(min_value=1, max_value=400))
    edge = draw(st.integers(min_value=0, max_value=n_bins)) / n_bins
    nudge = draw(st.sampled_from((0.0, -1.0, 1.0)))
    near = min(1.0, max(0.0, math.nextafter(edge, edge + nudge) if nudge else edge))
    return n_bins, draw(st.one_of(st.just(near), st.floats(min_value=0.0, max_value=1.0)))


def test_every_bin_edge_up_to_120_bins_opens_its_own_bin() -> None:
    for n_bins in range(1, 121):
        for k in range(n_bins):
            found = _bin_of(k / n_bins, n_bins)
            assert found["low"] <= k / n_bins < found["high"], (n_bins, k)


@given(_bins_and_confidence())
def test_every_confidence_lies_within_the_bounds_of_its_bin(case: tuple[int, float]) -> None:
    n_bins, confidence = case
    found = _bin_of(confidence, n_bins)
    if confidence == 1.0:
        assert found["high"] == 1.0
    else:
        assert found["low"] <= confidence < found["high"]
