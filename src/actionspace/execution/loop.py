"""Event loops whose timed waits end on time: the epoll selector's timeout rounded up once.

``selectors.EpollSelector`` rounds a timeout up to a whole millisecond (``math.ceil(timeout *
1e3) * 1e-3``) and ``select.epoll.poll`` rounds the float it is given up to a millisecond again.
For some whole milliseconds the float is a hair above the millisecond (``9 * 1e-3`` is
``0.009000000000000001``), so the second rounding adds one: every wait whose timeout falls in
(8, 9], (12, 13], (17, 18], (25, 26], (35, 36], (51, 52], (58, 59] ms … sleeps one millisecond
more than asked. On Linux an asyncio loop that goes idle 8.4 ms before its next timer wakes
10.2 ms later, where 9.2 ms was asked for (``python -c`` with ``selectors.EpollSelector().select
(0.0084)``; the rounding up itself is deliberate, CPython bpo-20311: never wake early).

:func:`new_event_loop` makes an asyncio loop whose selector hands epoll the millisecond it
meant, rounded up once. The runtime runs its own loops on it (the portal loop of sync callers,
``Runtime.run_plan``, the service's lanes); an application can run its own on it too::

    import asyncio
    from actionspace.execution.loop import new_event_loop

    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        runner.run(asyncio.sleep(0.001))

Elsewhere than Linux (no epoll) it is the standard loop.
"""

from __future__ import annotations

import asyncio
import math
import select
import selectors
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from actionspace.errors import ConfigurationError

__all__ = [
    "LOOPS",
    "OnceRoundedPolicy",
    "epoll_seconds",
    "new_event_loop",
    "rounds_once",
    "run_on_own_loop",
    "run_until_stopped",
]

T = TypeVar("T")

LOOPS = ("once", "stdlib")
"""The loops a caller may ask for by name: :func:`new_event_loop`'s, or asyncio's own."""


def epoll_seconds(timeout: float) -> float:
    """The float that ``select.epoll.poll`` turns into ``timeout`` rounded up to a whole
    millisecond, once: a millisecond within 1e-6 ms of ``timeout`` counts as reached (the first
    rounding's float noise), and the float handed on is half a nanosecond short of that
    millisecond, so rounding it up to nanoseconds, then milliseconds, lands on it."""
    ms = math.ceil(timeout * 1e3 - 1e-6)
    return (ms * 1_000_000 - 0.5) / 1e9 if ms > 0 else 0.0


if hasattr(select, "epoll"):

    class _Epoll:
        """``select.epoll`` (which cannot be subclassed) with its ``poll`` timeout rounded once."""

        __slots__ = ("_epoll",)

        def __init__(self) -> None:
            self._epoll = select.epoll()

        def poll(self, timeout: float | None = None, maxevents: int = -1) -> list[tuple[int, int]]:
            if timeout is not None and timeout > 0:
                timeout = epoll_seconds(timeout)
            return self._epoll.poll(-1 if timeout is None else timeout, maxevents)

        def register(self, fd: int, eventmask: int) -> None:
            self._epoll.register(fd, eventmask)

        def modify(self, fd: int, eventmask: int) -> None:
            self._epoll.modify(fd, eventmask)

        def unregister(self, fd: int) -> None:
            self._epoll.unregister(fd)

        def fileno(self) -> int:
            return self._epoll.fileno()

        def close(self) -> None:
            self._epoll.close()

    class OnceRoundedSelector(selectors.EpollSelector):
        """``selectors.EpollSelector`` whose waits last the millisecond asked for, not one more."""

        _selector_cls: Any = _Epoll


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new asyncio event loop whose timed waits are rounded up to the millisecond once (see the
    module docstring); the standard one where there is no epoll."""
    if hasattr(select, "epoll"):
        return asyncio.SelectorEventLoop(OnceRoundedSelector())
    return asyncio.new_event_loop()


def run_on_own_loop(start: Callable[[], Coroutine[Any, Any, T]], *, misuse: str) -> T:
    """Run ``start()`` to its end on a loop of :func:`new_event_loop`: a sync form of an async method.

    Raises ConfigurationError(``misuse``) when called inside a running event loop (``start`` is
    then not called, so no coroutine is left unawaited).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        ended: list[T] = []

        async def main() -> None:
            # the result is kept here, not as the main task's: when the runner puts the interrupt
            # handler back, the standard library renders the handler it replaced as text, and with
            # it the main task and the task's result (a plan's every observation)
            ended.append(await start())

        with asyncio.Runner(loop_factory=new_event_loop) as runner:  # waits end on time
            runner.run(main())
        return ended[0]
    raise ConfigurationError(misuse)


class OnceRoundedPolicy(asyncio.DefaultEventLoopPolicy):
    """The default event loop policy, its new loops made by :func:`new_event_loop` (so
    ``asyncio.run`` runs on one): ``asyncio.set_event_loop_policy(OnceRoundedPolicy())``."""

    def new_event_loop(self) -> asyncio.AbstractEventLoop:
        return new_event_loop()


def rounds_once(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether ``loop`` is one :func:`new_event_loop` made on epoll."""
    return hasattr(select, "epoll") and isinstance(getattr(loop, "_selector", None), OnceRoundedSelector)


def run_until_stopped(loop: asyncio.AbstractEventLoop, stopping: threading.Event) -> None:
    """``loop.run_forever()`` on a thread of the runtime's own (the portal's, a service lane's)
    until ``stopping`` is set and the loop stopped. A ``KeyboardInterrupt`` or ``SystemExit`` that
    comes out of it was raised by a tool in a task (signals reach the main thread only): asyncio
    ends the task with it and lets it out of ``run_forever``, which would end the thread and leave
    every later call waiting on a loop nobody runs. The task's awaiter gets it from the task; the
    callbacks left queued run when the loop runs again. Set ``stopping`` before asking the loop
    to stop: a stop that ran in the pass the exception ended is reset on the way out."""
    while True:
        try:
            loop.run_forever()
            return  # it returns only when stopped
        except (KeyboardInterrupt, SystemExit):
            if stopping.is_set():
                loop.stop()
