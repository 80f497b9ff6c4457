"""An iterator a tool returns is read within a bound on its items too, not only on its characters:
an endless generator of small objects (rows, numbers) is cut long before its tool's timeout, and
the call's memory stays bounded, the observation saying it is incomplete."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from typing import Any

from actionspace import Runtime, ToolCall


def test_an_endless_generator_of_rows_is_cut_by_count_before_its_timeout() -> None:
    rt = Runtime("memory://")
    made = itertools.count()

    @rt.tool(effect="none", timeout_s=20)
    def rows() -> Iterator[dict[str, Any]]:
        """Every row there is."""
        return ({"i": next(made), "name": "x"} for _ in itertools.count())

    started = time.monotonic()
    obs = rt.call(ToolCall(name="rows", arguments={}))
    took = time.monotonic() - started
    assert obs.status == "ok"
    assert obs.complete is False
    assert took < 10, f"read for {took:.1f} s, the tool's whole timeout"
    assert next(made) < 1_000_000  # read no further than a bound far below what the timeout allows


def test_a_finite_generator_under_the_bound_is_read_whole() -> None:
    rt = Runtime("memory://")

    @rt.tool(effect="none")
    def numbers() -> Iterator[int]:
        """A few numbers."""
        return iter(range(1000))

    obs = rt.call(ToolCall(name="numbers", arguments={}))
    assert obs.status == "ok" and obs.complete is True
    assert obs.data.split() == [str(i) for i in range(1000)]
