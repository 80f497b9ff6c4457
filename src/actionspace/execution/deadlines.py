"""Tool timeouts that cost nothing for a tool that answers without waiting.

An async tool's first step runs on the calling path, with no timer: most tools answer from memory
and never wait. One that waits continues under its timeout, counted from before that first step
(:func:`with_timeout`, or :func:`resume_within` for a coroutine its caller stepped by hand).
Inside a task, every deadline of one event loop shares one timer (:class:`_Watchdog`), and the
coroutine is driven by one generator frame (:func:`_driven`), which turns the watchdog's cancel
into ``TimeoutError`` and takes that cancel back, as ``asyncio.timeout`` does.
"""

from __future__ import annotations

import asyncio
import heapq
import time
import types
import weakref
from collections.abc import Awaitable, Coroutine, Generator
from typing import Any

__all__ = ["resume_within", "resumed", "with_timeout"]


async def with_timeout(coro: Coroutine[Any, Any, Any], timeout_s: float) -> Any:
    """Await ``coro`` under a timeout, paying for the timer only if it actually suspends.

    Most tool coroutines that answer from memory finish without ever waiting; for those, a timer
    (and the event-loop round trips ``wait_for`` costs) is pure overhead. The first step runs
    synchronously; a coroutine that then waits continues under the timeout, which counts the
    first step (a step that took the whole timeout ends at the coroutine's first wait).
    """
    start = time.monotonic()
    try:
        yielded = coro.send(None)
    except StopIteration as stop:
        return stop.value
    except BaseException:
        coro.close()
        raise
    return await resume_within(coro, yielded, timeout_s - (time.monotonic() - start))


def resume_within(coro: Coroutine[Any, Any, Any], yielded: Any, timeout_s: float) -> Awaitable[Any]:
    """Drive a started coroutine to its end; TimeoutError after ``timeout_s`` seconds.

    Inside a task the deadline is armed now, with the task's watchdog, and the coroutine is driven
    by one generator frame (:func:`_driven`) rather than a coroutine awaiting :func:`resumed`.
    """
    task = asyncio.current_task()
    if task is None:  # not inside a task: fall back to the standard timer
        return _within_standard_timer(coro, yielded, timeout_s)
    return _driven(coro, yielded, task, _watchdog(task.get_loop()).arm(task, timeout_s))


async def _within_standard_timer(coro: Coroutine[Any, Any, Any], yielded: Any, timeout_s: float) -> Any:
    async with asyncio.timeout(timeout_s):
        return await resumed(coro, yielded)


class _Deadline:
    __slots__ = ("done", "fired", "task")

    def __init__(self, task: asyncio.Task[Any]) -> None:
        self.task = task
        self.fired = False
        self.done = False


class _Watchdog:
    """One timer per event loop for every tool timeout, instead of one timer per call.

    Deadlines sit in a heap; the loop wakes at the earliest one, cancels the tasks whose deadline
    passed and sleeps until the next. Calls that end are marked done and dropped lazily, so a call
    that answers before its deadline costs a heap push and no timer of its own.
    """

    __slots__ = ("handle", "heap", "loop", "seq", "wake_at")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.heap: list[tuple[float, int, _Deadline]] = []
        self.handle: asyncio.TimerHandle | None = None
        self.wake_at = float("inf")
        self.seq = 0

    def arm(self, task: asyncio.Task[Any], timeout_s: float) -> _Deadline:
        heap = self.heap
        while heap and heap[0][2].done:
            heapq.heappop(heap)
        at = self.loop.time() + timeout_s
        deadline = _Deadline(task)
        self.seq += 1
        heapq.heappush(heap, (at, self.seq, deadline))
        if at < self.wake_at:
            if self.handle is not None:
                self.handle.cancel()
            self.wake_at = at
            self.handle = self.loop.call_at(at, self._fire)
        return deadline

    def _fire(self) -> None:
        self.handle, self.wake_at = None, float("inf")
        heap, now = self.heap, self.loop.time()
        while heap and (heap[0][0] <= now or heap[0][2].done):
            _, _, deadline = heapq.heappop(heap)
            if not deadline.done:
                deadline.fired = True
                deadline.task.cancel()
        if heap:
            self.wake_at = heap[0][0]
            self.handle = self.loop.call_at(self.wake_at, self._fire)


_WATCHDOGS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Watchdog] = weakref.WeakKeyDictionary()


_last: _Watchdog | None = None
"""The watchdog looked up last: a process mostly runs one event loop (a weak-keyed lookup per call
costs more than the rest of arming a deadline)."""


def _watchdog(loop: asyncio.AbstractEventLoop) -> _Watchdog:
    global _last
    dog = _last
    if dog is not None and dog.loop is loop:
        return dog
    dog = _WATCHDOGS.get(loop)
    if dog is None:
        dog = _WATCHDOGS[loop] = _Watchdog(loop)
    _last = dog
    return dog


def resumed(coro: Coroutine[Any, Any, Any], yielded: Any) -> Awaitable[Any]:
    """Await a coroutine that was stepped once by hand and answered ``yielded`` (its first wait):
    its further waits pass through, and a cancellation or timeout thrown in reaches it."""
    return _driven(coro, yielded, None, None)


@types.coroutine
def _driven(
    coro: Coroutine[Any, Any, Any],
    yielded: Any,
    task: asyncio.Task[Any] | None,
    deadline: _Deadline | None,
) -> Generator[Any, Any, Any]:
    """:func:`resumed`; with a ``deadline`` armed for ``task``, a cancel its watchdog fired (and
    nobody else asked for) is raised as TimeoutError, and the deadline is marked done at the end.
    A cancel the watchdog fired is always taken back (``task.uncancel()``), also when the tool
    swallowed it and answered or raised something else, as ``asyncio.timeout`` does: the task
    is left with no cancel of ours pending."""
    try:
        while True:
            try:
                sent = yield yielded
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # a cancellation, or what the awaited future raised
                try:
                    yielded = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    yielded = coro.send(sent)
                except StopIteration as stop:
                    return stop.value
    except asyncio.CancelledError:
        if deadline is not None and deadline.fired and task is not None:
            deadline.fired = False  # taken back here
            if task.uncancel() == 0:
                raise TimeoutError from None
        raise
    finally:
        if deadline is not None:
            deadline.done = True
            if deadline.fired and task is not None:  # the tool swallowed the cancel
                task.uncancel()
