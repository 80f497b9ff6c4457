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
restarted for ever), the connection rests and calls are refused unsent, without ``retry_after``; the
first call made :attr:`Reconnect.cooldown_s` after that starts a new round (so a dead server is tried at
most one round per cool-down, and only while it is called). The transports say when a session is gone
(:data:`SESSION_LOST`): a stdio server's output ended, or an HTTP server answered ``404`` to the session
id (it restarted and forgot it), or could not be connected to. A session is also asked whether it is
still there (a listing, bounded), and taken for ended when that goes unanswered: when the stream of the
server's own messages failed (:data:`STREAM_DROPPED`), after :attr:`Reconnect.unanswered` requests in a
row ended unanswered while nothing was heard from the server, and, when set, after
:attr:`Reconnect.idle_probe_s` without a word from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Final

from actionspace.adapters._mcp_errors import Reconnecting, ServerUnavailable
from actionspace.adapters._mcp_reconnect_policy import DEFAULT_RECONNECT, Reconnect, Waking, either

__all__ = [
    "DEFAULT_RECONNECT",
    "SESSION_LOST",
    "STABLE_S",
    "STREAM_DROPPED",
    "Reconnect",
    "Waking",
    "either",
    "refusal",
    "reopen",
]

_log = logging.getLogger("actionspace.mcp")

STABLE_S: Final = 60.0
"""A reconnected session that stayed up at least this long (seconds) starts the count of attempts afresh."""
RETRY_MARGIN_S: Final = 1.0
"""Added to the wait for the next attempt in a refused call's ``retry_after`` (seconds): about what an
attempt takes to start a local server and list its tools."""
SESSION_LOST: ContextVar[Callable[[], None] | None] = ContextVar("SESSION_LOST", default=None)
"""What a transport calls when its session is gone (set while a session is opened, read by the transports
as they start: every task of theirs runs on the connection's loop)."""
STREAM_DROPPED: ContextVar[Callable[[], None] | None] = ContextVar("STREAM_DROPPED", default=None)
"""What a transport calls when the stream that brings the server's own messages failed: the session is
then asked whether it is still there (set and read as :data:`SESSION_LOST`)."""


async def reopen(
    policy: Reconnect,
    stop: asyncio.Event,
    session: Callable[[], Awaitable[bool]],
    due: Callable[[float | None], None],
    name: str,
    waking: Waking,
) -> None:
    """Open the session again (``session()``: whether it opened, once it ended) until ``stop`` is set;
    ``due`` is told when each attempt is due. Once ``policy.attempts`` failed in a row, the next round
    waits for a call made after ``policy.cooldown_s`` (``waking``)."""
    failed = 0
    while not stop.is_set():
        if failed >= policy.attempts:
            _log.error(
                "MCP server %s: not reconnected after %d attempts in a row; a call after %gs tries again",
                name,
                failed,
                policy.cooldown_s,
            )
            due(None)
            await waking.rest(policy.cooldown_s, stop)
            failed = 0
            continue
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
