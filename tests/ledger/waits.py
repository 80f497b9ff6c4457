"""Waiting, in the ledger's thread tests, for another thread to reach a step."""

from __future__ import annotations

import time
from collections.abc import Callable


def until(condition: Callable[[], bool], what: str, deadline_s: float) -> None:
    """Poll ``condition`` every millisecond; fail naming ``what`` once ``deadline_s`` passed (a
    bound far above the milliseconds a step takes: reached only when a thread waits for ever)."""
    deadline = time.monotonic() + deadline_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.001)
