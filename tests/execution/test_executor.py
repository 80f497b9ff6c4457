from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from actionspace.catalog import RetryPolicy, ToolSpec
from actionspace.execution.executor import Executor, Failed, Outcome, Succeeded
from actionspace.testing import Faulty

FAST = RetryPolicy(max_attempts=4, deadline_s=5.0, initial_backoff_s=0.001, max_backoff_s=0.002)
SCHEMA: dict[str, Any] = {"type": "object", "properties": {"x": {"type": "integer"}}}
TIMEOUT_S = 0.5
"""The deadline of a call that hangs: a blocking tool's worker thread must get to run its step
before it falls due, which 50 ms did not always give on a busy machine (the thread started late,
the attempt timed out before committing or answering)."""
HANG_S = 4.0
"""How long a hanging step sleeps: well past :data:`TIMEOUT_S`, so a wait that ends before it did
not wait for the hang."""


def double(x: int) -> int:
    return 2 * x


async def adouble(x: int) -> int:
    return 2 * x


def _spec(fn: Any, effect: str = "read", **kw: Any) -> ToolSpec:
    kw.setdefault("retry", FAST)
    return ToolSpec(name="t", input_schema=SCHEMA, fn=fn, effect=effect, **kw)  # type: ignore[arg-type]


def _both(ex: Executor, spec: ToolSpec, kwargs: dict[str, Any]) -> list[Outcome]:
    """The same call through the sync and the async entry point."""
    retries: list[tuple[int, str]] = []

    def hook(attempt: int, error: Any, delay: float) -> None:
        retries.append((attempt, error.category))

    return [ex.run(spec, kwargs, hook), asyncio.run(ex.arun(spec, kwargs, hook))]


@pytest.mark.parametrize("fn", [double, adouble])
@pytest.mark.parametrize("blocking", [True, False])
def test_sync_and_async_tools_run_from_sync_and_async_callers(fn: Any, blocking: bool) -> None:
    ex = Executor()
    for outcome in _both(ex, _spec(fn, blocking=blocking), {"x": 21}):
        assert outcome == Succeeded(42, 1)


def test_transient_failures_are_retried_until_success_with_attempts_counted() -> None:
    ex = Executor()
    tool = Faulty(double, ["transient", "rate_limited", "ok"])
    outcome = ex.run(_spec(tool.tool), {"x": 2})
    assert outcome == Succeeded(4, 3)
    assert tool.calls == 3 and tool.commits == 1


def test_retries_stop_at_the_attempt_cap() -> None:
    ex = Executor()
    tool = Faulty(double, ["transient"] * 10)
    outcome = ex.run(_spec(tool.tool), {"x": 2})
    assert isinstance(outcome, Failed)
    assert outcome.attempts == 4 and tool.calls == 4
    assert outcome.error.category == "transient"
    assert outcome.error.retryable is False and outcome.error.details["retries_exhausted"] is True


def test_retries_stop_at_the_deadline_even_below_the_attempt_cap() -> None:
    ex = Executor()
    tool = Faulty(double, ["transient"] * 10)
    policy = RetryPolicy(max_attempts=100, deadline_s=0.05, initial_backoff_s=0.02, backoff_multiplier=1.0)
    outcome = ex.run(_spec(tool.tool, retry=policy), {"x": 2})
    assert isinstance(outcome, Failed)
    assert 1 <= tool.calls <= 3


@pytest.mark.parametrize("step", ["permanent", "conflict", "unclassified", ValueError("boom")])
def test_non_retryable_failures_are_never_retried(step: Any) -> None:
    ex = Executor()
    tool = Faulty(double, [step, "ok"])
    outcome = ex.run(_spec(tool.tool), {"x": 2})
    assert isinstance(outcome, Failed) and tool.calls == 1
    if isinstance(step, ValueError):
        assert outcome.error.category == "unclassified" and outcome.error.vendor_code == "ValueError"


@pytest.mark.parametrize("fn", [double, adouble])
def test_a_read_that_times_out_is_transient_and_retried(fn: Any) -> None:
    ex = Executor()
    tool = Faulty(fn, ["hang", "ok"], hang_s=HANG_S)
    outcome = ex.run(_spec(tool.tool, timeout_s=TIMEOUT_S), {"x": 2})
    assert outcome == Succeeded(4, 2)


@pytest.mark.parametrize("fn", [double, adouble])
def test_a_write_that_commits_then_times_out_is_unknown_commit_and_never_retried(fn: Any) -> None:
    ex = Executor()
    tool = Faulty(fn, ["commit_then_hang", "ok"], hang_s=HANG_S)
    started = time.monotonic()
    outcome = ex.run(_spec(tool.tool, effect="write", timeout_s=TIMEOUT_S), {"x": 2})
    assert isinstance(outcome, Failed)
    assert outcome.error.category == "unknown_commit"
    assert tool.commits == 1 and tool.calls == 1
    assert time.monotonic() - started < HANG_S  # did not wait for the hang to end


def test_a_write_whose_connection_breaks_after_sending_is_unknown_commit() -> None:
    ex = Executor()
    tool = Faulty(double, ["raise_after_commit", "raise_after_commit"])
    for effect, category in (("write", "unknown_commit"), ("read", "transient")):
        outcome = ex.run(_spec(tool.tool, effect=effect, retry=RetryPolicy(max_attempts=1)), {"x": 2})
        assert isinstance(outcome, Failed) and outcome.error.category == category


def test_async_write_timeout_in_an_async_caller_is_unknown_commit() -> None:
    ex = Executor()
    tool = Faulty(adouble, ["commit_then_hang"], hang_s=1.0)
    outcome = asyncio.run(ex.arun(_spec(tool.tool, effect="external", timeout_s=0.05), {"x": 1}))
    assert isinstance(outcome, Failed) and outcome.error.category == "unknown_commit"
    assert tool.calls == 1


def test_rate_limited_retry_waits_retry_after() -> None:
    from actionspace.errors import ToolError

    calls: list[float] = []

    def limited(x: int) -> int:
        calls.append(time.monotonic())
        if len(calls) == 1:
            raise ToolError("rate_limited", "slow down", retry_after=0.05)
        return x

    outcome = Executor().run(_spec(limited), {"x": 7})
    assert outcome == Succeeded(7, 2)
    assert calls[1] - calls[0] >= 0.045


def test_concurrent_calls_with_different_timeouts_each_time_out_on_their_own_deadline() -> None:
    """One timer serves every deadline: a short one armed after a long one still fires first."""
    import asyncio
    import time

    from actionspace.catalog import RetryPolicy, ToolSpec
    from actionspace.execution.executor import Executor, Failed, Succeeded

    async def sleeper(seconds: float) -> float:
        await asyncio.sleep(seconds)
        return seconds

    once = RetryPolicy(max_attempts=1)
    long = ToolSpec(name="long", effect="read", fn=sleeper, timeout_s=5.0, retry=once)
    short = ToolSpec(name="short", effect="read", fn=sleeper, timeout_s=0.05, retry=once)
    # a call well inside its deadline: armed after the long one, it must not wait for it (a 10 ms
    # sleep against the 50 ms deadline raced under CPU load)
    medium = ToolSpec(name="medium", effect="read", fn=sleeper, timeout_s=1.0, retry=once)
    executor = Executor()

    async def scenario() -> tuple[Any, Any, Any, float]:
        started = time.monotonic()
        a = asyncio.ensure_future(executor.arun(long, {"seconds": 0.3}))
        await asyncio.sleep(0)
        b = asyncio.ensure_future(executor.arun(short, {"seconds": 2.0}))
        c = asyncio.ensure_future(executor.arun(medium, {"seconds": 0.0}))
        done_b = await b
        elapsed = time.monotonic() - started
        return await a, done_b, await c, elapsed

    a, b, c, elapsed_b = asyncio.run(scenario())
    assert isinstance(a, Succeeded) and a.value == 0.3
    assert isinstance(b, Failed) and b.error.category == "transient" and b.error.details["timeout_s"] == 0.05
    assert isinstance(c, Succeeded)
    assert elapsed_b < 1.0
    executor.close()


@pytest.mark.parametrize("way", ["arun", "acontinue"])
def test_an_outside_cancel_is_not_mistaken_for_a_timeout(way: str) -> None:
    import asyncio
    import time

    from actionspace.catalog import ToolSpec
    from actionspace.execution.executor import Executor

    async def forever() -> None:
        await asyncio.sleep(10)

    spec = ToolSpec(name="forever", effect="read", fn=forever, timeout_s=5.0)
    executor = Executor()

    async def scenario() -> None:
        if way == "arun":
            call = executor.arun(spec, {})
        else:  # its first step taken by hand, as a plan node's is
            coro = forever()
            yielded = coro.send(None)
            call = executor.acontinue(spec, {}, None, time.monotonic(), coro=coro, yielded=yielded)
        task = asyncio.ensure_future(call)
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    executor.close()
