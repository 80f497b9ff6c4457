"""``rt.acall`` of a sync tool that is not ``blocking`` (``ToolSpec.blocking`` False: ``effect="none"``
with the default timeout, or declared so) runs it in the one-frame path (pipeline/_direct.py), as
an async tool's first step is run there: ``Engine.quick`` gives the observation itself, not a
coroutine, and the call makes no more Python calls than the async tool's. Before, the frame handed
every sync tool to ``Messages.quick``'s path (``begun``, ``begin``, the ``ended`` coroutine,
``Executor.arun`` and its attempt, ``tail`` and the flush chain: about ten times the async call's
Python calls). A blocking sync tool still runs on a worker thread, cut off at its timeout; a sync
tool's failures are typed and retried, and an awaitable it hands back is awaited under its timeout,
as the path it replaces does (same events, observations and flow state). Counted, never timed."""

from __future__ import annotations

import asyncio
import sys
import threading
from collections import Counter
from collections.abc import Callable
from types import FrameType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.bench._workload import add, add_async, openai_calls
from actionspace.types import Observation
from tests.pipeline.test_direct import _entry, _general
from tests.pipeline.test_fast import _view

HANDED_ON = {"begun", "begin", "ended", "arun", "_aattempt", "_ended", "_settled", "tail", "_submit"}
"""The functions of the path a sync tool's call was handed to before (none of them is called now)."""


def _profiled(fn: Callable[..., Any], n: int) -> tuple[Counter[str], list[Any], list[int]]:
    """Python-level calls by function name during ``n`` calls of ``fn`` through ``Engine.quick`` (as
    ``rt.acall`` makes them, after 200 calls warmed the run; a coroutine it gives is awaited), the
    type of what each call gave, and the threads ``fn`` ran on."""
    ran_on: list[int] = []
    name = "add_async" if asyncio.iscoroutinefunction(fn) else "add"

    if name == "add":

        def tool(a: int, b: int) -> int:
            ran_on.append(threading.get_ident())
            return int(fn(a, b))

    else:

        async def tool(a: int, b: int) -> int:  # type: ignore[misc]
            ran_on.append(threading.get_ident())
            return int(await fn(a, b))

    calls = openai_calls(name)
    seen: Counter[str] = Counter()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            seen[frame.f_code.co_name] += 1

    async def run() -> list[Any]:
        with Runtime(store="memory://") as rt:
            rt.add_tool(name=name, input_schema=_SCHEMA, fn=tool, effect="none")
            run_id = rt.new_run()
            for i in range(200):
                assert (await rt.acall(calls[i], run_id=run_id)).data == 3 + i
            quick = rt.engine.quick
            got: list[Any] = []
            sys.setprofile(profile)
            try:
                for i in range(n):
                    step = quick(calls[200 + i], run_id, None, None)
                    got.append(type(step))
                    if not isinstance(step, Observation):
                        assert step is not None
                        step = await step
                    assert step is not None and step.data == 203 + i
            finally:
                sys.setprofile(None)
            return got

    return seen, asyncio.run(run()), ran_on


_SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
    "additionalProperties": False,
}


def test_a_non_blocking_sync_tool_ends_in_the_one_frame_path_as_the_async_tool_does() -> None:
    seen, got, ran_on = _profiled(add, 50)
    async_seen, async_got, _ = _profiled(add_async, 50)
    assert async_got == [Observation] * 50
    assert sum(seen.values()) <= sum(async_seen.values())
    assert got == [Observation] * 50  # no coroutine to await
    assert set(ran_on) == {threading.get_ident()}  # no hand-off: every call on this thread
    assert {k: seen[k] for k in HANDED_ON if seen[k]} == {}


def test_a_blocking_sync_tool_still_runs_on_a_worker_thread_cut_off_at_its_timeout() -> None:
    release = threading.Event()
    ran_on: list[int] = []

    def stuck(a: int) -> int:
        ran_on.append(threading.get_ident())
        release.wait(10)
        return a

    async def run() -> Any:
        with Runtime(store="memory://") as rt:
            rt.add_tool(
                name="t0",
                input_schema={"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                fn=stuck,
                effect="none",
                timeout_s=0.05,  # a timeout of its own: blocking, a thread enforces it
            )
            try:
                return await rt.acall(_entry("t0", {"a": 1}, "call_1"))
            finally:
                release.set()

    obs = asyncio.run(run())
    assert obs.status == "error"
    assert obs.error.details["timeout_s"] == 0.05  # each attempt cut off at its timeout
    assert ran_on and threading.get_ident() not in ran_on


def _sync_pair(make: Callable[[], Callable[..., Any]], **spec: Any) -> tuple[Runtime, Runtime]:
    """Two runtimes with the sync tool ``t0`` running a function ``make`` gives each: the one-frame
    path, and the path it replaces."""
    made = []
    for _ in range(2):
        rt = Runtime("memory://")
        rt.add_tool(
            name="t0",
            input_schema={"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
            fn=make(),
            effect="none",
            **spec,
        )
        made.append(rt)
    return made[0], _general(made[1])


def _both(direct: Runtime, general: Runtime, calls: list[str]) -> list[dict[str, Any]]:
    views = []
    for rt in (direct, general):
        with rt:
            run_id = rt.new_run("run-sync")

            async def play(rt: Runtime = rt, run_id: str = run_id) -> list[Any]:
                return [await rt.acall(raw, run_id=run_id) for raw in calls]

            views.append(_view(rt, run_id, asyncio.run(play())))
    return views


class _Flaky(Exception):
    """A failure the runtime's default mapper may type as it likes (the same on both paths)."""


BEHAVIOURS = ["int", "text", "dict", "none", "value_error", "timeout", "flaky_once", "awaitable", "waits"]


def _tool(behaviours: list[str]) -> Callable[..., Any]:
    """A sync tool whose n-th call behaves as ``behaviours[n % len]``."""
    count = [0]
    failed: set[int] = set()

    async def later(a: int) -> int:
        await asyncio.sleep(0)
        return a * 2

    async def at_once(a: int) -> int:
        return a * 3

    def t0(a: int) -> Any:
        how = behaviours[count[0] % len(behaviours)]
        count[0] += 1
        if how == "int":
            return a + 1
        if how == "text":
            return f"a is {a}"
        if how == "dict":
            return {"a": a, "items": [a, a]}
        if how == "none":
            return None
        if how == "value_error":
            raise ValueError(f"bad a={a}")
        if how == "timeout":
            raise TimeoutError("took too long")
        if how == "flaky_once":
            if a not in failed:
                failed.add(a)
                raise ConnectionError("reset")  # retryable: the next attempt runs the next behaviour
            return -a
        if how == "awaitable":
            return at_once(a)
        return later(a)

    return t0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    behaviours=st.lists(st.sampled_from(BEHAVIOURS), min_size=1, max_size=6),
    args=st.lists(st.integers(-(2**70), 2**70) | st.integers(-3, 3), min_size=1, max_size=8),
)
def test_a_sync_tool_in_the_one_frame_path_ends_calls_as_the_path_it_replaces(
    behaviours: list[str], args: list[int]
) -> None:
    direct, general = _sync_pair(lambda: _tool(behaviours))
    calls = [_entry("t0", {"a": a}, f"call_{i}" if i % 3 else None) for i, a in enumerate(args)]
    got, want = _both(direct, general, calls)
    assert got == want


@pytest.mark.parametrize("blocking", [False, None])
def test_an_awaitable_handed_back_by_a_sync_tool_is_awaited_under_its_timeout(blocking: bool | None) -> None:
    """``blocking=False`` with a timeout of its own: inline (no thread), yet the awaitable it hands
    back is still cut off at ``timeout_s``; ``None``: the default, blocking (a thread)."""

    def t0(a: int) -> Any:
        return asyncio.sleep(30, result=a)

    views = _both(
        *_sync_pair(lambda: t0, timeout_s=0.05, blocking=blocking), [_entry("t0", {"a": 5}, "call_1")]
    )
    assert views[0] == views[1]
    [obs] = views[0]["observations"]
    assert obs["status"] == "error"
    assert obs["error"]["details"]["timeout_s"] == 0.05  # each attempt cut off at its timeout
