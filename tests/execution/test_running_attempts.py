"""An attempt that outlives its timeout: never asked about, never sent twice, never run after it was
reported unsent. Driven by events (the tool blocks until the test releases it), not by sleeps."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.ledger.commit import still_running
from actionspace.ledger.recover import resolve_by_hand
from actionspace.ledger.status import NotCommitted


def _wait_until(predicate: Any, limit_s: float = 20.0) -> None:
    deadline = time.monotonic() + limit_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("the condition never came")
        time.sleep(0.002)


class Gateway:
    """A payment service whose first send hangs until released; it records every send it gets."""

    def __init__(self) -> None:
        self.sends: list[str] = []
        self.committed: set[str] = set()
        self.queries = 0
        self.release = threading.Event()

    def pay(self, idempotency_key: str, cents: int) -> str:
        self.sends.append(idempotency_key)
        if len(self.sends) == 1:
            self.release.wait(30)
        self.committed.add(idempotency_key)
        return f"paid {cents}"

    def status(self, *, key: str, arguments: dict[str, Any]) -> Any:
        self.queries += 1
        return NotCommitted()  # truthful: the hanging send has not committed (yet)


def _runtime(gw: Gateway, **options: Any) -> Runtime:
    rt = Runtime("memory://", **options)
    rt.add_tool(
        name="pay",
        input_schema={
            "type": "object",
            "properties": {"cents": {"type": "integer"}},
            "required": ["cents"],
            "additionalProperties": False,
        },
        fn=lambda cents, idempotency_key: gw.pay(idempotency_key, cents),
        effect="external",
        idempotency="query",
        status_query=gw.status,
        timeout_s=0.2,
    )
    return rt


def test_a_late_answer_settles_the_call_without_a_status_query_or_a_second_send() -> None:
    gw = Gateway()
    rt = _runtime(gw)

    def release_once_abandoned() -> None:
        _wait_until(lambda: rt.engine.executor.abandoned >= 1)
        gw.release.set()

    releaser = threading.Thread(target=release_once_abandoned)
    releaser.start()
    obs = rt.call({"name": "pay", "arguments": {"cents": 500}})
    releaser.join()
    assert obs.status == "ok", obs.error
    assert obs.diagnostics.get("resolved_by") == "late_answer"
    assert len(gw.sends) == 1
    assert gw.queries == 0


def test_an_attempt_still_running_is_unknown_commit_until_it_ends() -> None:
    gw = Gateway()
    rt = _runtime(gw)
    obs = rt.call({"name": "pay", "arguments": {"cents": 500}})
    assert obs.error is not None and obs.error.category == "unknown_commit"
    assert "still runs" in obs.error.message
    key = obs.error.details["idempotency_key"]
    assert still_running(key)
    assert len(gw.sends) == 1  # its status was asked ("not committed", truthfully) and not acted on
    # the same proposal again is not sent again
    again = rt.call({"name": "pay", "arguments": {"cents": 500}})
    assert again.error is not None and again.error.category == "unknown_commit"
    assert len(gw.sends) == 1
    # a person cannot mark it failed while it may still commit
    with pytest.raises(ValueError, match="still runs"):
        resolve_by_hand(rt.ledger, key, outcome="failed", by="ops", reason="looks dead", record=rt.record)
    gw.release.set()
    _wait_until(lambda: not still_running(key))
    assert key in gw.committed
    # its thread's outcome is the ledger's once it ends: nobody has to reconcile it by hand
    _wait_until(lambda: getattr(rt.ledger.get(key), "state", None) == "committed")
    replayed = rt.call({"name": "pay", "arguments": {"cents": 500}})
    assert replayed.status == "ok" and replayed.data == "paid 500"
    assert len(gw.sends) == 1
    rt.close(wait=True)


def test_a_send_that_never_got_a_thread_is_reported_unsent_and_never_runs() -> None:
    gw = Gateway()
    rt = _runtime(gw, max_threads=1)
    ran: list[int] = []
    hold = threading.Event()

    @rt.tool(effect="write", timeout_s=30)
    def slow_write(n: int) -> int:
        """Occupies the only worker thread."""
        hold.wait(30)
        return n

    @rt.tool(effect="write", timeout_s=0.2)
    def quick_write(n: int) -> int:
        """Queued behind slow_write."""
        ran.append(n)
        return n

    first = threading.Thread(target=rt.call, args=({"name": "slow_write", "arguments": {"n": 1}},))
    first.start()
    _wait_until(
        lambda: (
            rt.engine.executor._pool._work_queue.qsize() == 0 and len(rt.engine.executor._pool._threads) == 1
        )
    )
    obs = rt.call({"name": "quick_write", "arguments": {"n": 2}})
    assert obs.error is not None
    assert obs.error.category == "transient", obs.error
    assert obs.error.details.get("sent") is False
    hold.set()
    first.join()
    rt.close(wait=True)
    assert ran == []


def test_a_declared_timeout_holds_for_a_tool_without_effects() -> None:
    rt = Runtime("memory://")
    gate = threading.Event()

    @rt.tool(effect="none", timeout_s=0.2)
    def lookup(q: str) -> str:
        """Hangs until released."""
        gate.wait(30)
        return q

    started = time.monotonic()
    obs = rt.call({"name": "lookup", "arguments": {"q": "x"}})
    took = time.monotonic() - started
    gate.set()
    assert obs.error is not None and obs.error.category == "transient"
    assert took < 10  # far below the 30 s the tool would have held the caller
    rt.close(wait=True)
