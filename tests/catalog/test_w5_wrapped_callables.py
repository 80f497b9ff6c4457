"""How a registered callable runs: awaited, called, or streamed, whatever wraps it.

A sync ``def`` made with ``functools.wraps(async_fn)`` may run its coroutine itself
(``asyncio.run``) or hand it back; both must work, on ``call`` and ``acall``, on a worker thread
(``effect="read"``) and inline (``effect="none"``).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from actionspace import Runtime, ToolCall
from actionspace.catalog.functions import spec_from_function


async def _double(a: int) -> int:
    await asyncio.sleep(0)
    return a * 2


def _runs_itself(f: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
    @functools.wraps(f)
    def inner(*args: Any, **kwargs: Any) -> Any:
        return asyncio.run(f(*args, **kwargs))  # type: ignore[arg-type]

    return inner


def _hands_back(f: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
    @functools.wraps(f)
    def inner(*args: Any, **kwargs: Any) -> Any:
        return f(*args, **kwargs)

    return inner


def _async_wrapper(f: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
    @functools.wraps(f)
    async def inner(*args: Any, **kwargs: Any) -> Any:
        return await f(*args, **kwargs)

    return inner


class _Holder:
    factor = 3

    async def times(self, a: int) -> int:
        return a * self.factor

    def plain(self, a: int) -> int:
        return a + self.factor

    @classmethod
    async def class_times(cls, a: int) -> int:
        return a * cls.factor

    @staticmethod
    async def static_times(a: int) -> int:
        return a * 4


class _SyncOverAsync:
    """A callable instance whose ``__call__`` runs a coroutine itself."""

    @_runs_itself
    async def __call__(self, a: int) -> int:
        return a + 100


class _AsyncCall:
    async def __call__(self, a: int) -> int:
        return a + 1000


def _cases() -> list[tuple[str, Callable[..., Any], int, int]]:
    """(name, callable, argument a, expected result)."""
    return [
        ("runs_itself", _runs_itself(_double), 21, 42),
        ("hands_back", _hands_back(_double), 21, 42),
        ("async_wrapper", _async_wrapper(_double), 21, 42),
        ("partial_runs_itself", functools.partial(_runs_itself(_double)), 5, 10),
        ("partial_async", functools.partial(_double), 5, 10),
        ("bound_async", _Holder().times, 5, 15),
        ("bound_sync", _Holder().plain, 5, 8),
        ("class_async", _Holder.class_times, 5, 15),
        ("static_async", _Holder.__dict__["static_times"], 5, 20),
        ("instance_runs_itself", _SyncOverAsync(), 5, 105),
        ("instance_async", _AsyncCall(), 5, 1005),
    ]


@pytest.mark.parametrize("effect", ["read", "none"])
@pytest.mark.parametrize(("name", "fn", "a", "expected"), _cases(), ids=[c[0] for c in _cases()])
def test_every_kind_of_wrapped_callable_gives_its_result_on_call_and_acall(
    name: str, fn: Callable[..., Any], a: int, expected: int, effect: str
) -> None:
    rt = Runtime("memory://", recover_on_start=False)
    try:
        rt.tool(fn, effect=effect, name=name)
        sync = rt.call({"name": name, "arguments": {"a": a}})
        assert sync.error is None, sync.error
        assert sync.data == expected
        if name in ("runs_itself", "partial_runs_itself", "instance_runs_itself") and effect == "none":
            return  # asyncio.run inside a running loop cannot work: nothing to ask of acall inline
        later = asyncio.run(rt.acall(ToolCall(name=name, arguments={"a": a})))
        assert later.error is None, later.error
        assert later.data == expected
    finally:
        rt.close()


def test_a_sync_wrapper_that_runs_its_coroutine_itself_is_not_taken_for_a_coroutine_function() -> None:
    spec = spec_from_function(_runs_itself(_double), effect="read")
    assert not spec.is_async
    assert spec_from_function(_async_wrapper(_double), effect="read").is_async
    assert spec_from_function(_Holder().times, effect="read").is_async
    assert spec_from_function(_Holder.class_times, effect="read").is_async
    assert spec_from_function(_Holder.__dict__["static_times"], effect="read").is_async
    assert spec_from_function(functools.partial(_double), effect="read", name="p").is_async


def test_an_async_generator_tool_streams_in_every_wrapping() -> None:
    async def lines(n: int) -> AsyncIterator[str]:
        for i in range(n):
            yield f"{i};"

    class Feed:
        async def __call__(self, n: int) -> AsyncIterator[str]:
            for i in range(n):
                yield f"{i};"

    rt = Runtime("memory://", recover_on_start=False)
    try:
        rt.tool(lines, effect="read")
        rt.tool(functools.partial(lines), effect="read", name="partial_lines")
        rt.tool(Feed(), effect="read", name="feed")
        for name in ("lines", "partial_lines", "feed"):
            assert rt.catalog.get(name).streams
            obs = rt.call({"name": name, "arguments": {"n": 3}})
            assert obs.error is None, obs.error
            assert obs.data == "0;1;2;"
    finally:
        rt.close()
