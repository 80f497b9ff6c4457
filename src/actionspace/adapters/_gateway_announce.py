"""Tool list changes, heard on any thread, announced on the serving loop in coalesced rounds.

An upstream server's change arrives on that upstream connection's thread. Waiting there for every
client to be told would let one client that never reads stall the upstream connection (and every
call through it), so :meth:`Announcer.changed` only schedules a round and returns. At most one
round runs at a time; changes heard while one runs are covered by exactly one more round, so a
storm of changes costs two rounds, and no change is left unannounced. A round tells the sessions
concurrently, each within its own deadline.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.lowlevel
from anyio.lowlevel import EventLoopToken

__all__ = ["Announcer"]

_log = logging.getLogger("actionspace.gateway")


class Announcer:
    """Runs ``announce()`` on the serving loop after changes, one round at a time."""

    def __init__(self, announce: Callable[[], Awaitable[int]]) -> None:
        self._announce = announce
        self._lock = threading.Lock()
        self._token: EventLoopToken | None = None
        self._wake: anyio.Event | None = None
        self._pending = False
        """A wake-up is scheduled and its round has not begun: later changes ride on it."""
        self.rounds = 0
        """How many rounds ran (each told every live session once)."""

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        """Announce on the current loop while the block runs; a round under way ends with it."""
        async with anyio.create_task_group() as group:
            self._wake = anyio.Event()
            with self._lock:
                self._token, self._pending = anyio.lowlevel.current_token(), False
            group.start_soon(self._watch)
            try:
                yield
            finally:
                with self._lock:
                    self._token = None
                self._wake = None
                group.cancel_scope.cancel()

    def changed(self) -> None:
        """Note a change (from any thread, never waits): a round will tell every session."""
        with self._lock:
            token = self._token
            if token is None or self._pending:
                return  # not serving (nobody to tell), or a round yet to begin covers this change
            self._pending = True
        try:
            _call_soon(token, self._wake_up)
        except RuntimeError:  # the serving loop is gone: nobody to tell
            with self._lock:
                self._pending = False
            _log.debug("gateway: could not announce a tool list change", exc_info=True)

    def _wake_up(self) -> None:
        """On the serving loop."""
        if self._wake is not None:
            self._wake.set()

    async def _watch(self) -> None:
        while True:
            wake = self._wake
            if wake is None:
                return
            await wake.wait()
            self._wake = anyio.Event()  # on this loop, before a change may schedule the next wake-up
            with self._lock:
                self._pending = False
            try:
                await self._announce()
            except Exception:
                _log.warning("gateway: announcing a tool list change failed", exc_info=True)
            self.rounds += 1


def _call_soon(token: EventLoopToken, fn: Callable[[], None]) -> None:
    """Schedule ``fn`` on the loop of ``token`` from any thread without waiting for it."""
    native: Any = token.native_token
    schedule = getattr(native, "call_soon_threadsafe", None) or native.run_sync_soon  # asyncio | trio
    schedule(fn)
