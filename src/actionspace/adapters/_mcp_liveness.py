"""Whether an MCP server that answers nothing is still there: asked, and the calls meanwhile held back
(a mixin of ``_mcp_connection.Connection``).

A server can accept connections and answer nothing (its process stopped, a proxy in front of a dead
one), and a stdio server can stop answering, or reading its input, while its process lives on. After
``Reconnect.unanswered`` requests in a row ended unanswered with nothing heard, when the stream of its
own messages failed, when a stdio server did not take a call's request (``_mcp_pipe``), or after
``Reconnect.idle_probe_s`` of silence, it is asked for its tools (a request every protocol revision
serves, that changes nothing), within :data:`PROBE_TIMEOUT_S`: unanswered, the session is taken for ended
and opened again (``_mcp_reconnect``; a stdio server's process is stopped and started again).

While it is asked, a call is not sent into the silence: it waits for the verdict, at most its
``wait_s`` (half its timeout, so that a wait never turns into the call's own timeout, which would
make a write ``unknown_commit``). Answered, the call is sent; taken for ended, or still being asked
once the wait is over, it is refused unsent (``Reconnecting``: ``transient``, with ``retry_after``),
as calls are while no session is up. Before, each call made during the check was sent and timed out,
a write ``unknown_commit``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Final

from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

from actionspace.adapters._mcp_errors import UNDELIVERED, UNSENT, Reconnecting, ServerUnavailable
from actionspace.adapters._mcp_reconnect import RETRY_MARGIN_S, Reconnect

__all__ = ["NO_ANSWER", "PROBE_TIMEOUT_S", "Liveness"]

_log = logging.getLogger("actionspace.mcp")

PROBE_TIMEOUT_S: Final = 5.0
"""Longest wait for the request that tells a live session from one that ended."""
NO_ANSWER: Final = frozenset({CONNECTION_CLOSED, UNDELIVERED, UNSENT, REQUEST_TIMEOUT})
"""The client's own codes for a request the server did not answer."""


class Liveness:
    """How a connection notices a server that answers nothing, and holds calls back while it asks."""

    name: str
    probed: bool
    reconnect: Reconnect | None
    _client: Client | None
    _abandoned: set[asyncio.Future[Any]]
    _heard: int
    _heard_at: float
    _silent: int
    _asking: bool
    _verdict: asyncio.Event
    """Set when no probe is under way (its verdict is in)."""
    _verdict_due: float
    """When (``time.monotonic()``) the probe under way gives its verdict at the latest."""
    _retry_at: float | None
    """While no session is up and one will be tried: when the next attempt is (the connection's)."""

    if TYPE_CHECKING:  # the connection's and the listings' own

        def _spawn(self, coro: Coroutine[Any, Any, None]) -> None: ...

        def _gone(self, client: Client | None, why: BaseException | None = None) -> None: ...

    async def _verdict_of(self, client: Client, wait_s: float) -> None:
        """Before ``client`` is sent a call: while it is being asked whether it is there, wait for the
        verdict, at most ``wait_s``; raise ``Reconnecting`` (nothing sent) when there is none yet."""
        if not self._asking or self._client is not client:
            return
        left = self._verdict_due - time.monotonic()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._verdict.wait(), max(0.0, min(wait_s, left)))
        if self._asking and self._client is client:
            wait = round(max(0.0, self._verdict_due - time.monotonic()) + RETRY_MARGIN_S, 3)
            said = f"MCP server {self.name!r} answers nothing and is being asked whether it is there"
            raise Reconnecting(f"{said}; nothing was sent", wait)

    def _unread(self, client: Client, unsent: MCPError) -> ServerUnavailable:
        """A request to ``client`` was not sent: the server did not read its input (``_mcp_pipe``). It is
        asked whether it is there (unanswered, its session ends and is opened again); the refusal says
        when to try again (``Reconnecting``), or, with nothing to wait for, that nothing was sent."""
        self._ask(client, "it did not read its input")
        said = f"MCP server {self.name!r} does not read its input; nothing was sent ({unsent.message[:200]})"
        due = self._verdict_due if self._asking else self._retry_at  # the session may be gone already
        if due is None:  # no reconnect policy: nothing will change on its own
            return ServerUnavailable(said)
        return Reconnecting(said, round(max(0.0, due - time.monotonic()) + RETRY_MARGIN_S, 3))

    async def _check_alive(self, client: Client, lost: MCPError) -> None:
        """After a request's connection closed: when the whole session is gone (a stdio server's
        process ended), later requests are refused as not connected instead of being "sent"."""
        try:
            # a request every protocol revision serves, and that changes nothing
            await asyncio.wait_for(client.list_tools(cache_mode="refresh"), PROBE_TIMEOUT_S)
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                self._gone(client, lost)
        except Exception:  # slow or odd, but not known to be gone: keep the session
            _log.debug("MCP server %s: probe after a closed request failed", self.name, exc_info=True)

    def _heard_from(self) -> None:
        self._heard += 1
        self._heard_at = time.monotonic()
        self._silent = 0

    def _unanswered(self, client: Client, heard: int) -> None:
        """A request of ``client`` ended unanswered; ``heard``: :attr:`_heard` when it was sent. After
        ``reconnect.unanswered`` such in a row, with nothing heard meanwhile, the server is asked."""
        policy = self.reconnect
        if policy is None or not self.probed or self._heard != heard or self._client is not client:
            return
        self._silent += 1
        if self._silent >= policy.unanswered:
            self._silent = 0
            self._ask(client, f"{policy.unanswered} requests in a row went unanswered")

    def _stream_dropped(self) -> None:
        client = self._client
        if client is not None:
            self._ask(client, "the stream of its messages failed")

    async def _idle(self, client: Client, every_s: float) -> None:
        """Ask the server whether it is there after each ``every_s`` seconds in which nothing came from it."""
        while self._client is client:
            idle = time.monotonic() - self._heard_at
            if idle >= every_s:
                self._ask(client, f"nothing came from it for {every_s:g}s")
                idle = 0.0
            await asyncio.sleep(every_s - idle)

    def _ask(self, client: Client, why: str) -> None:
        if self.reconnect is not None and not self._asking and self._client is client:
            self._asking = True  # from here on, calls wait for the verdict (:meth:`_verdict_of`)
            self._verdict_due = time.monotonic() + PROBE_TIMEOUT_S
            self._verdict.clear()
            self._spawn(self._probe(client, why))

    async def _probe(self, client: Client, why: str) -> None:
        """Ask the server for its tools: unanswered within the bound, or on a connection that is gone, the
        session is taken for ended. An unanswered listing is cancelled but not waited for: the SDK sends
        its cancellation first, which may wait for the server that is not answering."""
        try:
            await self._asked(client, why)
        finally:
            self._asking = False
            self._verdict.set()

    async def _asked(self, client: Client, why: str) -> None:
        heard = self._heard
        listing = asyncio.ensure_future(client.list_tools(cache_mode="refresh"))
        try:
            await asyncio.wait({listing}, timeout=PROBE_TIMEOUT_S)
        finally:
            if not listing.done():
                listing.cancel()
                self._abandoned.add(listing)
                listing.add_done_callback(self._abandoned.discard)
        if not listing.done():
            if self._heard == heard:
                said = f"{why}, and a listing got no answer in {PROBE_TIMEOUT_S:g}s"
                self._gone(client, TimeoutError(said))
            return
        failure = None if listing.cancelled() else listing.exception()
        if isinstance(failure, MCPError) and failure.code in NO_ANSWER:
            self._gone(client, failure)
        elif failure is None or isinstance(failure, MCPError):  # answered, if only with an error
            self._heard_from()
        else:  # odd, but not known to be gone: keep the session
            _log.debug("MCP server %s: probe failed: %r", self.name, failure)
