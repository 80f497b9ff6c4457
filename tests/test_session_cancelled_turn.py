"""An app that stops waiting for a turn while a write runs: ``asyncio.wait_for`` or
``asyncio.timeout`` around ``s.ahandle``, a user's "stop", a client that disconnected. The tool's
task is cancelled with the caller's, and whether its request landed is not known.

Before, the entry stayed ``dispatched`` for the life of the process: the model's next proposal of
the same action waited 30 s and read ``transient: another caller is executing this action``, and
every later one the same. Now the entry is left ``unknown`` and a new proposal settles it at once,
as a lost answer is settled: a ``native`` tool is asked again with the same key (it dedupes), a
``query`` tool's status decides, anything else is ``unknown_commit`` and never sent again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.ledger.commit import MAX_WAIT_S
from actionspace.ledger.status import Committed, NotCommitted
from actionspace.session import Session


@pytest.fixture(params=["memory", "sqlite"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'a.db'}"


def _message(call_id: str) -> dict[str, Any]:
    function = {"name": "pay", "arguments": '{"amount": 5}'}
    return {"role": "assistant", "tool_calls": [{"id": call_id, "type": "function", "function": function}]}


async def _stop_waiting_once_sent(turn: Awaitable[Any], started: asyncio.Event) -> None:
    """Await ``turn`` under a deadline (``asyncio.timeout``) that falls due the moment the tool has
    started, so the caller always stops waiting while the write runs: a fixed deadline (50 ms) fell
    due before the tool started on a busy machine, and then nothing was left running to abandon."""
    loop = asyncio.get_running_loop()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(None) as deadline:

            async def fall_due_once_started() -> None:
                await started.wait()
                deadline.reschedule(loop.time())

            arming = asyncio.create_task(fall_due_once_started())
            try:
                await turn
            finally:
                arming.cancel()
    assert started.is_set()


async def _cancelled_then_again(s: Session, started: asyncio.Event) -> tuple[Any, float]:
    await _stop_waiting_once_sent(s.ahandle(_message("a")), started)
    t0 = time.monotonic()
    again = (await s.ahandle(_message("b"))).observations[0]
    return again, time.monotonic() - t0


def test_a_write_of_a_cancelled_turn_is_unknown_commit_at_once_and_never_sent_again(url: str) -> None:
    sent: list[int] = []
    rt = Runtime(url)

    async def main() -> tuple[Any, float, Any]:
        started = asyncio.Event()

        @rt.tool(effect="write")
        async def pay(amount: int) -> str:
            """Pay an amount."""
            sent.append(amount)
            started.set()
            await asyncio.sleep(3600)  # the request is out; its answer has not come
            return "paid"

        s = rt.session()
        await s.auser("pay 5")
        again, waited = await _cancelled_then_again(s, started)
        later = (await s.ahandle(_message("c"))).observations[0]
        return again, waited, later

    with rt:
        again, waited, later = asyncio.run(main())
    assert again.error is not None and again.error.category == "unknown_commit", again.error
    assert "cancelled" in again.error.message
    assert waited < MAX_WAIT_S / 2  # not the 30 s wait for another caller
    assert later.error is not None and later.error.category == "unknown_commit"
    assert sent == [5]


def test_a_native_tool_of_a_cancelled_turn_is_asked_again_with_the_same_key(url: str) -> None:
    charges: dict[str, int] = {}
    keys: list[str] = []
    rt = Runtime(url)

    async def main() -> tuple[Any, float]:
        started = asyncio.Event()

        @rt.tool(effect="external", idempotency="native")
        async def pay(amount: int, idempotency_key: str) -> str:
            """Charge (the bank dedupes by key)."""
            keys.append(idempotency_key)
            charges.setdefault(idempotency_key, amount)  # committed before the answer
            started.set()
            if len(keys) == 1:
                await asyncio.sleep(3600)  # cancelled with its caller
            return "charged"

        s = rt.session()
        await s.auser("pay 5")
        return await _cancelled_then_again(s, started)

    with rt:
        again, waited = asyncio.run(main())
    assert again.status == "ok", again.error
    assert waited < MAX_WAIT_S / 2 and len(keys) == 2 and len(set(keys)) == 1  # asked again, same key
    assert list(charges.values()) == [5]


@pytest.mark.parametrize("committed", [True, False])
def test_a_query_tool_of_a_cancelled_turn_is_settled_by_its_status(url: str, committed: bool) -> None:
    orders: dict[str, int] = {}
    sends: list[str] = []
    rt = Runtime(url)

    def status(*, key: str, arguments: dict[str, Any]) -> Any:
        return Committed(f"order {orders[key]}") if key in orders else NotCommitted()

    async def main() -> tuple[Any, float]:
        started = asyncio.Event()

        @rt.tool(effect="external", idempotency="query", status_query=status)
        async def pay(amount: int, idempotency_key: str) -> str:
            """Place an order."""
            sends.append(idempotency_key)
            started.set()
            if len(sends) == 1:
                if committed:
                    orders[idempotency_key] = amount
                await asyncio.sleep(3600)  # cancelled with its caller
            orders[idempotency_key] = amount
            return f"order {amount}"

        s = rt.session()
        await s.auser("pay 5")
        return await _cancelled_then_again(s, started)

    with rt:
        again, waited = asyncio.run(main())
    assert again.status == "ok", again.error
    assert waited < MAX_WAIT_S / 2
    assert len(sends) == (1 if committed else 2)  # sent again only when it is known not to have landed
    if committed:
        assert again.diagnostics.get("resolved_by") == "status_query"


def test_a_process_keeps_a_bounded_memory_of_the_sends_it_abandoned(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long-lived process (a gateway whose clients disconnect) abandons sends for as long as it
    runs: it remembers the latest ``_MAX_ABANDONED`` of them, not every one, and the latest is
    still settled at once when proposed again."""
    from actionspace.ledger import commit

    monkeypatch.setattr(commit, "_MAX_ABANDONED", 3)
    monkeypatch.setattr(commit, "_ABANDONED", {})
    sent: list[int] = []
    rt = Runtime(url)

    def message(call_id: str, amount: int) -> dict[str, Any]:
        function = {"name": "pay", "arguments": f'{{"amount": {amount}}}'}
        call = {"id": call_id, "type": "function", "function": function}
        return {"role": "assistant", "tool_calls": [call]}

    async def main() -> tuple[Any, float]:
        started = asyncio.Event()

        @rt.tool(effect="write")
        async def pay(amount: int) -> str:
            """Pay an amount."""
            sent.append(amount)
            started.set()
            await asyncio.sleep(3600)  # cancelled with its caller
            return "paid"

        s = rt.session()
        await s.auser("pay them all")
        for amount in range(1, 8):
            started.clear()
            await _stop_waiting_once_sent(s.ahandle(message(f"a{amount}", amount)), started)
        assert len(commit._ABANDONED) == 3
        t0 = time.monotonic()
        again = (await s.ahandle(message("b", 7))).observations[0]
        return again, time.monotonic() - t0

    with rt:
        again, waited = asyncio.run(main())
    assert again.error is not None and again.error.category == "unknown_commit", again.error
    assert waited < MAX_WAIT_S / 2
    assert sent == list(range(1, 8))
