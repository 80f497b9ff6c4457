"""A clock for the per-second tool limits that moves only when a test moves it: a test of a limit
asserts which starts one window admits, never how many seconds a loaded machine took."""

from __future__ import annotations

import functools
import threading

import pytest

from actionspace.plan import _waves, scheduler


class StillClock:
    """Seconds that stand still until :meth:`advance`; counts how often the limits read it."""

    def __init__(self) -> None:
        self.now = 0.0
        self.reads = 0
        self._read = threading.Condition()

    def __call__(self) -> float:
        with self._read:
            self.reads += 1
            self._read.notify_all()
            return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def read_at_least(self, reads: int, timeout: float) -> bool:
        """Wait until the limits read the clock ``reads`` times in all; False at ``timeout``."""
        with self._read:
            return self._read.wait_for(lambda: self.reads >= reads, timeout)


def still_clock(monkeypatch: pytest.MonkeyPatch, *, window_s: float = 1.0) -> StillClock:
    """Every plan run from now on counts its per-second limits by a :class:`StillClock` (the one
    answered) over windows of ``window_s``: a refused start is looked at again every ``window_s``
    seconds and is admitted only once the test advanced the clock a window on."""
    clock = StillClock()
    built = functools.partial(_waves.StartWindows, window_s=window_s, clock=clock)
    monkeypatch.setattr(scheduler, "StartWindows", built)
    return clock
