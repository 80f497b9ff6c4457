"""The execute stage: one call of one tool, with a timeout per attempt and bounded retries.

Only ``transient`` and ``rate_limited`` failures are retried, within both the attempt cap and the
deadline of the tool's RetryPolicy. A timeout of a side-effecting tool is ``unknown_commit``: the
tool may have committed, so it is never retried blindly.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from concurrent.futures import CancelledError as FutureCancelled
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import replace
from typing import Any

from actionspace.catalog.spec import ToolSpec
from actionspace.errors import ActionError, said_safely
from actionspace.execution._interrupted import interrupted
from actionspace.execution._portal import Portal
from actionspace.execution._sends import SENDING, WITHDRAWN, gated
from actionspace.execution.deadlines import outlived, resume_within, resumed, with_timeout
from actionspace.execution.errors import ErrorMapper, map_exception
from actionspace.execution.pulls import Pull, Stopped
from actionspace.execution.raised import call_carrying, passes_on, raised
from actionspace.outcomes import Failed, Outcome, Succeeded

__all__ = ["NOT_BEGUN", "Executor", "Failed", "Outcome", "Succeeded", "resumed", "running_attempt"]

AttemptHook = Callable[[int, ActionError, float], None]
"""Called before each retry with (attempt that failed, its error, delay in seconds)."""


_RUNNING_ATTEMPT = "actionspace_running_attempt"
NOT_BEGUN = "the Runtime was closed before this call began; it was not sent"
_PLAIN = frozenset({int, str, float, bool, type(None), dict, list, tuple, bytes})
"""Exact types of a tool's value that are never awaitable: no ``inspect.isawaitable`` (two Python
calls, one of them the ABC's ``__instancecheck__``) for them."""


def running_attempt(cut: BaseException) -> Future[Outcome] | None:
    """The Outcome an attempt ends with, when ``cut`` cancelled (or interrupted) its caller while it ran
    on its worker thread (which goes on: Python cannot stop it), or while an async tool that caught its
    timeout's cancel held its caller (it goes on on its own task); None for any other exception."""
    found = getattr(cut, _RUNNING_ATTEMPT, None)
    return found if isinstance(found, Future) else None


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


class Executor:
    """Runs tool functions, sync or async, from sync or async callers.

    ``map_error`` turns an exception a tool raised into its ``ActionError``; the owner hands in
    the mapping of the tools it runs (default: the Python-function tools',
    :func:`~actionspace.execution.errors.map_exception`); what it answers is redacted
    (:meth:`ActionError.redacted`), so no credential in a tool's exception reaches an observation.
    ``max_threads`` bounds the threads that run blocking tools (default 32).
    """

    def __init__(self, *, max_threads: int = 32, map_error: ErrorMapper = map_exception) -> None:
        self._pool = ThreadPoolExecutor(max_workers=max_threads, thread_name_prefix="actionspace-tool")
        self._portal = Portal()
        self._map_error = map_error
        self.max_abandoned = max(1, max_threads // 2)
        """Attempts still running past their timeout beyond which no new blocking attempt starts."""
        self._abandoned: set[Future[Any]] = set()
        self._abandoned_lock = threading.Lock()
        self.closed = False
        """Set when its owner begins to close: no tool call begins after it (a path that would begin
        one ends it ``cancelled``, :data:`NOT_BEGUN`, ``details["sent"]`` False: nothing recorded as sent)."""

    @property
    def map_error(self) -> ErrorMapper:
        """The owner's mapper, each error it answers redacted (:meth:`ActionError.redacted`)."""
        return self._mapped

    def _mapped(self, exc: BaseException, *, side_effects: bool) -> ActionError:
        return self._map_error(raised(exc), side_effects=side_effects).redacted()

    @property
    def abandoned(self) -> int:
        """Attempts that timed out and still run on a worker thread (Python cannot stop them)."""
        return len(self._abandoned)

    def _crowded(self, spec: ToolSpec) -> ActionError | None:
        """Why no new blocking attempt starts (too many earlier ones still run), or None."""
        if len(self._abandoned) < self.max_abandoned:
            return None
        return ActionError.of(
            "transient",
            f"{spec.name} was not sent: {len(self._abandoned)} earlier attempts still run past"
            " their timeouts",
            details={"abandoned_threads": len(self._abandoned), "sent": False},
        )

    def _submit(self, spec: ToolSpec, kwargs: Mapping[str, Any]) -> Future[Any] | Failed:
        """Start a blocking attempt on a worker thread, unless too many earlier ones still run."""
        crowded = self._crowded(spec)
        if crowded is not None:
            return Failed(crowded, 1)
        ctx = contextvars.copy_context()
        gate = SENDING.get()
        if gate is None:
            return self._pool.submit(ctx.run, call_carrying, spec.fn, kwargs)  # type: ignore[arg-type]
        # a write's send: withdrawable by close() while it waits for a worker (execution/_sends.py)
        fut = gate.queue(lambda: self._pool.submit(ctx.run, gated, gate, spec.fn, kwargs))  # type: ignore[arg-type]
        return _withdrawn() if fut is None else fut

    async def apull(self, spec: ToolSpec, pull: Pull) -> Any:
        """The next chunk of a blocking sync generator tool (``END`` after its last), pulled on a
        worker thread within ``spec.timeout_s`` (:mod:`actionspace.execution.pulls`).

        Raises what the generator raises; answers :class:`Stopped` when no chunk came in time (its step
        still ``running``, counted in :attr:`abandoned` until it ends), or when the first chunk is
        not asked for, too many earlier attempts still running (its ``error``). A cancelled
        caller's step still running is noted on the cancel (:func:`running_attempt`).
        """
        crowded = None if pull.started else self._crowded(spec)
        if crowded is not None:
            return Stopped(error=crowded)
        pull.arm()
        fut = self._pool.submit(contextvars.copy_context().run, pull.step)
        try:
            return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(fut)), spec.timeout_s)
        except TimeoutError:
            if fut.cancel():
                return Stopped()
            if not pull.give_up():  # it answered at the deadline
                return await asyncio.wrap_future(fut)
            return Stopped(running=self._left_running(spec, fut))
        except asyncio.CancelledError as cut:
            if not fut.cancel() and pull.give_up():
                setattr(cut, _RUNNING_ATTEMPT, self._left_running(spec, fut))
            raise

    def _timed_out(self, spec: ToolSpec, fut: Future[Any]) -> Failed:
        """What a blocking attempt that did not answer in time is: never started, or still running."""
        if fut.cancel():
            return Failed(_not_started(spec, spec.timeout_s), 1)
        late = self._left_running(spec, fut)
        error = _timeout_error(spec)
        error = replace(
            error, details={**error.details, "still_running": True, "abandoned_threads": self.abandoned}
        )
        return Failed(error, 1, running=late)

    def _cut(self, spec: ToolSpec, fut: Future[Any], cut: BaseException) -> None:
        """Note on ``cut`` (the cancel of the caller of a blocking attempt) the Outcome that
        attempt ends with (:func:`running_attempt`): withdrawn unsent when it had not started."""
        if fut.cancel():
            unsent: Future[Outcome] = Future()
            unsent.set_result(Failed(_not_started(spec, 0.0), 1))
            setattr(cut, _RUNNING_ATTEMPT, unsent)
        else:
            setattr(cut, _RUNNING_ATTEMPT, self._left_running(spec, fut))

    def _left_running(self, spec: ToolSpec, fut: Future[Any]) -> Future[Outcome]:
        """The Outcome a blocking attempt nobody waits for any more ends with (counted in
        :attr:`abandoned` until then)."""
        with self._abandoned_lock:
            self._abandoned.add(fut)

        def ended(done: Future[Any]) -> None:
            with self._abandoned_lock:
                self._abandoned.discard(done)

        fut.add_done_callback(ended)
        return self._outcome_of(spec, fut)

    def _outcome_of(self, spec: ToolSpec, fut: Future[Any]) -> Future[Outcome]:
        """The Outcome the attempt whose value (or exception) ``fut`` holds ends with."""
        late: Future[Outcome] = Future()

        def ended(done: Future[Any]) -> None:
            exc = None if done.cancelled() else done.exception()
            if exc is None and not done.cancelled():
                value = done.result()
                late.set_result(_withdrawn() if value is WITHDRAWN else Succeeded(value, 1))
                return
            try:
                error = self.map_error(exc or asyncio.CancelledError(), side_effects=spec.has_side_effects)
            except Exception as unmapped:  # the owner's mapper broke: what the send did stays unknown
                why = f"{type(unmapped).__name__}: {said_safely(unmapped, 200)}"
                error = ActionError.of("unknown_commit", f"{spec.name} raised an unmappable error ({why})")
            late.set_result(Failed(error, 1))

        fut.add_done_callback(ended)
        return late

    def _async_timed_out(self, spec: ToolSpec, exc: BaseException) -> Failed:
        """What an async attempt that did not answer in time is; one that caught its cancel and
        went on past its grace (:func:`~actionspace.execution.deadlines.outlived`) still runs."""
        running = outlived(exc)
        if running is None:
            return Failed(_timeout_error(spec), 1)
        error = _timeout_error(spec)
        error = replace(error, details={**error.details, "still_running": True, "cancel_ignored": True})
        return Failed(error, 1, running=self._outcome_of(spec, running))

    def _note_outlived(self, spec: ToolSpec, cut: BaseException) -> None:
        """Note on ``cut`` (its caller's cancel) the Outcome of an async attempt that went on on
        its own task (:func:`running_attempt`)."""
        running = outlived(cut)
        if running is not None:
            setattr(cut, _RUNNING_ATTEMPT, self._outcome_of(spec, running))

    # ------------------------------------------------------------------ async callers
    async def arun(
        self, spec: ToolSpec, kwargs: Mapping[str, Any], on_retry: AttemptHook | None = None
    ) -> Outcome:
        start = time.monotonic()
        if spec._is_async:  # ToolSpec.is_async, read without the property's call
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
            except BaseException as exc:  # a BaseException of the tool's own is its failure (raised.py)
                if passes_on(exc, in_task=True):
                    raise
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
        return resume_within(coro, yielded, spec.timeout_s - (time.monotonic() - start))

    async def acontinue(
        self,
        spec: ToolSpec,
        kwargs: Mapping[str, Any],
        on_retry: AttemptHook | None,
        start: float,
        *,
        coro: Coroutine[Any, Any, Any] | None = None,
        yielded: Any = None,
        failure: BaseException | None = None,
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
                first = Succeeded(await resume_within(coro, yielded, left), 1)
            except TimeoutError as late:
                first = self._async_timed_out(spec, late)
            except Exception as exc:
                first = Failed(self.map_error(exc, side_effects=spec.has_side_effects), 1)
            except BaseException as exc:
                if passes_on(exc, in_task=True):
                    self._note_outlived(spec, exc)
                    raise
                first = Failed(self.map_error(exc, side_effects=spec.has_side_effects), 1)
        elif isinstance(failure, TimeoutError):
            first = self._async_timed_out(spec, failure)
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
                return _last(outcome, attempt)

    async def _aattempt(self, spec: ToolSpec, kwargs: Mapping[str, Any]) -> Outcome:
        fn = spec.fn
        assert fn is not None
        is_async = spec._is_async  # ToolSpec.is_async, read without the property's call
        try:
            if is_async:
                value = await with_timeout(fn(**kwargs), spec.timeout_s)
            elif spec.blocking:
                fut = self._submit(spec, kwargs)
                if isinstance(fut, Failed):
                    return fut
                try:
                    value = await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(fut)), spec.timeout_s)
                except TimeoutError:
                    return self._timed_out(spec, fut)
                except asyncio.CancelledError as cut:
                    self._cut(spec, fut, cut)
                    raise
                if value is WITHDRAWN:
                    return _withdrawn()
            else:
                value = fn(**kwargs)
            # a sync wrapper handing back its coroutine (a plain value's exact type is never one)
            if not is_async and type(value) not in _PLAIN and inspect.isawaitable(value):
                value = await with_timeout(_await(value), spec.timeout_s)
        except TimeoutError as late:
            return self._async_timed_out(spec, late)
        except Exception as exc:
            return Failed(self.map_error(exc, side_effects=spec.has_side_effects), 1)
        except BaseException as exc:
            if passes_on(exc, in_task=True):
                self._note_outlived(spec, exc)
                raise
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
                return _last(outcome, attempt)

    def _attempt(self, spec: ToolSpec, kwargs: Mapping[str, Any]) -> Outcome:
        fn = spec.fn
        assert fn is not None
        is_async = spec._is_async  # ToolSpec.is_async, read without the property's call
        try:
            if is_async:
                value = self._run_coroutine(fn(**kwargs), spec.timeout_s)
            elif spec.blocking:
                try:  # a signal handler's exception may land once the attempt is handed over
                    fut = self._submit(spec, kwargs)
                except BaseException as cut:
                    if interrupted(cut):  # its send withdrawn before a worker began it: noted unsent
                        self._cut(spec, Future(), cut)
                    raise
                if isinstance(fut, Failed):
                    return fut
                try:
                    value = fut.result(timeout=spec.timeout_s)
                except (TimeoutError, FutureTimeout):
                    return self._timed_out(spec, fut)
                except FutureCancelled:
                    if not fut.cancelled():  # the tool raised it: its own failure
                        raise
                    return _withdrawn()  # withdrawn from the queue by close(): the tool never ran
                except BaseException as cut:  # noted as a task's cancel is (execution/_interrupted.py)
                    if interrupted(cut, fut):
                        self._cut(spec, fut, cut)
                    raise
                if value is WITHDRAWN:
                    return _withdrawn()
            else:
                value = fn(**kwargs)
            # a sync wrapper handing back its coroutine (a plain value's exact type is never one)
            if not is_async and type(value) not in _PLAIN and inspect.isawaitable(value):
                value = self._run_coroutine(_await(value), spec.timeout_s)
        except (TimeoutError, FutureTimeout) as late:
            return self._async_timed_out(spec, late)
        except Exception as exc:
            return Failed(self.map_error(exc, side_effects=spec.has_side_effects), 1)
        except BaseException as exc:
            if passes_on(exc, in_task=False):
                raise
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
        """Run a tool coroutine from sync code, on the portal loop (it may need a running loop).
        A cancel the tool raised itself (nothing else cancels it there) comes back as it raised it."""
        try:
            return self._portal.run(with_timeout(coro, timeout_s))
        except FutureCancelled:
            raise asyncio.CancelledError from None

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
        self.closed = True
        self._pool.shutdown(wait=wait, cancel_futures=not wait)
        self._portal.close()


async def _await(value: Awaitable[Any]) -> Any:
    return await value


def _last(failed: Failed, attempts: int) -> Failed:
    """The retries' last attempt ``failed``, counting all ``attempts``. Its ``running`` is kept: a
    retry that outlived its timeout may yet commit, and the commit protocol must know it still
    runs (else a status query's truthful "not committed" would send the write again beside it)."""
    return Failed(failed.error, attempts, running=failed.running)


def _withdrawn() -> Failed:
    """A blocking attempt withdrawn by ``close()`` before a worker thread began it: never sent."""
    return Failed(ActionError.of("cancelled", NOT_BEGUN, details={"sent": False}), 1)


def _exhausted(error: ActionError, attempts: int) -> ActionError:
    """The last error, no longer retryable, saying how many attempts were spent."""
    details = {**error.details, "attempts": attempts, "retries_exhausted": True}
    return replace(error, retryable=False, details=details)
