"""Tool timeouts that cost nothing for a tool that answers without waiting.

An async tool's first step runs on the calling path, with no timer: most tools answer from memory
and never wait. One that waits continues under its timeout, counted from before that first step
(:func:`with_timeout`, or :func:`resume_within` for a coroutine its caller stepped by hand).
Inside a task, every deadline of one event loop shares one timer (:class:`_Watchdog`), and the
coroutine is driven by one generator frame (:func:`_driven`), which turns the watchdog's cancel
into ``TimeoutError`` and takes that cancel back, as ``asyncio.timeout`` does.

A tool that catches that cancel and waits on is given :data:`CANCEL_GRACE_S` to end; past it, its
coroutine goes on on a task of its own and the caller gets its ``TimeoutError`` (or its own
cancel) carrying a Future of what the tool ends with (:func:`outlived`), as a blocking tool's
thread goes on past its timeout.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import heapq
import time
import types
import weakref
from collections.abc import Awaitable, Coroutine, Generator
from typing import Any

from actionspace.execution.raised import carried, passes_on

__all__ = ["CANCEL_GRACE_S", "on_their_own", "outlived", "resume_within", "resumed", "with_timeout"]

CANCEL_GRACE_S = 0.25
"""How long a tool that caught the cancel of its timeout may still hold its caller (seconds);
past it the tool goes on on its own task (:func:`outlived`)."""

_OUTLIVED = "actionspace_outlived"
_ON_THEIR_OWN: set[asyncio.Task[Any]] = set()
"""Tools handed off past their grace, held here until they end (the loop keeps only weak references)."""


class _Outlived(TimeoutError):
    """The timeout of a tool handed to its own task. Its own class, so a ``concurrent.futures``
    hand-over (the portal of sync callers) keeps it as it is instead of copying a plain
    ``TimeoutError`` into a new one without its note."""


def outlived(exc: BaseException) -> concurrent.futures.Future[Any] | None:
    """The Future of the value (or exception) of a tool that outlived its timeout's grace and
    goes on on its own task, when ``exc`` (a ``TimeoutError``, or the caller's own cancel that
    came during the grace) ended its caller's wait; None for any other exception."""
    found = getattr(exc, _OUTLIVED, None)
    return found if isinstance(found, concurrent.futures.Future) else None


def on_their_own() -> int:
    """Tools still running on their own tasks after their callers' timeouts and grace."""
    return len(_ON_THEIR_OWN)


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
    nobody else asked for) is raised as TimeoutError, and the deadline is marked done at the end;
    a ``BaseException`` subclass of the tool's own (:func:`~actionspace.execution.raised.passes_on`)
    is :func:`~actionspace.execution.raised.carried`.
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
                if deadline is not None and deadline.fired:  # it caught the timeout's cancel, waits on
                    assert task is not None
                    return (yield from _graced(coro, yielded, task, deadline))
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
    except BaseException as exc:  # under a timeout, a tool's own BaseException is its failure
        if isinstance(exc, Exception) or deadline is None or passes_on(exc, in_task=True):
            raise
        raise carried(exc) from exc
    finally:
        if deadline is not None:
            deadline.done = True
            if deadline.fired and task is not None:  # the tool swallowed the cancel
                task.uncancel()


@types.coroutine
def _graced(
    coro: Coroutine[Any, Any, Any], yielded: Any, task: asyncio.Task[Any], deadline: _Deadline
) -> Generator[Any, Any, Any]:
    """:func:`_driven` of a tool that caught its timeout's cancel, for :data:`CANCEL_GRACE_S`
    more: the caller waits on a future of its own (woken by the tool's or by the grace's end), so
    the tool's own waits are never cancelled again. Past the grace, or at a cancel of the caller,
    the tool is handed to a task of its own and its caller's wait ends (:func:`outlived`)."""
    loop = task.get_loop()
    until = loop.time() + CANCEL_GRACE_S
    while True:
        if asyncio.isfuture(yielded) and yielded._asyncio_future_blocking and yielded.get_loop() is loop:
            woken: asyncio.Future[None] = loop.create_future()
            timer = loop.call_at(until, _wake, woken)

            def woken_by(_: Any, woken: asyncio.Future[None] = woken) -> None:
                _wake(woken)

            yielded.add_done_callback(woken_by)
            try:
                yield from woken
            except asyncio.CancelledError as cut:  # the caller's own cancel: it ends now
                deadline.fired = False  # taken back here
                raise _handed_off(coro, yielded, cut if task.uncancel() > 0 else _Outlived()) from None
            finally:
                timer.cancel()
                yielded.remove_done_callback(woken_by)
            if not yielded.done():
                raise _grace_over(coro, yielded, task, deadline)
            yielded._asyncio_future_blocking = False  # consumed here, as its task would
            sent = None
        else:  # a bare yield (asyncio.sleep(0)) or what a task refuses: passed through as _driven does
            try:
                sent = yield yielded
            except BaseException as exc:
                try:
                    yielded = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
                continue
            if loop.time() >= until:
                raise _grace_over(coro, yielded, task, deadline)
        try:
            yielded = coro.send(sent)
        except StopIteration as stop:
            return stop.value


def _grace_over(
    coro: Coroutine[Any, Any, Any], yielded: Any, task: asyncio.Task[Any], deadline: _Deadline
) -> BaseException:
    """What ends the wait of a caller whose tool outlived its grace: its timeout, or a cancel of
    the caller that came meanwhile (its count kept); the timeout's own cancel is taken back."""
    deadline.fired = False
    cut = asyncio.CancelledError() if task.uncancel() > 0 else _Outlived()
    return _handed_off(coro, yielded, cut)


def _wake(woken: asyncio.Future[None]) -> None:
    if not woken.done():
        woken.set_result(None)


def _handed_off(coro: Coroutine[Any, Any, Any], yielded: Any, cut: BaseException) -> BaseException:
    """``cut``, noting on it (:func:`outlived`) the Future of what ``coro`` ends with, driven on
    from its wait ``yielded`` on a task of its own."""
    if asyncio.isfuture(yielded):
        yielded._asyncio_future_blocking = True  # still its wait: its new task waits on it
    own = asyncio.get_running_loop().create_task(_on_its_own(coro, yielded))
    ended: concurrent.futures.Future[Any] = concurrent.futures.Future()
    _ON_THEIR_OWN.add(own)
    own.add_done_callback(lambda done: _settled(done, ended))
    setattr(cut, _OUTLIVED, ended)
    return cut


async def _on_its_own(coro: Coroutine[Any, Any, Any], yielded: Any) -> Any:
    return await resumed(coro, yielded)


def _settled(done: asyncio.Task[Any], ended: concurrent.futures.Future[Any]) -> None:
    """Hand what a tool on its own task ended with to ``ended``, whose readers (the ledger's
    late write) run on a worker thread, off the event loop."""
    _ON_THEIR_OWN.discard(done)
    value: Any = None
    failure: BaseException | None = asyncio.CancelledError() if done.cancelled() else done.exception()
    if failure is None:
        value = done.result()

    def settle() -> None:
        if failure is None:
            ended.set_result(value)
        else:
            ended.set_exception(failure)

    try:
        done.get_loop().run_in_executor(None, settle)
    except RuntimeError:  # the loop's executor is shut down: settled here
        with contextlib.suppress(concurrent.futures.InvalidStateError):
            settle()
