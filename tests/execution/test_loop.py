"""The runtime's own event loops wake when their next timer is due, not a millisecond later.

asyncio's epoll selector hands ``select.epoll.poll`` ``math.ceil(timeout * 1e3) * 1e-3`` seconds,
and ``poll`` rounds that float up to a millisecond again: ``9 * 1e-3`` is
``0.009000000000000001``, so a wait of 8.x ms lasts 10 ms. CPython's conversion (seconds → ns,
rounded up; ns → ms, rounded up) is written out in :func:`_epoll_ms` to check the floats.
"""

from __future__ import annotations

import asyncio
import math
import select
import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actionspace import Plan, PlanNode, Runtime
from actionspace.execution.loop import OnceRoundedPolicy, epoll_seconds, new_event_loop, rounds_once

pytestmark = pytest.mark.skipif(not hasattr(select, "epoll"), reason="epoll is Linux's")


def _epoll_ms(seconds: float) -> int:
    """The milliseconds ``select.epoll.poll(seconds)`` waits (CPython: ns rounded up, then ms)."""
    return math.ceil(math.ceil(seconds * 1e9) / 1e6)


def test_the_standard_selector_waits_a_millisecond_more_for_some_timeouts() -> None:
    # EpollSelector rounds a timeout up to ``ms`` milliseconds and hands epoll ``ms * 1e-3``
    assert [ms for ms in range(1, 60) if _epoll_ms(ms * 1e-3) != ms] == [9, 13, 18, 26, 36, 52, 59]


@given(ms=st.integers(min_value=1, max_value=10**7))
def test_a_whole_millisecond_from_the_selector_is_waited_exactly(ms: int) -> None:
    assert _epoll_ms(epoll_seconds(ms * 1e-3)) == ms


@given(seconds=st.floats(min_value=1e-9, max_value=1e4, allow_nan=False))
def test_any_timeout_is_rounded_up_to_a_millisecond_once(seconds: float) -> None:
    waited = _epoll_ms(epoll_seconds(seconds))
    assert waited >= seconds * 1e3 - 1e-6  # never wakes early (beyond float noise)
    assert waited < seconds * 1e3 + 1  # and at most the rounding up, once


def test_zero_and_negative_timeouts_do_not_wait() -> None:
    assert epoll_seconds(0.0) == 0.0
    assert epoll_seconds(-1.0) == 0.0


class _Clock:
    """A loop's clock that moves only when the loop waits, by what epoll would wait: how long a
    wait lasts is then decided by the timeouts handed to epoll, never by how busy the machine is."""

    def __init__(self) -> None:
        self.now = 1000.0

    def time(self) -> float:
        return self.now


class _RecordingEpoll:
    """Stands in for the ``select.epoll`` a selector polls: notes the timeout it is handed, moves
    the clock by the milliseconds epoll would wait for it, and reports no events."""

    def __init__(self, real: Any, clock: _Clock) -> None:
        self._real = real
        self._clock = clock
        self.timeouts: list[float] = []

    def poll(self, timeout: float | None = None, maxevents: int = -1) -> list[tuple[int, int]]:
        assert timeout is not None and timeout >= 0, timeout  # a pending timer bounds every wait
        self.timeouts.append(timeout)
        self._clock.now += _epoll_ms(timeout) * 1e-3
        return []

    def __getattr__(self, name: str) -> Any:  # register, modify, unregister, fileno, close
        return getattr(self._real, name)


def _waited_ms(loop: asyncio.AbstractEventLoop, wait_s: float) -> list[int]:
    """The milliseconds epoll is asked to wait while ``loop`` runs ``asyncio.sleep(wait_s)``."""
    clock = _Clock()
    running: Any = loop  # the selector is the loop's own (``SelectorEventLoop._selector``)
    selector = running._selector
    if rounds_once(loop):  # ours wraps the epoll object in ``_Epoll``; the stdlib's polls it directly
        holder, attribute = selector._selector, "_epoll"
    else:
        holder, attribute = selector, "_selector"
    recorder = _RecordingEpoll(getattr(holder, attribute), clock)
    setattr(holder, attribute, recorder)
    running.time = clock.time
    try:
        started = clock.now
        loop.run_until_complete(asyncio.sleep(wait_s))
        assert clock.now - started >= wait_s  # the sleep ended when its timer was due, not before
    finally:
        setattr(holder, attribute, recorder._real)
        loop.close()
    return [_epoll_ms(timeout) for timeout in recorder.timeouts if timeout > 0]


def test_a_sleep_of_8_4_ms_takes_9_ms_on_our_loop_and_10_on_asyncios() -> None:
    assert _waited_ms(new_event_loop(), 0.0084) == [9]
    assert _waited_ms(asyncio.new_event_loop(), 0.0084) == [10]


@given(ms=st.integers(min_value=1, max_value=200), tenths=st.integers(min_value=1, max_value=9))
def test_a_sleep_waits_its_milliseconds_rounded_up_once_on_our_loop(ms: int, tenths: int) -> None:
    wait_s = (ms - 1 + tenths / 10) * 1e-3
    assert _waited_ms(new_event_loop(), wait_s) == [ms]


def test_the_kernel_waits_the_extra_millisecond_the_standard_selector_asks_for() -> None:
    # A lower bound only (epoll never wakes early; a busy machine can only make a wait longer):
    # the float that the standard selector hands epoll for 8.4 ms really is waited as 10 ms.
    epoll = select.epoll()
    try:
        for _ in range(3):
            started = time.monotonic()
            epoll.poll(math.ceil(0.0084 * 1e3) * 1e-3)
            assert time.monotonic() - started >= 0.0099
    finally:
        epoll.close()


def test_the_policy_makes_asyncio_run_use_our_loop() -> None:
    previous = asyncio.get_event_loop_policy()
    asyncio.set_event_loop_policy(OnceRoundedPolicy())
    try:
        assert asyncio.run(_running_loop_rounds_once())
    finally:
        asyncio.set_event_loop_policy(previous)
    assert not asyncio.run(_running_loop_rounds_once())


async def _running_loop_rounds_once() -> bool:
    return rounds_once(asyncio.get_running_loop())


def test_sync_calls_and_plans_run_async_tools_on_our_loop() -> None:
    seen: list[bool] = []
    with Runtime("memory://", recover_on_start=False) as rt:

        @rt.tool(effect="none")
        async def which_loop(n: int) -> int:
            """Note whether the loop running it rounds waits once."""
            seen.append(rounds_once(asyncio.get_running_loop()))
            await asyncio.sleep(0)
            return n

        assert rt.call({"name": "which_loop", "arguments": {"n": 1}}).data == 1
        plan = Plan(nodes=[PlanNode(id="a", tool="which_loop", arguments={"n": 2})])
        assert rt.run_plan(plan, run_id=rt.new_run()).status == "ok"
    assert seen == [True, True]
