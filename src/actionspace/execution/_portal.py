"""The portal: a private event loop on a daemon thread, on which sync callers' async tools run.

A tool written ``async def`` needs a running loop; a caller on a plain thread (``rt.call``) has
none, so the executor hands the coroutine to this loop and waits for its result. The loop starts
with the first such call and stops when its runtime closes, once no call waits on it: a process
that makes runtimes one after another keeps no thread or descriptor per runtime.

A ``KeyboardInterrupt`` or ``SystemExit`` a tool raises (a library calling ``sys.exit()``) goes on
up to the tool's caller, as if the tool ran in the caller's thread. asyncio ends the task with it
and also lets it out of ``run_forever``, which would end this thread and close the loop every later
call of the runtime needs: the thread runs the loop again
(:func:`~actionspace.execution.loop.run_until_stopped`), and the task hands the exception to the
calling thread like any other.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
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
        (up to ``CANCEL_WAIT_S``) before the interruption propagates."""
        with self._lock:
            loop = self._loop
            if loop is None:
                loop = self._loop = new_event_loop()  # its tools' waits end on time (execution/loop.py)
                stopping = self._stopping = threading.Event()
                self._thread = threading.Thread(
                    target=_serve, args=(loop, stopping), name="actionspace-portal", daemon=True
                )
                self._thread.start()
            self._running += 1
        ended = threading.Event()
        future = asyncio.run_coroutine_threadsafe(_until_ended(coro, ended), loop)
        try:
            return future.result()
        except BaseException:
            if not future.done():
                future.cancel()  # cancels its task on the loop
                ended.wait(CANCEL_WAIT_S)
            raise
        finally:
            with self._lock:
                self._running -= 1
                if self._closed and not self._running:
                    self._stop()

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


async def _until_ended(coro: Coroutine[Any, Any, Any], ended: threading.Event) -> Any:
    try:
        return await coro
    finally:
        ended.set()


CANCEL_WAIT_S = 5.0
"""How long an interrupted :meth:`Portal.run` waits for the coroutine it cancelled to end (seconds)."""
