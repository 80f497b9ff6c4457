"""The execute stage: one call of one tool, with a timeout per attempt and bounded retries.

Only ``transient`` and ``rate_limited`` failures are retried, within both the attempt cap and the
deadline of the tool's RetryPolicy. A timeout of a side-effecting tool is ``unknown_commit``: the
tool may have committed, so it is never retried blindly.
"""

from __future__ import annotations

import asyncio
import contextvars
import heapq
import inspect
import threading
import time
import types
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Generator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import replace
from typing import Any

from actionspace.catalog.spec import ToolSpec
from actionspace.errors import ActionError
from actionspace.execution.errors import ErrorMapper, map_exception
from actionspace.execution.loop import new_event_loop
from actionspace.types import Failed, Outcome, Succeeded

__all__ = ["Executor", "Failed", "Outcome", "Succeeded", "resumed"]

AttemptHook = Callable[[int, ActionError, float], None]
"""Called before each retry with (attempt that failed, its error, delay in seconds)."""


def _timeout_error(spec: ToolSpec) -> ActionError:
    if spec.has_side_effects:
        return ActionError.of(
            "unknown_commit",
            f"{spec.name} did not answer within {spec.timeout_s}s; it may have committed",
            details={"timeout_s": spec.timeout_s},
        )
    return ActionError.of(
        "transient",
        f"{spec.name} did not answer within {spec.timeout_s}s",
        details={"timeout_s": spec.timeout_s},
    )


def _not_started(spec: ToolSpec, waited_s: float) -> ActionError:
    """The attempt waited for a worker thread past its timeout and was withdrawn: it never ran."""
    return ActionError.of(
        "transient",
        f"{spec.name} was not started within {waited_s}s (every worker thread was busy); it was not sent",
        details={"timeout_s": waited_s, "sent": False},
    )


class _Portal:
    """A private event loop on a daemon thread, for running async tools from sync code."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def here(self) -> bool:
        """Whether the calling thread is the portal's (whose loop :meth:`run` would wait on)."""
        return self._thread is not None and threading.current_thread() is self._thread

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """``coro``'s result, run on the portal loop; if the wait is interrupted (a
        ``KeyboardInterrupt`` in the calling thread), ``coro`` is cancelled and its end awaited
        (up to ``CANCEL_WAIT_S``) before the interruption propagates."""
        loop = self._loop
        if loop is None:
            with self._lock:
                if self._loop is None:
                    self._loop = new_event_loop()  # its tools' waits end on time (execution/loop.py)
                    self._thread = threading.Thread(
                        target=self._loop.run_forever, name="actionspace-portal", daemon=True
                    )
                    self._thread.start()
                loop = self._loop
        ended = threading.Event()
        future = asyncio.run_coroutine_threadsafe(_until_ended(coro, ended), loop)
        try:
            return future.result()
        except BaseException:
            if not future.done():
                future.cancel()  # cancels its task on the loop
                ended.wait(CANCEL_WAIT_S)
            raise


async def _until_ended(coro: Coroutine[Any, Any, Any], ended: threading.Event) -> Any:
    try:
        return await coro
    finally:
        ended.set()


CANCEL_WAIT_S = 5.0
"""How long an interrupted :meth:`_Portal.run` waits for the coroutine it cancelled to end (seconds)."""


class Executor:
    """Runs tool functions, sync or async, from sync or async callers.

    ``map_error`` turns an exception a tool raised into its ``ActionError``; the owner hands in
    the mapping of the tools it runs (default: the Python-function tools',
    :func:`~actionspace.execution.errors.map_exception`). ``max_threads`` bounds the threads that
    run blocking tools (default 32).
    """

    def __init__(self, *, max_threads: int = 32, map_error: ErrorMapper = map_exception) -> None:
        self._pool = ThreadPoolExecutor(max_workers=max_threads, thread_name_prefix="actionspace-tool")
        self._portal = _Portal()
        self.map_error = map_error
        self.max_abandoned = max(1, max_threads // 2)
        """Attempts still running past their timeout beyond which no new blocking attempt starts."""
        self._abandoned: set[Future[Any]] = set()
        self._abandoned_lock = threading.Lock()

    @property
    def abandoned(self) -> int:
        """Attempts that timed out and still run on a worker thread (Python cannot stop them)."""
        return len(self._abandoned)

    def _submit(self, spec: ToolSpec, kwargs: Mapping[str, Any]) -> Future[Any] | Failed:
        """Start a blocking attempt on a worker thread, unless too many earlier ones still run."""
        if len(self._abandoned) >= self.max_abandoned:
            return Failed(
                ActionError.of(
                    "transient",
                    f"{spec.name} was not sent: {len(self._abandoned)} earlier attempts still run past"
                    " their timeouts",
                    details={"abandoned_threads": len(self._abandoned), "sent": False},
                ),
                1,
            )
        ctx = contextvars.copy_context()
        return self._pool.submit(ctx.run, spec.fn, **kwargs)  # type: ignore[arg-type]

    def _timed_out(self, spec: ToolSpec, fut: Future[Any]) -> Failed:
        """What a blocking attempt that did not answer in time is: never started, or still running."""
        if fut.cancel():
            return Failed(_not_started(spec, spec.timeout_s), 1)
        with self._abandoned_lock:
            self._abandoned.add(fut)
        late: Future[Outcome] = Future()

        def ended(done: Future[Any]) -> None:
            with self._abandoned_lock:
                self._abandoned.discard(done)
            exc = done.exception()
            if exc is None:
                late.set_result(Succeeded(done.result(), 1))
            else:
                error = self.map_error(exc, side_effects=spec.has_side_effects)
                late.set_result(Failed(error, 1))

        fut.add_done_callback(ended)
        error = _timeout_error(spec)
        error = replace(
            error, details={**error.details, "still_running": True, "abandoned_threads": self.abandoned}
        )
        return Failed(error, 1, running=late)

    # ------------------------------------------------------------------ async callers
    async def arun(
        self, spec: ToolSpec, kwargs: Mapping[str, Any], on_retry: AttemptHook | None = None
    ) -> Outcome:
        start = time.monotonic()
        if spec.is_async:
            # Fast path: a coroutine that finishes without waiting needs no timer and no extra frames.
            try:
                coro = spec.fn(**kwargs)  # type: ignore[misc]
                try:
                    yielded = coro.send(None)
                except StopIteration as stop:
                    return Succeeded(stop.value, 1)
                except BaseException:
                    coro.close()
                    raise
            except Exception as exc:
                return await self.acontinue(spec, kwargs, on_retry, start, failure=exc)
            return await self.acontinue(spec, kwargs, on_retry, start, coro=coro, yielded=yielded)
        first = await self._aattempt(spec, kwargs)
        if isinstance(first, Succeeded) or not first.error.retryable or spec.retry.max_attempts <= 1:
            return first
        return await self._aretry(spec, kwargs, first.error, on_retry, start)

    def resume(
        self, spec: ToolSpec, coro: Coroutine[Any, Any, Any], yielded: Any, start: float
    ) -> Awaitable[Any]:
        """The value of an async tool's coroutine its caller stepped once by hand (it answered
        ``yielded``, its first wait), driven to its end under the tool's timeout, counted from
        ``start`` (the ``time.monotonic()`` before that step; armed now: await it at once). What
        it raises (``TimeoutError`` at the deadline) goes to :meth:`acontinue` as ``failure``,
        which types it and retries as :meth:`arun` would."""
        return _resume_within(coro, yielded, spec.timeout_s - (time.monotonic() - start))

    async def acontinue(
        self,
        spec: ToolSpec,
        kwargs: Mapping[str, Any],
        on_retry: AttemptHook | None,
        start: float,
        *,
        coro: Coroutine[Any, Any, Any] | None = None,
        yielded: Any = None,
        failure: Exception | None = None,
    ) -> Outcome:
        """:meth:`arun` of an async tool whose first step its caller took by hand: ``coro``
        answered ``yielded`` (its first wait), or calling or stepping it raised ``failure``.

        ``start``: the ``time.monotonic()`` before that step (retries are timed from it).
        """
        first: Outcome
        if failure is None:
            assert coro is not None
            try:
                left = spec.timeout_s - (time.monotonic() - start)  # the first step counts
                first = Succeeded(await _resume_within(coro, yielded, left), 1)
            except TimeoutError:
                first = Failed(_timeout_error(spec), 1)
            except Exception as exc:
                first = Failed(self.map_error(exc, side_effects=spec.has_side_effects), 1)
        elif isinstance(failure, TimeoutError):
            first = Failed(_timeout_error(spec), 1)
        else:
            first = Failed(self.map_error(failure, side_effects=spec.has_side_effects), 1)
        if isinstance(first, Succeeded) or not first.error.retryable or spec.retry.max_attempts <= 1:
            return first
        return await self._aretry(spec, kwargs, first.error, on_retry, start)

    async def _aretry(
        self,
        spec: ToolSpec,
        kwargs: Mapping[str, Any],
        error: ActionError,
        on_retry: AttemptHook | None,
        start: float,
    ) -> Outcome:
        attempt = 1
        while True:
            delay = self._next_delay(spec, attempt, error, start)
            if delay is None:
                return Failed(_exhausted(error, attempt), attempt)
            if on_retry is not None:
                on_retry(attempt, error, delay)
            await asyncio.sleep(delay)
            attempt += 1
            outcome = await self._aattempt(spec, kwargs)
            if isinstance(outcome, Succeeded):
                return Succeeded(outcome.value, attempt)
            error = outcome.error
            if not error.retryable:
                return Failed(error, attempt)

    async def _aattempt(self, spec: ToolSpec, kwargs: Mapping[str, Any]) -> Outcome:
        fn = spec.fn
        assert fn is not None
        try:
            if spec.is_async:
                value = await _with_timeout(fn(**kwargs), spec.timeout_s)
            elif spec.blocking:
                fut = self._submit(spec, kwargs)
                if isinstance(fut, Failed):
                    return fut
                try:
                    value = await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(fut)), spec.timeout_s)
                except TimeoutError:
                    return self._timed_out(spec, fut)
            else:
                value = fn(**kwargs)
                if inspect.isawaitable(value):
                    value = await _with_timeout(_await(value), spec.timeout_s)
        except TimeoutError:
            return Failed(_timeout_error(spec), 1)
        except Exception as exc:
            return Failed(self.map_error(exc, side_effects=spec.has_side_effects), 1)
        return Succeeded(value, 1)

    # ------------------------------------------------------------------ sync callers
    def run(self, spec: ToolSpec, kwargs: Mapping[str, Any], on_retry: AttemptHook | None = None) -> Outcome:
        start = time.monotonic()
        first = self._attempt(spec, kwargs)
        if isinstance(first, Succeeded) or not first.error.retryable or spec.retry.max_attempts <= 1:
            return first
        attempt, error = 1, first.error
        while True:
            delay = self._next_delay(spec, attempt, error, start)
            if delay is None:
                return Failed(_exhausted(error, attempt), attempt)
            if on_retry is not None:
                on_retry(attempt, error, delay)
            time.sleep(delay)
            attempt += 1
            outcome = self._attempt(spec, kwargs)
            if isinstance(outcome, Succeeded):
                return Succeeded(outcome.value, attempt)
            error = outcome.error
            if not error.retryable:
                return Failed(error, attempt)

    def _attempt(self, spec: ToolSpec, kwargs: Mapping[str, Any]) -> Outcome:
        fn = spec.fn
        assert fn is not None
        try:
            if spec.is_async:
                value = self._run_coroutine(fn(**kwargs), spec.timeout_s)
            elif spec.blocking:
                fut = self._submit(spec, kwargs)
                if isinstance(fut, Failed):
                    return fut
                try:
                    value = fut.result(timeout=spec.timeout_s)
                except (TimeoutError, FutureTimeout):
                    return self._timed_out(spec, fut)
            else:
                value = fn(**kwargs)
                if inspect.isawaitable(value):
                    value = self._run_coroutine(_await(value), spec.timeout_s)
        except (TimeoutError, FutureTimeout):
            return Failed(_timeout_error(spec), 1)
        except Exception as exc:
            return Failed(self.map_error(exc, side_effects=spec.has_side_effects), 1)
        return Succeeded(value, 1)

    def block_on(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Run ``coro`` to its end from sync code, on the private event loop thread (the one every
        async tool called from sync code runs on). Not from that thread itself (it would wait on
        its own loop): see :meth:`on_portal`."""
        return self._portal.run(coro)

    def on_portal(self) -> bool:
        """Whether the calling thread is the one :meth:`block_on` runs coroutines on (an async tool
        called from sync code runs there)."""
        return self._portal.here()

    def _run_coroutine(self, coro: Coroutine[Any, Any, Any], timeout_s: float) -> Any:
        """Run a tool coroutine from sync code, on the portal loop (it may need a running loop)."""
        return self._portal.run(_with_timeout(coro, timeout_s))

    # ------------------------------------------------------------------ shared
    @staticmethod
    def _next_delay(spec: ToolSpec, attempt: int, error: ActionError, start: float) -> float | None:
        """Delay before the next attempt, or None when the attempt cap or deadline is reached."""
        policy = spec.retry
        if attempt >= policy.max_attempts:
            return None
        delay = policy.backoff(attempt)
        if error.retry_after is not None:
            delay = max(0.0, float(error.retry_after))
        if time.monotonic() - start + delay >= policy.deadline_s:
            return None
        return delay

    def close(self, *, wait: bool = False) -> None:
        """Stop the worker threads; ``wait`` lets sends that timed out run to their end first."""
        self._pool.shutdown(wait=wait, cancel_futures=not wait)


async def _await(value: Awaitable[Any]) -> Any:
    return await value


async def _with_timeout(coro: Coroutine[Any, Any, Any], timeout_s: float) -> Any:
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
    return await _resume_within(coro, yielded, timeout_s - (time.monotonic() - start))


def _resume_within(coro: Coroutine[Any, Any, Any], yielded: Any, timeout_s: float) -> Awaitable[Any]:
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


def _exhausted(error: ActionError, attempts: int) -> ActionError:
    """The last error, no longer retryable, saying how many attempts were spent."""
    details = {**error.details, "attempts": attempts, "retries_exhausted": True}
    return replace(error, retryable=False, details=details)
