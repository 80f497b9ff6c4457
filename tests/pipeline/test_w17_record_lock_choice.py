"""The memory trace store's record of a simple call skips the store's lock only where the GIL is on.

The unlocked append (pipeline/_direct.py, ``MemoryTraceStore.call_log``) relies on no thread
switching between the read of the run's next number and its raise; a free-threaded build
(``sys._is_gil_enabled()`` exists and returns False) runs threads truly at once, so there every
record goes in through ``append_kept``, under the lock. The store chooses once, when it is made;
here its probe is replaced to make it choose either way.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.trace.memory import MemoryTraceStore

RUN = "run-lock-choice"
CALLS = 40
STEADY = 20
"""The last calls counted: the first ones take the general path while the tool's entry warms."""


class _CountingLock:
    """The store's lock, counting how often it is taken."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.taken = 0

    def __enter__(self) -> bool:
        self.taken += 1
        return self.lock.__enter__()

    def __exit__(self, *exc: Any) -> None:
        self.lock.__exit__(*exc)

    def acquire(self, *args: Any) -> bool:
        self.taken += 1
        return self.lock.acquire(*args)

    def release(self) -> None:
        self.lock.release()


def _entry(a: int, call_id: str) -> str:
    arguments = json.dumps({"a": a, "b": 1})
    return json.dumps(
        {"id": call_id, "type": "function", "function": {"name": "add", "arguments": arguments}}
    )


def _lock_taken(
    probe: Callable[[], bool] | None, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[int], list[Any]]:
    """Make a runtime under ``probe`` (None: a build without ``sys._is_gil_enabled``) and call
    ``add`` on its simple path ``CALLS`` times: how often each of the last ``STEADY`` calls took the
    trace store's lock, and the observations' content hashes as the trace reads them back."""
    if probe is None:
        monkeypatch.delattr(sys, "_is_gil_enabled", raising=False)
    else:
        monkeypatch.setattr(sys, "_is_gil_enabled", probe, raising=False)
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="none")
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    with rt:
        store = rt.trace
        assert isinstance(store, MemoryTraceStore)
        lock = _CountingLock()
        monkeypatch.setattr(store, "_lock", lock)
        taken = []
        for i in range(CALLS):
            before = lock.taken
            obs = asyncio.run(rt.acall(_entry(i, f"c{i}"), run_id=RUN))
            assert obs.ok and obs.data == i + 1, obs
            taken.append(lock.taken - before)
        hashes = [e.data.get("content_hash") for e in rt.trace.events(RUN) if e.kind == "observation"]
        return taken[-STEADY:], hashes


def _hashes() -> list[str]:
    return [hashlib.sha256(str(i + 1).encode()).hexdigest() for i in range(CALLS)]


def test_a_free_threaded_build_appends_every_record_under_the_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    taken, hashes = _lock_taken(lambda: False, monkeypatch)
    assert all(n >= 1 for n in taken), taken  # each record under the store's lock
    assert hashes == _hashes()  # every record kept, in order


@pytest.mark.parametrize("probe", [None, lambda: True], ids=["no-probe", "gil-enabled"])
def test_a_build_with_the_gil_appends_records_without_the_lock(
    probe: Callable[[], bool] | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken, hashes = _lock_taken(probe, monkeypatch)
    assert taken == [0] * STEADY  # the run's next number raised and the record appended unlocked
    assert hashes == _hashes()


def test_the_choice_is_made_once_when_the_store_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe is read when the store is made, never on a call."""
    asked: list[int] = []

    def probe() -> bool:
        asked.append(1)
        return False

    monkeypatch.setattr(sys, "_is_gil_enabled", probe, raising=False)
    store = MemoryTraceStore()
    made = len(asked)
    assert made <= 1
    store.call_log("r")
    store.call_log("r")
    assert len(asked) == made
