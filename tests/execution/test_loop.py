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
import statistics
import time
from collections.abc import Callable

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


def _median_wait(run: Callable[[float], float], wait_s: float, rounds: int = 15) -> float:
    return statistics.median(run(wait_s) for _ in range(rounds))


async def _slept(wait_s: float) -> float:
    started = time.perf_counter()
    await asyncio.sleep(wait_s)
    return time.perf_counter() - started


def _on_ours(wait_s: float) -> float:
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        assert rounds_once(runner.get_loop())
        return runner.run(_slept(wait_s))


def _on_stdlib(wait_s: float) -> float:
    return asyncio.run(_slept(wait_s))


def test_a_sleep_of_8_4_ms_takes_9_ms_on_our_loop_and_10_on_asyncios() -> None:
    ours = _median_wait(_on_ours, 0.0084)
    stdlib = _median_wait(_on_stdlib, 0.0084)
    assert 0.0084 <= ours < 0.0098, ours
    assert ours + 0.0005 < stdlib, (ours, stdlib)


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
