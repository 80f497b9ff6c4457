"""Parsing time grows linearly with the input on adversarial outputs of every family.

Ratios of times, never absolute times: growing the input tenfold must grow the time by well under
the hundredfold a quadratic scan would take (the bound is 30x). Each time is the CPU time this
process spent parsing (``time.process_time``), not the wall time: other processes taking the cores
(a loaded machine, the other test worker) stretch the wall time of one measurement and not of the
other, but leave the work parsing did unchanged. Each time is the best of a few runs; a floor keeps
sub-millisecond timings (dominated by noise) from making ratios meaningless.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial

import pytest

from actionspace.parse import parse
from tests.parse.adversarial import cases

RATIO = 30.0
"""Tenfold input: linear work takes 10x, a quadratic scan 100x; 30 leaves room for cache effects of a
larger input (every timing is a best of several) and still fails anything growing like n^1.5 or
faster."""
FLOOR_S = 0.01
CASES = cases()


def prefix_of(text: str, size: int) -> str:
    return text[:size]


def best_time(text: str, runs: int = 3) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.process_time()
        result = parse(text)
        best = min(best, time.process_time() - start)
        assert result.error is None or result.error.category == "parse_error"
    return best


def ratio(
    make: Callable[[int], str], small: int, large: int, attempts: int = 3
) -> tuple[float, float, float]:
    """t(large) / t(small) (small floored), the lowest of a few attempts: what still varies in CPU
    time (caches, a garbage collection) only ever inflates a timing, while a super-linear scan
    inflates every attempt."""
    best = (float("inf"), 0.0, 0.0)
    small_text, large_text = make(small), make(large)
    for _ in range(attempts):
        t_small = best_time(small_text, runs=5)
        t_large = best_time(large_text, runs=2 if large <= 200_000 else 1)
        best = min(best, (t_large / max(t_small, FLOOR_S), t_small, t_large))
        if best[0] < RATIO:
            break
    return best


@pytest.mark.parametrize(("family", "name", "make"), CASES, ids=[f"{f}-{n}" for f, n, _ in CASES])
def test_tenfold_larger_adversarial_input_takes_far_less_than_a_hundredfold_time(
    family: str, name: str, make: Callable[[int], str]
) -> None:
    measured = ratio(make, 20_000, 200_000)
    assert measured[0] < RATIO, (family, name, measured)


@pytest.mark.slow
@pytest.mark.parametrize(("family", "name", "make"), CASES, ids=[f"{f}-{n}" for f, n, _ in CASES])
def test_adversarial_inputs_from_ten_thousand_to_a_million_characters_parse_in_linear_time(
    family: str, name: str, make: Callable[[int], str]
) -> None:
    low = ratio(make, 10_000, 100_000)
    high = ratio(make, 100_000, 1_000_000)
    assert low[0] < RATIO, (family, name, low)
    assert high[0] < RATIO, (family, name, high)


def test_a_megabyte_of_empty_think_blocks_and_of_eos_runs_parses_quickly_relative_to_its_size() -> None:
    # The shapes reported as quadratic: 1 MB of "<think></think>" and runs of " </s>".
    think = "<think></think>" * (1_000_000 // 15)
    eos = " </s>" * (1_000_000 // 5)
    for text in (think, eos):
        measured = ratio(partial(prefix_of, text), len(text) // 10, len(text))
        assert measured[0] < RATIO, measured
