"""How a session with an MCP server that ended on its own is opened again: bounded, with backoff.

A stdio server whose process ended is started again; an HTTP server is connected to again in a new
session (a new handshake: the old session id is not sent again). Each attempt must connect and list
the tools within the server's ``connect_timeout_s``; the listing is handed to the toolset like any
other, so a tool that came back changed is a new version and the old one is retired (a call made for
the old one is refused unsent, ``version_mismatch``). Nothing in flight when the session ended is sent
again: its call already ended (a write ``unknown_commit``). Calls made while no session is up are
refused unsent, ``transient``, with ``retry_after`` set to when the next attempt is due.

Attempts are bounded: after :attr:`Reconnect.attempts` that failed in a row (an attempt whose session
ended again within :data:`STABLE_S` counts as failed: a server that dies as soon as it is up is not
restarted for ever), the connection stays down and calls are refused as before, until the toolset is
registered again. The transports say when a session is gone (:data:`SESSION_LOST`): a stdio server's
output ended, or an HTTP server answered ``404`` to the session id (it restarted and forgot it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Final

from actionspace.adapters._mcp_errors import Reconnecting, ServerUnavailable
from actionspace.errors import ConfigurationError

__all__ = ["DEFAULT_RECONNECT", "SESSION_LOST", "STABLE_S", "Reconnect", "either", "refusal", "reopen"]

_log = logging.getLogger("actionspace.mcp")

STABLE_S: Final = 60.0
"""A reconnected session that stayed up at least this long (seconds) starts the count of attempts afresh."""
RETRY_MARGIN_S: Final = 1.0
"""Added to the wait for the next attempt in a refused call's ``retry_after`` (seconds): about what an
attempt takes to start a local server and list its tools."""
SESSION_LOST: ContextVar[Callable[[], None] | None] = ContextVar("SESSION_LOST", default=None)
"""What a transport calls when its session is gone (set while a session is opened, read by the transports
as they start: every task of theirs runs on the connection's loop)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Reconnect:
    """How a session with an MCP server that ended on its own is opened again (``reconnect=None``: never)."""

    attempts: int = 5
    """Most attempts in a row that may fail before the connection stays down. Default 5."""
    initial_backoff_s: float = 0.5
    """Wait before the second attempt, in seconds (the first is made at once). Default 0.5."""
    backoff_multiplier: float = 2.0
    """Growth of the wait per failed attempt. Default 2."""
    max_backoff_s: float = 30.0
    """Longest wait between two attempts, in seconds. Default 30."""

    def __post_init__(self) -> None:
        if self.attempts.__class__ is not int or self.attempts < 1:
            raise ConfigurationError(f"Reconnect.attempts must be an int >= 1, got {self.attempts!r:.100}")
        for name in ("initial_backoff_s", "backoff_multiplier", "max_backoff_s"):
            value = getattr(self, name)
            number = isinstance(value, int | float) and not isinstance(value, bool)
            if not number or not math.isfinite(value) or value < (1 if name == "backoff_multiplier" else 0):
                raise ConfigurationError(f"Reconnect.{name} must be a finite number >= 0 (a multiplier >= 1)")

    def delay(self, failed: int) -> float:
        """Seconds to wait before the next attempt, after ``failed`` attempts that failed in a row."""
        if failed <= 0:
            return 0.0
        return min(self.max_backoff_s, self.initial_backoff_s * self.backoff_multiplier ** (failed - 1))


async def reopen(
    policy: Reconnect,
    stop: asyncio.Event,
    session: Callable[[], Awaitable[bool]],
    due: Callable[[float], None],
    name: str,
) -> None:
    """Open the session again (``session()``: whether it opened, once it ended) until ``stop`` is set or
    ``policy.attempts`` failed in a row; ``due`` is told when each attempt is due."""
    failed = 0
    while not stop.is_set():
        if failed >= policy.attempts:
            _log.error("MCP server %s: not reconnected after %d attempts in a row", name, failed)
            return
        delay = policy.delay(failed)
        due(time.monotonic() + delay)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), delay)
        if stop.is_set():
            return
        began = time.monotonic()
        up = await session()
        failed = 0 if up and time.monotonic() - began >= STABLE_S else failed + 1


def refusal(name: str, retry_at: float | None) -> ServerUnavailable:
    """Why a call finds no session: one is being opened again (try after ``retry_after``), or none is."""
    if retry_at is None:
        return ServerUnavailable(f"MCP server {name!r} is not connected")
    wait = round(max(0.0, retry_at - time.monotonic()) + RETRY_MARGIN_S, 3)
    return Reconnecting(f"MCP server {name!r} is reconnecting; nothing was sent", wait)


async def either(*events: asyncio.Event) -> None:
    """Wait until one of ``events`` is set."""
    waits = {asyncio.ensure_future(event.wait()) for event in events}
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()


DEFAULT_RECONNECT: Final = Reconnect()
"""What a server reconnects under unless configured otherwise."""
