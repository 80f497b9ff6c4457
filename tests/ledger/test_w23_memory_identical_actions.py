"""The memory store keeps the work of one write independent of how many identical actions the run
already has: a plan of thousands of identical writes (same tool, same arguments, other nodes) costs
linear work, not quadratic, and the unsettled identical action is still the one found."""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.ledger import memory
from actionspace.ledger.entries import LedgerEntry
from actionspace.ledger.memory import MemoryLedgerStore
from tests.ledger.factories import NOW, entry

MEMORY_FILE = memory.__file__


def _lines_in_memory_store(work: Callable[[], None]) -> int:
    """How many lines of ``ledger/memory.py`` run during ``work()`` (a count of work, not a time)."""
    count = 0

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return local

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        return local if frame.f_code.co_filename == MEMORY_FILE else None

    sys.settrace(tracer)
    try:
        work()
    finally:
        sys.settrace(None)
    return count


def _identical_writes(n: int) -> Callable[[], None]:
    """What the engine asks the memory store for ``n`` identical writes of one run, one after the
    other: the pending identical action, the intent, the commit; then the purge of the run."""
    store = MemoryLedgerStore()
    first = entry("n0", at=NOW)

    def work() -> None:
        for i in range(n):
            new = entry(f"n{i}", at=NOW + i, args_digest=first.args_digest)
            assert store.pending_action("r1", new.tool, new.args_digest) is None
            begun = store.begin(new.evolve(state="dispatched", attempts=1, updated_at=NOW + i))
            assert begun.created
            done = begun.entry.evolve(state="committed", updated_at=NOW + i)
            assert store.transition(new.key, ("dispatched",), done) is not None
        assert store.purge(older_than=NOW + n) == n

    return work


def test_identical_writes_cost_the_memory_store_linear_work() -> None:
    small = _lines_in_memory_store(_identical_writes(500))
    large = _lines_in_memory_store(_identical_writes(2000))
    assert large / small < 6, (small, large)  # 4 times the writes; quadratic work is 16 times


def _plan_of_identical_writes(n: int) -> Callable[[], None]:
    rt = Runtime("memory://", recover_on_start=False)
    sent: list[int] = []

    @rt.tool(effect="write")
    def put(x: int) -> int:
        """Write x."""
        sent.append(x)
        return x

    nodes = [{"id": f"n{i}", "tool": "put", "arguments": {"x": 1}} for i in range(n)]

    def work() -> None:
        result = rt.run_plan({"nodes": nodes}, run_id="r")
        assert result.status == "ok"
        assert len(sent) == n

    return work


def test_a_plan_of_identical_writes_costs_the_memory_store_linear_work() -> None:
    small = _lines_in_memory_store(_plan_of_identical_writes(100))
    large = _lines_in_memory_store(_plan_of_identical_writes(400))
    assert large / small < 6, (small, large)


@pytest.mark.parametrize("settle", ["committed", "failed"])
def test_an_identical_action_settled_and_sent_again_is_pending_again(settle: str) -> None:
    store = MemoryLedgerStore()
    old = entry("n0", at=NOW, state="dispatched", attempts=1)
    young = entry("n1", at=NOW + 1, state="dispatched", attempts=1, args_digest=old.args_digest)
    store.begin(old)
    store.begin(young)
    assert _pending(store, old) == old.key
    assert store.transition(old.key, ("dispatched",), old.evolve(state=settle)) is not None
    assert _pending(store, old) == young.key
    assert store.transition(young.key, ("dispatched",), young.evolve(state="unknown")) is not None
    assert _pending(store, old) == young.key
    assert store.transition(young.key, ("unknown",), young.evolve(state="accepted")) is not None
    assert _pending(store, old) is None
    if settle == "failed":  # a retryable failure is sent again: pending again, the oldest
        assert store.transition(old.key, ("failed",), old.evolve(state="dispatched")) is not None
        assert _pending(store, old) == old.key
    assert store.purge(older_than=float("inf")) == (1 if settle == "committed" else 0)


def test_a_purged_action_is_never_pending_and_its_node_may_begin_again() -> None:
    store = MemoryLedgerStore()
    done = entry("n0", at=NOW, state="committed")
    store.begin(done)
    assert store.purge(older_than=NOW + 1) == 1
    assert _pending(store, done) is None
    again = done.evolve(state="dispatched", updated_at=NOW + 2)
    assert store.begin(again).created
    assert _pending(store, done) == done.key


def _pending(store: MemoryLedgerStore, like: LedgerEntry) -> str | None:
    found = store.pending_action(like.run_id, like.tool, like.args_digest)
    return None if found is None else found.key
