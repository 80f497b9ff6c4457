"""The portal: a private event loop on a daemon thread, on which sync callers' async tools run.

A tool written ``async def`` needs a running loop; a caller on a plain thread (``rt.call``) has
none, so the executor hands the coroutine to this loop and waits for its result. The loop starts
with the first such call and stops when its runtime closes, once no call waits on it: a process
that makes runtimes one after another keeps no thread or descriptor per runtime.

A ``KeyboardInterrupt`` or ``SystemExit`` a tool raises (a library calling ``sys.exit()``) goes on
up to the tool's caller, as if the tool ran in the caller's thread: the task running the call hands
it over like any other exception. One raised in a task the tool began of its own is let out of
``run_forever`` by asyncio, which would end this thread and close the loop every later call of the
runtime needs: the thread runs the loop again (:func:`~actionspace.execution.loop.run_until_stopped`).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any

from actionspace.execution.loop import new_event_loop, run_until_stopped

__all__ = ["CANCEL_WAIT_S", "Portal"]


class Portal:
    """A private event loop on a daemon thread, for running async tools from sync code."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopping: threading.Event | None = None
        """Set by :meth:`_stop` before it asks ``_loop`` to stop (read by :func:`_run_until_stopped`)."""
        self._lock = threading.Lock()
        self._running = 0
        """Calls waiting on the loop now: :meth:`close` stops it once none is left."""
        self._closed = False

    def here(self) -> bool:
        """Whether the calling thread is the portal's (whose loop :meth:`run` would wait on)."""
        return self._thread is not None and threading.current_thread() is self._thread

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """``coro``'s result, run on the portal loop; if the wait is interrupted (a
        ``KeyboardInterrupt`` in the calling thread), ``coro`` is cancelled and its end awaited
        (up to ``CANCEL_WAIT_S``) before the interruption propagates. A signal handler runs
        between any two bytecodes, so the interruption may also land while ``coro`` is handed to
        the loop: everything from counting the call to waiting for it is inside one ``try``, and
        the cancel is queued behind the handover, whichever step the interruption cut."""
        held = _Held(coro)
        loop: asyncio.AbstractEventLoop | None = None
        counted = False
        try:
            with self._lock:
                self._running += 1
                counted = True
                loop = self._started()
            loop.call_soon_threadsafe(held.start, loop)
            return held.future.result()
        except BaseException:
            if loop is None:
                coro.close()
            else:
                held.withdraw(loop)
            raise
        finally:
            with self._lock:
                self._running -= counted
                if self._closed and not self._running:
                    self._stop()

    def _started(self) -> asyncio.AbstractEventLoop:
        """Hold ``_lock``. The loop, started with its thread on first use."""
        loop = self._loop
        if loop is None:
            loop = self._loop = new_event_loop()  # its tools' waits end on time (execution/loop.py)
            stopping = self._stopping = threading.Event()
            self._thread = threading.Thread(
                target=_serve, args=(loop, stopping), name="actionspace-portal", daemon=True
            )
            self._thread.start()
        return loop

    def close(self) -> None:
        """Stop the loop and end its thread once no call waits on it (at once if none does); a
        call made after this starts a loop again and stops it when it ends."""
        with self._lock:
            self._closed = True
            if self._running:
                return  # the last call to end stops it
            thread = self._stop()
        if thread is not None and thread is not threading.current_thread():
            thread.join(CANCEL_WAIT_S)  # its loop closed: the descriptors are let go on return

    def _stop(self) -> threading.Thread | None:
        """Hold ``_lock``. Ask the loop to stop; its thread closes it (:func:`_serve`)."""
        loop, thread, stopping = self._loop, self._thread, self._stopping
        self._loop = self._thread = self._stopping = None
        if loop is not None and stopping is not None:
            stopping.set()  # before the stop is queued: the loop thread sees one or the other
            loop.call_soon_threadsafe(loop.stop)
        return thread


def _serve(loop: asyncio.AbstractEventLoop, stopping: threading.Event) -> None:
    """The portal thread: run ``loop`` until stopped, then cancel what a tool left on it and close it."""
    try:
        _run_until_stopped(loop, stopping)
    finally:
        left = asyncio.all_tasks(loop)
        for task in left:
            task.cancel()
        if left:
            _wait_through(loop, asyncio.wait(left, timeout=CANCEL_WAIT_S))
        _wait_through(loop, loop.shutdown_asyncgens())
        loop.close()


_run_until_stopped = run_until_stopped
"""The portal thread's loop, run on through what a tool lets out of it (:func:`run_until_stopped`)."""


def _wait_through(loop: asyncio.AbstractEventLoop, waited: Coroutine[Any, Any, Any]) -> None:
    """Run ``waited`` to its end on ``loop`` while the thread closes it; a ``KeyboardInterrupt`` or
    ``SystemExit`` a cancelled tool raises on the way does not keep the loop from closing."""
    task = loop.create_task(waited)
    while not task.done():
        try:
            loop.run_until_complete(task)
        except (KeyboardInterrupt, SystemExit):
            continue


class _Held:
    """One coroutine handed to the portal loop and the caller's view of it. :meth:`start` and
    :meth:`_cancel` run on the loop in the order they were queued, so a cancel queued after the
    handover finds the task begun, and one queued when the handover never was finds none."""

    __slots__ = ("began", "coro", "ended", "future", "task")

    def __init__(self, coro: Coroutine[Any, Any, Any]) -> None:
        self.coro = coro
        self.future: Future[Any] = Future()
        self.ended = threading.Event()
        """Set once ``coro`` ended, or once it is known never to begin."""
        self.task: asyncio.Task[None] | None = None
        self.began = False
        """``task`` took its first step (a cancel thrown in before that never enters its body)."""

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """On the loop: begin ``coro`` in a task of its own."""
        self.task = loop.create_task(self._body())

    async def _body(self) -> None:
        self.began = True
        try:
            result = await self.coro
        except asyncio.CancelledError:
            self.future.cancel()
            raise
        except BaseException as exc:  # a tool's KeyboardInterrupt or SystemExit goes to its caller
            self.future.set_exception(exc)
        else:
            self.future.set_result(result)
        finally:
            self.coro.close()  # cancelled before its first step: it never ran
            self.ended.set()

    def withdraw(self, loop: asyncio.AbstractEventLoop) -> None:
        """From the calling thread, interrupted: cancel ``coro`` and wait (a while) for its end."""
        if self.future.done():
            return
        try:
            loop.call_soon_threadsafe(self._cancel)
        except RuntimeError:  # the loop is closed: nothing runs on it any more
            self.coro.close()
            return
        self.ended.wait(CANCEL_WAIT_S)

    def _cancel(self) -> None:
        task = self.task
        if task is not None:
            task.cancel()
            if self.began:
                return  # its body sees the cancel and ends
        # never handed over, or cancelled before its first step: ``coro`` never begins
        self.coro.close()
        self.future.cancel()
        self.ended.set()


CANCEL_WAIT_S = 5.0
"""How long an interrupted :meth:`Portal.run` waits for the coroutine it cancelled to end (seconds)."""
