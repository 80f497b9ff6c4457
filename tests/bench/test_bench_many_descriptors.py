"""The bench runs in a process that already holds many open files (a test session's, a service's):
its pass servers are waited for with poll, not ``select()``, which refuses descriptors >= 1024."""

from __future__ import annotations

import os
import resource
from collections.abc import Iterator

import pytest

from actionspace.bench import run_bench

HIGH = 1100


@pytest.fixture
def many_descriptors() -> Iterator[None]:
    """Open descriptors until one numbered above :data:`HIGH` exists; close them after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < HIGH + 200:
        if hard != resource.RLIM_INFINITY and hard < HIGH + 200:
            pytest.skip(f"the descriptor limit ({hard}) is too low")
        resource.setrlimit(resource.RLIMIT_NOFILE, (HIGH + 200, hard))
    opened = [os.open(os.devnull, os.O_RDONLY)]
    try:
        while opened[-1] < HIGH:
            opened.append(os.dup(opened[0]))
        yield
    finally:
        for fd in opened:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_bench_started_with_descriptors_above_1024_open_runs_its_passes(many_descriptors: None) -> None:
    result = run_bench(passes=1, scale=0.01, only=["direct"])
    assert result["errors"] == {}
    assert result["skipped"] == {}
    assert result["percall"]["direct.async_tool"]["result"] == 3
