"""The execute stage: one call of one tool, with a timeout per attempt and bounded retries.

Only ``transient`` and ``rate_limited`` failures are retried, within both the attempt cap and the
deadline of the tool's RetryPolicy. A timeout of a side-effecting tool is ``unknown_commit``: the
tool may have committed, so it is never retried blindly.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Generator, Mapping
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, replace
from typing import Any

from actionspace.adapters.python import map_exception
from actionspace.catalog.spec import ToolSpec
from actionspace.errors import ActionError

__all__ = ["Executor", "Failed", "Outcome", "Succeeded"]

AttemptHook = Callable[[int, ActionError, float], None]
"""Called before each retry with (attempt that failed, its error, delay in seconds)."""


@dataclass(frozen=True, slots=True)
class Succeeded:
    value: Any
    attempts: int


@dataclass(frozen=True, slots=True)
class Failed:
    error: ActionError
    attempts: int


Outcome = Succeeded | Failed


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


class _Portal:
    """A private event loop on a daemon thread, for running async tools from sync code."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        loop = self._loop
        if loop is None:
            with self._lock:
                if self._loop is None:
                    self._loop = asyncio.new_event_loop()
                    threading.Thread(
                        target=self._loop.run_forever, name="actionspace-portal", daemon=True
                    ).start()
                loop = self._loop
        return asyncio.run_coroutine_threadsafe(coro, loop).result()


class Executor:
    """Runs tool functions, sync or async, from sync or async callers."""

    def __init__(self, *, max_threads: int = 32) -> None:
        self._pool = ThreadPoolExecutor(max_workers=max_threads, thread_name_prefix="actionspace-tool")
        self._portal = _Portal()

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
                async with asyncio.timeout(spec.timeout_s):
                    first: Outcome = Succeeded(await _Resume(coro, yielded), 1)
            except TimeoutError:
                first = Failed(_timeout_error(spec), 1)
            except Exception as exc:
                first = Failed(map_exception(exc, side_effects=spec.has_side_effects), 1)
        else:
            first = await self._aattempt(spec, kwargs)
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
                value = await asyncio.wait_for(asyncio.to_thread(fn, **kwargs), spec.timeout_s)
            else:
                value = fn(**kwargs)
                if inspect.isawaitable(value):
                    value = await _with_timeout(_await(value), spec.timeout_s)
        except TimeoutError:
            return Failed(_timeout_error(spec), 1)
        except Exception as exc:
            return Failed(map_exception(exc, side_effects=spec.has_side_effects), 1)
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
                value = self._pool.submit(fn, **kwargs).result(timeout=spec.timeout_s)
            else:
                value = fn(**kwargs)
                if inspect.isawaitable(value):
                    value = self._run_coroutine(_await(value), spec.timeout_s)
        except (TimeoutError, FutureTimeout):
            return Failed(_timeout_error(spec), 1)
        except Exception as exc:
            return Failed(map_exception(exc, side_effects=spec.has_side_effects), 1)
        return Succeeded(value, 1)

    def block_on(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Run ``coro`` to its end from sync code, on the private event loop thread."""
        return self._portal.run(coro)

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
    synchronously; a coroutine that then waits continues under ``asyncio.timeout``.
    """
    try:
        yielded = coro.send(None)
    except StopIteration as stop:
        return stop.value
    except BaseException:
        coro.close()
        raise
    async with asyncio.timeout(timeout_s):
        return await _Resume(coro, yielded)


class _Resume:
    """Awaitable that drives an already-started coroutine to its end, passing its waits through."""

    __slots__ = ("coro", "yielded")

    def __init__(self, coro: Coroutine[Any, Any, Any], yielded: Any) -> None:
        self.coro = coro
        self.yielded = yielded

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, yielded = self.coro, self.yielded
        while True:
            try:
                sent = yield yielded
            except BaseException as exc:  # cancellation or timeout thrown in by the task
                try:
                    yielded = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    yielded = coro.send(sent)
                except StopIteration as stop:
                    return stop.value


def _exhausted(error: ActionError, attempts: int) -> ActionError:
    """The last error, no longer retryable, saying how many attempts were spent."""
    details = {**error.details, "attempts": attempts, "retries_exhausted": True}
    return replace(error, retryable=False, details=details)
