"""What a tool raised that is not an ``Exception``: its own failure, or what goes on up.

``except Exception`` around a tool misses what a tool may raise besides: a ``BaseException``
subclass of its own, or ``StopIteration``, which no asyncio Future can carry (a threaded tool's
answer would never come). The executor catches
``BaseException`` around a tool and asks :func:`passes_on` whether it goes on up; everything
else is the tool's failure, typed by the owner's mapper like any exception. Where a caller of
ours catches only ``Exception`` (a tool coroutine driven under its timeout,
:mod:`~actionspace.execution.deadlines`; a threaded tool's Future), it is :func:`carried`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["call_carrying", "carried", "passes_on", "raised"]


def passes_on(exc: BaseException, *, in_task: bool) -> bool:
    """Whether ``exc``, raised while a tool ran, goes on up rather than failing the call: the
    process is stopping (``KeyboardInterrupt``, ``SystemExit``), the caller's frame is being
    closed (``GeneratorExit``), or, ``in_task``, a ``CancelledError``: the caller's cancel, or one
    the tool raised itself, which its caller's cancellation path settles (a write's entry left
    ``unknown``, as for any send whose caller stopped waiting). With no task (a sync caller),
    nothing cancels the call: a ``CancelledError`` is the tool's own failure."""
    if isinstance(exc, (KeyboardInterrupt, SystemExit, GeneratorExit)):
        return True
    return in_task and isinstance(exc, asyncio.CancelledError)


class _Carried(Exception):
    """What a tool raised that an ``except Exception`` would miss or a Future cannot carry (a
    ``BaseException`` of its own, ``StopIteration``), carried as an ``Exception``; :func:`raised`
    gives it back."""

    def __init__(self, exc: BaseException) -> None:
        super().__init__(f"the tool raised {type(exc).__name__}")
        self.raised = exc


def carried(exc: BaseException) -> Exception:
    """``exc`` carried as an ``Exception`` (:func:`raised` gives it back)."""
    return _Carried(exc)


def call_carrying(fn: Callable[..., Any], kwargs: Mapping[str, Any]) -> Any:
    """``fn(**kwargs)`` on a worker thread; a ``StopIteration`` it raises is :func:`carried`
    (asyncio refuses it in a Future, which would then never end)."""
    try:
        return fn(**kwargs)
    except StopIteration as stop:
        raise _Carried(stop) from stop


def raised(exc: BaseException) -> BaseException:
    """What the tool itself raised: ``exc``, or what a :func:`carried` carries."""
    return exc.raised if type(exc) is _Carried else exc
