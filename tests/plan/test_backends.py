"""Plan backends are found through entry points, once per name and process."""

from __future__ import annotations

from typing import Any

import pytest

import actionspace.plan.backends as backends
from actionspace.errors import ConfigurationError
from actionspace.plan.model import PlanResult


def test_a_backend_is_looked_up_once_and_a_missing_one_every_time(monkeypatch: pytest.MonkeyPatch) -> None:
    scans: list[str] = []

    class _Point:
        name = "fake"

        def load(self) -> Any:
            return run_elsewhere

    async def run_elsewhere(*_: Any, **__: Any) -> PlanResult:
        raise AssertionError("only looked up here, never run")

    def entry_points(*, group: str) -> list[_Point]:
        scans.append(group)
        return [_Point()]

    monkeypatch.setattr(backends, "entry_points", entry_points)
    backends.load_backend.cache_clear()
    try:
        assert backends.load_backend("fake") is run_elsewhere
        assert backends.load_backend("fake") is run_elsewhere
        assert len(scans) == 1  # every run_plan asks; the installed distributions are read once
        for _ in range(2):
            with pytest.raises(ConfigurationError, match="no plan backend 'absent'"):
                backends.load_backend("absent")
        assert len(scans) == 1 + 2 * 2  # a missing name is looked for again (lookup + the message)
    finally:
        backends.load_backend.cache_clear()
