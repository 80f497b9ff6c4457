"""The CI slice of the crash sweep (the full one: ``actionspace sweep --seeds 500``)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from actionspace import _crash
from actionspace.evaluation import sweep as sweep_module
from actionspace.evaluation.sweep import KINDS, CaseResult, run_case

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


def test_a_run_that_hangs_is_reported_as_a_problem_not_counted_as_the_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = sweep_module._workload

    def workload(folder: Path, kind: str) -> None:
        if _crash._target is not None:  # the first run, armed to crash: it hangs before any call
            time.sleep(60)
        real(folder, kind)

    monkeypatch.setattr(sweep_module, "_workload", workload)  # the forked children inherit it
    monkeypatch.setattr(sweep_module, "CASE_TIMEOUT_S", 1.0, raising=False)  # (the code before: 120 s)
    result = run_case("after_response", "none", 0, tmp_path)
    assert not result.crashed
    assert result.problems == ["the first run did not end within 1 s and was killed"]
    assert not result.ok
    # the restart ran the whole workload: every payment made once, every node committed
    assert (result.duplicates, result.lost, result.incomplete, result.unknown_commit) == (0, 0, 0, 0)


def test_the_sweep_command_starts_no_thread_that_would_run_while_its_cases_fork(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from typer.testing import CliRunner

    from actionspace.cli import app

    before = set(threading.enumerate())  # (other tests of this process may have left some)
    started: list[list[str]] = []

    def fake_sweep(**kwargs: Any) -> list[CaseResult]:
        out = []
        for seed in range(3):  # where each case would fork its workload
            started.append([t.name for t in threading.enumerate() if t not in before])
            out.append(CaseResult("after_response", "none", seed, crashed=True, unknown_commit=1))
            kwargs["progress"](out[-1])
        return out

    monkeypatch.setattr(sweep_module, "sweep", fake_sweep)
    result = CliRunner().invoke(app, ["sweep", "--seeds", "1", "--point", "after_response", "--kind", "none"])
    assert result.exit_code == 0, result.output
    assert started == [[], [], []]


def test_the_sweep_forks_its_cases_with_the_runtime_already_loaded() -> None:
    """Every case forks two children that run a workload on the runtime; a child that had to import
    it (about 0.3 s here) made ``actionspace sweep --seeds 100`` take 24 minutes instead of 6.
    The command's process loads it once, before the first fork, so each child inherits it."""
    import json
    import subprocess
    import sys

    script = (
        "import json, sys\n"
        "import multiprocessing.process as mpp\n"
        "loaded = []\n"
        "real = mpp.BaseProcess.start\n"
        "def start(self):\n"
        "    loaded.append('actionspace.runtime' in sys.modules)\n"
        "    raise SystemExit(0)\n"
        "mpp.BaseProcess.start = start\n"
        "sys.argv = ['actionspace', 'sweep', '--seeds', '1', '--kind', 'none', '--json']\n"
        "from actionspace.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(json.dumps(loaded))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [True]
