"""Ctrl-C during a long command: one line saying it was interrupted and what was (not) written, exit 130.

Each command runs in a real process of its own session, sent SIGINT as a terminal sends it (to the
whole process group). The long part of a command is a wrapper that says it has started, then
either runs the real work (``timeouts``, far more trials than can finish) or waits, so the signal
lands while the command is at work rather than before or after it.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

READY = "READY-w53"
_DEADLINE_S = 60.0

_WRAP = """
import sys, time
import {module} as target
real = target.{name}
def wrapped(*args, **kwargs):
    sys.stderr.write({line!r})  # one write: the line is whole once it is seen
    sys.stderr.flush()
    {then}
target.{name} = wrapped
sys.argv = ["actionspace", *{argv!r}]
from actionspace.cli import main
main()
"""


def _interrupted(module: str, name: str, argv: list[str], *, run_real: bool) -> tuple[int, str]:
    """Run ``actionspace ARGV`` with ``module.name`` wrapped; SIGINT its group once it is at work."""
    then = "return real(*args, **kwargs)" if run_real else "time.sleep(120)"
    script = _WRAP.format(module=module, name=name, line=f"{READY}\n", then=then, argv=argv)
    child = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1"},
    )
    assert child.stderr is not None
    seen = b""
    deadline = time.monotonic() + _DEADLINE_S
    while f"{READY}\n".encode() not in seen:
        left = deadline - time.monotonic()
        if left <= 0 or child.poll() is not None:
            child.kill()
            pytest.fail(f"the command never started its work: {seen.decode(errors='replace')}")
        with selectors.DefaultSelector() as waiting:  # poll-based: a worker may hold fds past 1024
            waiting.register(child.stderr, selectors.EVENT_READ)
            ready = waiting.select(left)
        if ready:
            seen += os.read(child.stderr.fileno(), 65536)
    os.killpg(child.pid, signal.SIGINT)
    try:
        _, rest = child.communicate(timeout=_DEADLINE_S)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.communicate()
        pytest.fail("the command did not stop on Ctrl-C")
    return child.returncode, (seen + rest).decode(errors="replace")


def _said(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip() and READY not in line]
    assert lines, stderr
    assert lines[-1].startswith("error: interrupted: "), stderr
    return lines[-1]


def test_timeouts_interrupted_says_so_and_that_nothing_was_written() -> None:
    code, stderr = _interrupted(
        "actionspace.evaluation.timeouts",
        "execute_and_timeout",
        ["timeouts", "--trials", "100000000"],
        run_real=True,
    )
    assert code == 130
    assert "nothing was written" in _said(stderr)


def test_demo_interrupted_names_the_store_that_keeps_the_runs_so_far(tmp_path: Path) -> None:
    store = tmp_path / "trace.db"
    code, stderr = _interrupted(
        "actionspace.demo.runner",
        "run_scenarios",
        ["demo", "--dir", str(tmp_path / "demo"), "--store", f"sqlite:///{store}"],
        run_real=False,
    )
    assert code == 130
    said = _said(stderr)
    assert str(store) in said and str(tmp_path / "demo") in said


def test_eval_suite_interrupted_says_no_report_was_written(tmp_path: Path) -> None:
    out = tmp_path / "report"
    code, stderr = _interrupted(
        "actionspace.evaluation.runner",
        "evaluate",
        ["eval", "suite", "demo", "--out", str(out), "--workers", "1"],
        run_real=False,
    )
    assert code == 130
    assert f"no report was written to {out}" in _said(stderr)
    assert not (out / "report.html").exists() and not (out / "metrics.json").exists()


def test_monitor_interrupted_says_nothing_was_written(tmp_path: Path) -> None:
    from actionspace.trace.store import open_trace_store

    store = f"sqlite:///{tmp_path / 'trace.db'}"
    open_trace_store(store).close()
    code, stderr = _interrupted(
        "actionspace.evaluation.monitor_cli", "monitor", ["monitor", "--store", store], run_real=False
    )
    assert code == 130
    assert "nothing was written" in _said(stderr)


def test_a_command_that_exits_130_on_its_own_is_not_called_interrupted() -> None:
    script = (
        "import sys, typer\n"
        "from actionspace.cli import app, main\n"
        "@app.command('w53-exit')\n"
        "def w53_exit() -> None:\n"
        "    raise typer.Exit(130)\n"
        "sys.argv = ['actionspace', 'w53-exit']\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 130
    assert "interrupted" not in done.stderr
