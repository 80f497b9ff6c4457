"""An interruption that reaches a sync caller while its coroutine is being handed to the portal loop.

A signal handler runs between two bytecodes of the main thread: a Ctrl-C can land after the
coroutine was queued on the portal loop and before the caller began waiting for it. The coroutine
must still be cancelled and its end awaited, as for an interruption during the wait; else the
calls it began hang on in the background (the tools' work, their ledger entries) until the runtime
closes. The handover is made to raise the way a signal there would: inside the portal loop's
``call_soon_threadsafe``, once the coroutine was queued.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from actionspace.execution._portal import CANCEL_WAIT_S, Portal


class Interrupted(BaseException):
    """What a signal handler raises in the calling thread."""


def _interrupt_after_queueing(monkeypatch: pytest.MonkeyPatch, portal: Portal) -> None:
    """The next ``call_soon_threadsafe`` of ``portal``'s loop queues its callback, then raises."""
    portal.run(asyncio.sleep(0))  # the loop and its thread exist from here
    loop = portal._loop
    assert loop is not None
    queue = loop.call_soon_threadsafe
    armed = [True]

    def queued_then_interrupted(callback: Any, *args: Any, **kwargs: Any) -> Any:
        handle = queue(callback, *args, **kwargs)
        if armed[0]:
            armed[0] = False
            raise Interrupted
        return handle

    monkeypatch.setattr(loop, "call_soon_threadsafe", queued_then_interrupted)


def test_a_coroutine_queued_when_the_interruption_lands_is_cancelled_before_it_propagates(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    portal = Portal()
    began, cancelled = threading.Event(), threading.Event()

    async def hang() -> None:
        began.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    _interrupt_after_queueing(monkeypatch, portal)
    cut = time.monotonic()
    with pytest.raises(Interrupted):
        portal.run(hang())
    assert time.monotonic() - cut < CANCEL_WAIT_S  # it saw the coroutine end, not waited it out
    # cancelled before the interruption reached the caller, not left to run 30 s in the background
    assert cancelled.is_set() or not began.is_set()
    time.sleep(0.2)  # had it been left queued, it would have begun by now
    assert cancelled.is_set() or not began.is_set()
    monkeypatch.undo()
    assert portal.run(asyncio.sleep(0, "next")) == "next"  # the loop serves the next call
    portal.close()


def test_an_interrupted_handover_leaves_the_portal_closable(monkeypatch: pytest.MonkeyPatch) -> None:
    """The call the interruption cut is no longer counted as waiting: close stops the loop's thread."""
    portal = Portal()
    _interrupt_after_queueing(monkeypatch, portal)
    thread = portal._thread
    assert thread is not None
    with pytest.raises(Interrupted):
        portal.run(asyncio.sleep(30))
    monkeypatch.undo()
    portal.close()
    thread.join(5)
    assert not thread.is_alive()


def test_a_tools_own_cancel_and_interrupt_still_reach_the_caller_as_before() -> None:
    portal = Portal()

    async def cancels_itself() -> None:
        raise asyncio.CancelledError

    async def exits() -> None:
        raise KeyboardInterrupt

    from concurrent.futures import CancelledError as FutureCancelled

    with pytest.raises(FutureCancelled):
        portal.run(cancels_itself())
    with pytest.raises(KeyboardInterrupt):
        portal.run(exits())
    assert portal.run(asyncio.sleep(0, 7)) == 7
    portal.close()
