"""``Executor.arun_waiting`` (an async tool awaited as it is, for calls expected to wait) ends every
call as ``Executor.arun`` (first step by hand, then the rest) does: same outcome, same attempts,
same retries (a cancel from outside stays a cancel: tests/execution/test_executor.py)."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.catalog import RetryPolicy, ToolSpec
from actionspace.execution.executor import Executor, Failed, Outcome, Succeeded

RETRY = RetryPolicy(max_attempts=3, deadline_s=5.0, initial_backoff_s=0.0005, max_backoff_s=0.001)
ACTIONS = ["return", "value_error", "connection_error", "timeout_error", "too_slow", "flaky"]


def _tool(waits: int, action: str) -> Any:
    attempts = [0]

    async def tool(x: int) -> int:
        attempts[0] += 1
        for _ in range(waits):
            await asyncio.sleep(0)
        if action == "value_error":
            raise ValueError("no such x")
        if action == "connection_error":
            raise ConnectionError("reset")
        if action == "timeout_error":
            raise TimeoutError("upstream")
        if action == "too_slow":
            await asyncio.sleep(5)
        if action == "flaky" and attempts[0] < 2:
            raise ConnectionError("reset once")
        return x * 2

    return tool


def _view(outcome: Outcome) -> tuple[Any, ...]:
    if isinstance(outcome, Succeeded):
        return ("ok", outcome.value, outcome.attempts)
    assert isinstance(outcome, Failed)
    return ("error", outcome.error.to_dict(), outcome.attempts)


async def _run(way: str, waits: int, action: str, effect: str) -> tuple[Outcome, list[Any]]:
    spec = ToolSpec(
        name="t",
        effect=effect,  # type: ignore[arg-type]
        fn=_tool(waits, action),
        timeout_s=0.05,
        retry=RETRY,
    )
    retries: list[Any] = []
    executor = Executor()
    try:
        run = executor.arun_waiting if way == "waiting" else executor.arun
        outcome = await asyncio.ensure_future(
            run(spec, {"x": 21}, lambda a, e, d: retries.append((a, e.category)))
        )
    finally:
        executor.close()
    return outcome, retries


@settings(max_examples=40, deadline=None)
@given(
    waits=st.integers(0, 2),
    action=st.sampled_from(ACTIONS),
    effect=st.sampled_from(["read", "write"]),
)
def test_a_call_awaited_as_it_is_ends_as_one_stepped_by_hand(waits: int, action: str, effect: str) -> None:
    stepped, stepped_retries = asyncio.run(_run("stepped", waits, action, effect))
    waiting, waiting_retries = asyncio.run(_run("waiting", waits, action, effect))
    assert _view(waiting) == _view(stepped)
    assert waiting_retries == stepped_retries
