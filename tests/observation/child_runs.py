"""Running a script of a test in a child process with a memory ceiling and a deadline, so a value
that would cost far more to write than to hold fails the test instead of stalling or exhausting the
machine (shared by the bounded-results and shared-arguments tests)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

CHILD_PRELUDE = """
import resource

resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))

def shared(levels):
    value = "leaf"
    for _ in range(levels):
        value = [value, value]
    return value
"""
"""What each child script begins with: the memory ceiling (4 GiB of address space) and
``shared(levels)``, a list shared down ``levels`` levels (2**levels paths through 2 × levels lists)."""


def run_child(script: str, *args: str, deadline_s: float = 300) -> dict[str, Any]:
    """Run ``CHILD_PRELUDE`` + ``script`` with ``args`` (``sys.argv[1:]``); the JSON object its last
    line of output prints. Fails the test when the child fails or outlives ``deadline_s``."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD_PRELUDE + script, *args],
        capture_output=True,
        text=True,
        timeout=deadline_s,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def cut_and_said_so(out: dict[str, Any]) -> None:
    """The tool ran and its result is shown, cut to a small observation that says it is incomplete."""
    assert out["status"] == "ok" and out["category"] is None
    assert out["complete"] is False
    assert out["data_bytes"] < 40_000
