"""The CI slice of the crash sweep (the full one: ``actionspace sweep --seeds 500``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from actionspace import _crash
from actionspace.evaluation.sweep import KINDS, run_case

SEEDS = 20


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("point", _crash.POINTS)
def test_a_crash_at_any_ledger_boundary_never_duplicates_or_loses_an_effect(
    point: str, kind: str, tmp_path: Path
) -> None:
    crashed = 0
    for seed in range(SEEDS):
        folder = tmp_path / str(seed)
        folder.mkdir()
        result = run_case(point, kind, seed, folder)
        crashed += result.crashed
        assert result.duplicates == 0, result
        assert result.lost == 0, result
        assert result.incomplete == 0, result
        assert not result.problems, result
        if kind != "none":
            assert result.unknown_commit == 0, result
    assert crashed > 0, f"{point} was never reached"
