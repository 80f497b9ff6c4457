"""Helpers for testing tools the way actionspace tests itself: scripted faults and policies.

``Faulty`` wraps a tool function and, per attempt, either runs it or injects a failure::

    pay = Faulty(real_pay, ["transient", "ok"])        # first attempt fails, second runs
    rt.add_tool(name="pay", input_schema=..., fn=pay.tool, effect="external")
    assert pay.calls == 2 and pay.commits == 1
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from actionspace.errors import CATEGORIES, ToolError

__all__ = ["Faulty", "ScriptedPolicy"]

_STEPS = {"ok", "hang", "commit_then_hang", "raise_after_commit"}


class Faulty:
    """A tool wrapper that follows a script of outcomes, one per attempt; then runs normally.

    Steps: ``"ok"`` (run the tool), a category string (raise ``ToolError`` of that category),
    an exception instance (raise it), ``"hang"`` (sleep ``hang_s`` without running),
    ``"commit_then_hang"`` (run the tool, then sleep ``hang_s``: a lost response),
    ``"raise_after_commit"`` (run the tool, then raise ``ConnectionResetError``).
    ``calls`` counts attempts; ``commits`` counts real executions of the tool.
    """

    def __init__(self, fn: Callable[..., Any], script: Sequence[Any], *, hang_s: float = 2.0) -> None:
        for step in script:
            if isinstance(step, str) and step not in _STEPS and step not in CATEGORIES:
                raise ValueError(f"unknown fault step {step!r}")
        self.fn = fn
        self.script = list(script)
        self.hang_s = hang_s
        self.calls = 0
        self.commits = 0
        self._lock = threading.Lock()
        self.is_async = inspect.iscoroutinefunction(fn)
        self.tool: Callable[..., Any] = self._make_tool()

    def _make_tool(self) -> Callable[..., Any]:
        """A real function (sync or async like the wrapped one) with the wrapped signature."""
        if self.is_async:

            async def atool(*args: Any, **kwargs: Any) -> Any:
                return await self._acall(self._next(), args, kwargs)

            return functools.wraps(self.fn)(atool)

        def tool(*args: Any, **kwargs: Any) -> Any:
            return self(*args, **kwargs)

        return functools.wraps(self.fn)(tool)

    def _next(self) -> Any:
        with self._lock:
            step = self.script[self.calls] if self.calls < len(self.script) else "ok"
            self.calls += 1
            return step

    def _before(self, step: Any) -> None:
        if isinstance(step, BaseException):
            raise step
        if isinstance(step, str) and step in CATEGORIES:
            raise ToolError(step, f"injected {step}")

    def _commit(self) -> None:
        with self._lock:
            self.commits += 1

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        step = self._next()
        self._before(step)
        if step == "hang":
            time.sleep(self.hang_s)
            return None
        value = self.fn(*args, **kwargs)
        self._commit()
        if step == "commit_then_hang":
            time.sleep(self.hang_s)
        elif step == "raise_after_commit":
            raise ConnectionResetError("connection reset after the request was sent")
        return value

    async def _acall(self, step: Any, args: Any, kwargs: Any) -> Any:
        self._before(step)
        if step == "hang":
            await asyncio.sleep(self.hang_s)
            return None
        value = await self.fn(*args, **kwargs)
        self._commit()
        if step == "commit_then_hang":
            await asyncio.sleep(self.hang_s)
        elif step == "raise_after_commit":
            raise ConnectionResetError("connection reset after the request was sent")
        return value


class ScriptedPolicy:
    """Plays the model: returns the next scripted raw output each time it is asked."""

    def __init__(self, outputs: Iterable[Any]) -> None:
        self._outputs: Iterator[Any] = iter(outputs)
        self.turns = 0

    def __call__(self, *_: Any, **__: Any) -> Any:
        self.turns += 1
        return next(self._outputs)
