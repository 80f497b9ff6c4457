"""A tool that raises what is not an ``Exception`` (a ``BaseException`` subclass of its own, a
``CancelledError`` nobody asked for) or what a Future cannot carry (``StopIteration``) fails its
call with a typed error, promptly: nothing escapes to the caller, a write's ledger entry is
settled (never left ``dispatched`` for the next proposal to wait on). A sync caller gets a
tool's own ``CancelledError`` as the tool's failure (an async caller's cancellation path settles
it, tests/plan/test_a_write_cancelled_by_its_tool.py). ``KeyboardInterrupt`` and ``SystemExit``
still stop the caller."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

from actionspace import Plan, Runtime
from actionspace.types import Observation


class Hostile(BaseException):
    """Not an Exception: what ``except Exception`` does not catch."""


def _sync_hostile() -> str:
    raise Hostile("the tool gave up")


async def _async_hostile_at_once() -> str:
    raise Hostile("the tool gave up")


async def _async_hostile_after_a_wait() -> str:
    await asyncio.sleep(0)
    raise Hostile("the tool gave up")


async def _async_own_cancel() -> str:
    await asyncio.sleep(0)
    raise asyncio.CancelledError("the tool's own")


def _sync_stop_iteration() -> str:
    raise StopIteration


TOOLS: dict[str, Callable[[], Any]] = {
    "sync": _sync_hostile,
    "async_at_once": _async_hostile_at_once,
    "async_after_wait": _async_hostile_after_a_wait,
}


def _runtime(fn: Callable[[], Any], effect: str, **spec: Any) -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)
    rt.add_tool(
        name="t",
        input_schema={"type": "object", "properties": {}, "additionalProperties": False},
        fn=fn,
        effect=effect,
        **spec,
    )
    return rt


def _call(rt: Runtime, caller: str, node: str = "n1") -> tuple[Observation, float]:
    raw = {"name": "t", "arguments": {}}
    started = time.monotonic()
    if caller == "sync":
        obs = rt.call(raw, run_id="hostile", node_id=node)
    else:

        async def scenario() -> Observation:
            obs = await rt.acall(raw, run_id="hostile", node_id=node)
            task = asyncio.current_task()
            assert task is not None and task.cancelling() == 0
            return obs

        obs = asyncio.run(scenario())
    return obs, time.monotonic() - started


@pytest.mark.parametrize("caller", ["sync", "async"])
@pytest.mark.parametrize("tool", list(TOOLS))
@pytest.mark.parametrize("effect", ["none", "read", "write"])
def test_a_tools_own_base_exception_is_a_typed_failure(tool: str, effect: str, caller: str) -> None:
    with _runtime(TOOLS[tool], effect) as rt:
        obs, _ = _call(rt, caller)
        assert obs.status == "error"
        assert obs.error is not None and obs.error.category == "unclassified", obs.error
        assert obs.error.vendor_code == "Hostile"
        if effect == "write":
            entry = rt.ledger.get_node("hostile", "n1")
            assert entry is not None and entry.state == "failed"
            again, elapsed = _call(rt, caller)  # replayed from the ledger at once
            assert again.error is not None and again.error.category == "unclassified"
            assert elapsed < 2.0


@pytest.mark.parametrize(("effect", "category"), [("read", "cancelled"), ("write", "unknown_commit")])
def test_a_cancel_the_tool_raised_itself_is_its_failure_for_a_sync_caller(effect: str, category: str) -> None:
    with _runtime(_async_own_cancel, effect) as rt:
        obs, _ = _call(rt, "sync")
        if effect == "write":
            entry = rt.ledger.get_node("hostile", "n1")
            assert entry is not None and entry.state == "unknown_commit"
    assert obs.error is not None and obs.error.category == category, obs.error


@pytest.mark.parametrize("caller", ["sync", "async"])
@pytest.mark.parametrize("effect", ["read", "write"])
def test_a_stop_iteration_from_a_threaded_tool_answers_at_once(caller: str, effect: str) -> None:
    with _runtime(_sync_stop_iteration, effect, timeout_s=10.0) as rt:
        obs, elapsed = _call(rt, caller)
    assert obs.error is not None and obs.error.category == "unclassified", obs.error
    assert obs.error.vendor_code == "StopIteration"
    assert elapsed < 2.0


@pytest.mark.parametrize("caller", ["sync", "async"])
def test_a_keyboard_interrupt_from_a_tool_still_stops_its_caller(caller: str) -> None:
    def interrupted() -> str:
        raise KeyboardInterrupt

    with _runtime(interrupted, "none") as rt, pytest.raises(KeyboardInterrupt):
        _call(rt, caller)


@pytest.mark.parametrize(
    "fn", [_async_hostile_after_a_wait, _async_own_cancel], ids=["hostile", "own_cancel"]
)
def test_a_plan_node_whose_tool_raises_a_base_exception_after_a_wait_fails_alone(
    fn: Callable[[], Any],
) -> None:
    rt = _runtime(fn, "none")

    @rt.tool(effect="none")
    def echo(x: int) -> int:
        return x

    plan = Plan.from_dict(
        {
            "nodes": [
                {"id": "bad", "tool": "t", "arguments": {}},
                {"id": "good", "tool": "echo", "arguments": {"x": 1}},
            ]
        }
    )

    async def scenario() -> Any:
        return await asyncio.wait_for(rt.arun_plan(plan, run_id="p1"), 10)

    with rt:
        result = asyncio.run(scenario())
    bad = result.nodes["bad"].error
    assert bad is not None and bad.category in ("unclassified", "cancelled"), bad
    assert result.nodes["good"].data == 1
