"""``rt.acall`` of a sync tool declared non-blocking (``effect="none"``, the default timeout) runs it
on the caller's thread, with no hand-off to a worker thread, and the executor's awaited attempt
reads what it needs without Python calls of its own: ``ToolSpec.is_async`` is read as the
attribute behind the property, and a value of a plain exact type is never asked
``inspect.isawaitable`` (an ABC check through ``ABCMeta.__instancecheck__``). Before: five such
calls a call (``is_async`` three times, ``isawaitable``, ``__instancecheck__``). A sync wrapper
that hands back a coroutine is still awaited. Counted, never timed.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections import Counter
from types import FrameType
from typing import Any

from actionspace import Runtime
from actionspace.bench._workload import add, openai_calls
from actionspace.execution.executor import Executor

AVOIDABLE = {"is_async", "isawaitable", "__instancecheck__"}


def _counted(n: int) -> tuple[Counter[str], list[int]]:
    """Python-level calls by function name during ``n`` awaited calls of the bench's sync tool
    (after warming the run), and the threads the tool ran on."""
    ran_on: list[int] = []

    def traced(a: int, b: int) -> int:
        """Add two integers, noting the thread.

        Args:
            a: first addend.
            b: second addend.
        """
        ran_on.append(threading.get_ident())
        return add(a, b)

    traced.__name__ = "add"
    calls = openai_calls("add")
    seen: Counter[str] = Counter()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            seen[frame.f_code.co_name] += 1

    async def run() -> None:
        with Runtime(store="memory://") as rt:
            rt.tool(effect="none")(traced)
            for i in range(200):
                assert (await rt.acall(calls[i])).data == 3 + i
            sys.setprofile(profile)
            try:
                for i in range(n):
                    await rt.acall(calls[200 + i])
            finally:
                sys.setprofile(None)

    asyncio.run(run())
    return seen, ran_on


def test_an_awaited_sync_tool_runs_on_the_callers_thread_without_avoidable_calls() -> None:
    seen, ran_on = _counted(50)
    assert set(ran_on) == {threading.get_ident()}  # no hand-off: every call on this thread
    assert seen["_submit"] == 0
    assert seen["add"] == 50
    assert {name: seen[name] for name in AVOIDABLE if seen[name]} == {}


def test_a_sync_wrapper_handing_back_a_coroutine_is_still_awaited() -> None:
    async def later(a: int, b: int) -> int:
        await asyncio.sleep(0)
        return a * b

    def wrapper(a: int, b: int) -> Any:
        """Multiply two integers, later.

        Args:
            a: first factor.
            b: second factor.
        """
        return later(a, b)

    async def run() -> Any:
        with Runtime(store="memory://") as rt:
            rt.tool(effect="none")(wrapper)
            return await rt.acall({"name": "wrapper", "arguments": {"a": 6, "b": 7}})

    obs = asyncio.run(run())
    assert obs.status == "ok"
    assert obs.data == 42


def test_the_executors_awaited_attempt_of_a_plain_value_asks_no_abc() -> None:
    with Runtime(store="memory://") as rt:
        rt.tool(effect="none")(add)
        spec = rt.catalog.get("add")
        executor = rt.engine.executor
        assert isinstance(executor, Executor)
        seen: Counter[str] = Counter()

        def profile(frame: FrameType, event: str, arg: Any) -> None:
            if event == "call":
                seen[frame.f_code.co_name] += 1

        async def attempt() -> Any:
            sys.setprofile(profile)
            try:
                return await executor.arun(spec, {"a": 1, "b": 2})
            finally:
                sys.setprofile(None)

        outcome = asyncio.run(attempt())
    assert outcome.value == 3
    assert {name: seen[name] for name in AVOIDABLE if seen[name]} == {}
