"""A tool's timeout cancels the caller's task to interrupt the tool; whatever the tool makes of
that cancel, the caller's task is left with no cancel pending (``Task.cancelling()`` back to
what it was), as ``asyncio.timeout`` leaves it."""

from __future__ import annotations

import asyncio

import pytest

from actionspace import Runtime


def _runtime() -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="none", timeout_s=0.05)
    async def stubborn(x: int) -> str:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            return "swallowed"  # a tool that ignores the cancel and answers
        return "slept"

    @rt.tool(effect="none", timeout_s=0.05)
    async def patient(x: int) -> str:
        await asyncio.sleep(5)
        return "slept"

    @rt.tool(effect="none", timeout_s=0.05)
    async def failing(x: int) -> str:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            raise ValueError("cleanup failed") from None
        return "slept"

    return rt


@pytest.mark.parametrize(
    ("tool", "status", "category"),
    [("stubborn", "ok", None), ("patient", "error", "transient"), ("failing", "error", None)],
)
def test_a_timed_out_call_leaves_no_cancel_pending_on_the_callers_task(
    tool: str, status: str, category: str | None
) -> None:
    rt = _runtime()

    async def scenario() -> tuple[str, str | None, int]:
        obs = await rt.acall({"name": tool, "arguments": {"x": 1}})
        task = asyncio.current_task()
        assert task is not None
        return obs.status, obs.error.category if obs.error else None, task.cancelling()

    with rt:
        got_status, got_category, cancelling = asyncio.run(scenario())
    assert got_status == status
    if category is not None:
        assert got_category == category
    assert cancelling == 0


def test_a_later_timeout_of_the_caller_still_fires_after_a_swallowed_one() -> None:
    rt = _runtime()

    async def scenario() -> str:
        await rt.acall({"name": "stubborn", "arguments": {"x": 1}})
        try:
            async with asyncio.timeout(0.05):
                await asyncio.sleep(5)
        except TimeoutError:
            return "timed out"
        return "slept"

    with rt:
        assert asyncio.run(asyncio.wait_for(scenario(), 3)) == "timed out"
