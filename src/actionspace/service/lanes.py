"""Event loops for background runs, one lane per group of principals, and time-limited CPU work.

Runs of one principal share a lane (a thread running an event loop); each principal newly seen
takes the next lane in turn, so up to :attr:`Lanes.count` principals never share one, and a run
that keeps its loop busy delays only the runs that share its lane. CPU-heavy steps
(parsing a raw model output) do not run on a lane at all: :func:`off_loop` runs short ones on a
worker thread under a time limit, :data:`PROCESSES` long ones in worker processes, stopped at the
time limit, so they hold neither a lane nor the interpreter lock the server's threads share. The
workers run at a lower CPU priority than the server (``nice``), so a flood of huge outputs takes the
cores the server leaves idle rather than the ones its requests need.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import inspect
import multiprocessing
import os
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Final, TypeVar

from actionspace.execution.loop import new_event_loop, run_until_stopped
from actionspace.service._stopped import watched_task

__all__ = ["DEFAULT_LANES", "PROCESSES", "WORKER_NICE", "Lanes", "ProcessWork", "off_loop"]

DEFAULT_LANES: Final = 4
"""Lanes of a runner by default."""
_MAX_ASSIGNED: Final = 10_000

T = TypeVar("T")
A = TypeVar("A")

_CPU: Final = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="actionspace-cpu")
"""Workers for CPU-heavy steps: bounded, so a flood of huge inputs queues instead of multiplying."""


async def off_loop(fn: Callable[[], T], *, timeout_s: float) -> T:
    """``fn()`` on a worker thread; raises ``TimeoutError`` after ``timeout_s`` seconds.

    ``fn`` must be free of side effects: after a timeout it may still finish on its thread, and
    its result is dropped. For work long enough to hold the interpreter from the server's threads,
    use :data:`PROCESSES` instead.
    """
    loop = asyncio.get_running_loop()
    future = loop.run_in_executor(_CPU, fn)
    return await asyncio.wait_for(future, timeout=timeout_s)


WORKER_NICE: Final = 10
"""How much lower than the server's the worker processes' CPU priority is (``os.nice`` steps)."""


def _lower_priority(increment: int) -> None:
    """A worker's initializer: step its CPU priority down by ``increment`` where the system allows."""
    with contextlib.suppress(AttributeError, OSError):  # no os.nice on Windows
        os.nice(increment)


class ProcessWork:
    """A small pool of worker processes for CPU-heavy pure functions, with a hard time limit.

    A thread cannot be stopped and, holding the interpreter lock, slows every thread of the server;
    a process can be. :meth:`run` sends ``fn(arg)`` (both picklable) to a worker; past the time
    limit the workers are terminated and replaced, and ``TimeoutError`` is raised. Work of other
    callers cut short by that replacement is sent again once, to the new workers. The workers run
    ``nice`` steps below the creating process's priority: the work is whoever sent the huge input's,
    and on a machine with few cores it must not take them from the requests the server answers.

    A caller waits on its event loop, for the pool's own thread to hand the result over, holding no
    thread: work queued behind busy workers must not take the threads :func:`off_loop` runs the
    small parses of everyone else's runs on.
    """

    def __init__(self, workers: int = 2, *, nice: int = WORKER_NICE) -> None:
        self.workers = workers
        self.nice = nice
        self._pool: Any = None
        self._generation = 0
        self._lock = threading.Lock()
        self._waiting: dict[int, set[Callable[[str, Any], None]]] = {}
        """The hand-overs of work sent to each generation of workers and not answered yet."""

    def _current(self) -> tuple[Any, int]:
        with self._lock:
            if self._pool is None:
                context = multiprocessing.get_context("spawn")
                self._pool = context.Pool(self.workers, initializer=_lower_priority, initargs=(self.nice,))
            return self._pool, self._generation

    def _replace(self, generation: int) -> None:
        with self._lock:
            if generation != self._generation or self._pool is None:
                return  # another caller replaced it already
            pool, self._pool = self._pool, None
            self._generation += 1
            lost = self._waiting.pop(generation, set())
        pool.terminate()
        for hand_over in lost:  # terminated workers never answer: their callers send again
            hand_over("lost", None)

    async def run(self, fn: Callable[[A], T], arg: A, *, timeout_s: float) -> T:
        """``fn(arg)`` in a worker process; ``TimeoutError`` after ``timeout_s`` seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        for _ in range(2):
            answered: asyncio.Future[tuple[str, Any]] = loop.create_future()
            hand_over = _handing_to(loop, answered)
            pool, generation = self._current()
            with self._lock:
                self._waiting.setdefault(generation, set()).add(hand_over)
            try:
                pool.apply_async(
                    fn,
                    (arg,),
                    callback=lambda value, h=hand_over: h("done", value),
                    error_callback=lambda error, h=hand_over: h("raised", error),
                )
                try:
                    state, value = await asyncio.wait_for(answered, timeout=max(0.0, deadline - loop.time()))
                except TimeoutError:
                    self._replace(generation)
                    raise TimeoutError(f"the work took longer than {timeout_s:g} s") from None
            finally:
                with self._lock:
                    self._waiting.get(generation, set()).discard(hand_over)
            if state == "done":
                out: T = value
                return out
            if state == "raised":
                raise value
        raise TimeoutError("the worker processes were replaced twice while this work waited")

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.terminate()


def _handing_to(
    loop: asyncio.AbstractEventLoop, answered: asyncio.Future[tuple[str, Any]]
) -> Callable[[str, Any], None]:
    """A function any thread may call once with ``(state, value)`` to answer ``answered`` on ``loop``;
    later calls, and calls after the loop closed (its caller gone), do nothing."""

    def settle(state: str, value: Any) -> None:
        if not answered.done():
            answered.set_result((state, value))

    def hand_over(state: str, value: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
            loop.call_soon_threadsafe(settle, state, value)

    return hand_over


PROCESSES: Final = ProcessWork()
"""The process pool CPU-heavy service steps share (started when first used, stopped at exit)."""
atexit.register(PROCESSES.close)


_Given = tuple[asyncio.AbstractEventLoop, Coroutine[Any, Any, Any]]
"""A coroutine given to :meth:`Lanes.run`, with the loop it was given to."""


class Lanes:
    """``count`` event loops on daemon threads, started when first used."""

    def __init__(self, count: int = DEFAULT_LANES) -> None:
        if count < 1:
            raise ValueError("a runner needs at least one lane")
        self.count = count
        self._loops: dict[int, tuple[asyncio.AbstractEventLoop, threading.Thread]] = {}
        self._stopping = threading.Event()
        """Set before the lanes' loops are asked to stop (read by :func:`run_until_stopped`)."""
        self._assigned: dict[str, int] = {}
        self._turn = 0
        self._lock = threading.Lock()
        self._unrun: dict[concurrent.futures.Future[Any], _Given] = {}
        """Work given to :meth:`run` whose future is not done yet, with its loop."""

    def loop_for(self, key: str) -> asyncio.AbstractEventLoop:
        """The loop of ``key``'s lane (a principal id): the next lane in turn for a key not seen
        recently, so up to ``count`` principals never share one."""
        with self._lock:
            index = self._assigned.get(key)
            if index is None:
                if len(self._assigned) >= _MAX_ASSIGNED:
                    self._assigned.clear()  # forget old principals; their lanes stay as they are
                index = self._assigned[key] = self._turn % self.count
                self._turn += 1
            found = self._loops.get(index)
            if found is None:
                loop = new_event_loop()
                loop.set_task_factory(watched_task)  # a tool's SystemExit ends its run typed
                # a tool that lets SystemExit out of its task does not end the lane (loop.py)
                thread = threading.Thread(
                    target=run_until_stopped,
                    args=(loop, self._stopping),
                    name=f"actionspace-runs-{index}",
                    daemon=True,
                )
                thread.start()
                found = self._loops[index] = (loop, thread)
        return found[0]

    def run(
        self, loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T]
    ) -> concurrent.futures.Future[T]:
        """Run ``coro`` on ``loop`` (a lane's); its future. A coroutine whose lane stopped before it
        ran is closed and its future cancelled (at once when the loop is closed already, else by
        :meth:`stop`): never left to the garbage collector unawaited, nor its future pending."""
        with self._lock:
            if loop.is_closed():
                coro.close()
                refused: concurrent.futures.Future[T] = concurrent.futures.Future()
                refused.cancel()
                return refused
            future = asyncio.run_coroutine_threadsafe(coro, loop)
            self._unrun[future] = (loop, coro)
        future.add_done_callback(self._ran)
        return future

    def _ran(self, future: concurrent.futures.Future[Any]) -> None:
        with self._lock:
            self._unrun.pop(future, None)

    def _close_unrun(self) -> None:
        """Close the coroutines given to :meth:`run` that a closed loop never began, and cancel
        their futures (their lane stopped first: nothing will ever run them)."""
        with self._lock:
            unrun = [(f, coro) for f, (loop, coro) in self._unrun.items() if loop.is_closed()]
        for future, coro in unrun:
            if inspect.getcoroutinestate(coro) != inspect.CORO_CREATED or future.done():
                continue
            coro.close()
            # ends as cancelled; cancel() itself would ask the closed loop to cancel a task it made
            if future.set_running_or_notify_cancel():
                future.set_exception(concurrent.futures.CancelledError())

    def loops(self) -> list[asyncio.AbstractEventLoop]:
        with self._lock:
            return [loop for loop, _ in self._loops.values()]

    def stop(self, *, timeout: float) -> None:
        """Stop every lane's loop and join its thread (waits at most ``timeout`` s per lane); what
        a stopped lane never began is closed (see :meth:`run`)."""
        with self._lock:
            lanes = list(self._loops.values())
        self._stopping.set()
        for loop, _ in lanes:
            loop.call_soon_threadsafe(loop.stop)
        for loop, thread in lanes:
            thread.join(timeout=timeout)
            if not thread.is_alive():
                loop.close()
        self._close_unrun()
