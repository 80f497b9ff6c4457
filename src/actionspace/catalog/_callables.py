"""How a tool's Python callable runs: which function a call enters, what it accepts, whether it streams."""

from __future__ import annotations

import functools
import inspect
import weakref
from collections.abc import Callable
from typing import Any

__all__ = ["accepts", "callee", "unwrapped"]


def callee(fn: Callable[..., Any] | None) -> Any:
    """The function a call of ``fn`` enters: under partials, a raw static or class method's
    function, a callable instance's ``__call__``; never what ``functools.wraps`` names.

    A sync ``def`` made with ``functools.wraps(async_fn)`` may run the coroutine itself
    (``asyncio.run``) or hand it back, and only calling it tells which: it is a sync tool, and the
    executor awaits an awaitable it returns.
    """
    while isinstance(fn, functools.partial):
        fn = fn.func
    if isinstance(fn, staticmethod | classmethod):
        fn = fn.__func__
    if fn is None or inspect.isroutine(fn) or inspect.isclass(fn):
        return fn
    return type(fn).__call__


def unwrapped(code: Any) -> Any:
    """``code`` under its ``functools.wraps`` layers: a generator function keeps streaming when
    wrapped (whether a tool streams is decided before it is called)."""
    if code is None or inspect.iscoroutinefunction(code) or inspect.isgeneratorfunction(code):
        return code
    try:
        return inspect.unwrap(code)
    except ValueError:  # a cycle of __wrapped__
        return code


_PARAMETERS: weakref.WeakKeyDictionary[Any, frozenset[str]] = weakref.WeakKeyDictionary()
"""Parameter names by plain function (a bound method is looked up by its function), while the
function lives: a cache every runtime shares keeps no tool's function (nor what it closes over)
alive past its runtime."""


def accepts(fn: Callable[..., Any] | None, name: str) -> bool:
    if fn is None:
        return False
    target = getattr(fn, "__func__", fn)
    names = _PARAMETERS.get(target) if inspect.isfunction(target) else None
    if names is None:
        try:
            names = frozenset(inspect.signature(fn).parameters)
        except (TypeError, ValueError):
            return False
        if inspect.isfunction(target):
            if len(_PARAMETERS) >= 4096:
                _PARAMETERS.clear()
            _PARAMETERS[target] = names
    return name in names
