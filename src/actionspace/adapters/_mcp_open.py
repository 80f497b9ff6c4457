"""How the MCP client adapter opens a session: the bounded transports (``_mcp_stdio``, ``_mcp_http``)
under the SDK's ``Client``, never the SDK's own.

Over stdio, the SDK's ``stdio_client`` cannot tell a request it never handed to the server from one the
server may have read. Over HTTP, the SDK's ``streamable_http_client`` lets a connection that could not
be made end the whole session, so a write to a server gone since the session opened, never sent, ends
``unknown_commit``; it reads an answer whole however large, and an abandoned one while it lasts. So
when the installed SDK lacks what the bounded HTTP transport builds on, opening an HTTP server fails
with :class:`BoundedTransportMissing` (a stdio server is not concerned), instead of falling back to it.
The HTTP client is made here on httpx2's public API (:func:`http_client`), not by the SDK's private
``mcp.shared._httpx_utils``, which a release may drop."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AsyncExitStack
from typing import Any, Final

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.session import MessageHandlerFnT

from actionspace.adapters._mcp_connection import OpenClient
from actionspace.adapters._mcp_stdio import bounded_stdio_client

try:  # the bounded HTTP transport subclasses the SDK's transport
    from actionspace.adapters._mcp_http import bounded_http_client
except ImportError as missing:  # depends on the installed SDK
    _MISSING: ImportError | None = missing
else:
    _MISSING = None

__all__ = [
    "CONNECT_S",
    "STREAM_READ_S",
    "BoundedTransportMissing",
    "http_client",
    "http_opener",
    "stdio_opener",
]

CONNECT_S: Final = 30.0
"""Longest wait to connect, write a request or get a pooled connection, in seconds (the SDK's default)."""
STREAM_READ_S: Final = 300.0
"""Longest wait between two reads of a response, in seconds: a server may hold a notification stream
open that long in silence (the SDK's default). A request's answer has its own, shorter, deadline."""


class BoundedTransportMissing(RuntimeError):
    """The installed MCP SDK lacks what the bounded HTTP transport builds on: no HTTP session is opened."""


def http_client(headers: Mapping[str, str] | None) -> httpx2.AsyncClient:
    """The HTTP client of one session: its timeouts, the configured ``headers``, and no redirect followed
    by httpx2 itself (``_mcp_redirects`` decides which one is)."""
    timeout = httpx2.Timeout(CONNECT_S, read=STREAM_READ_S)
    return httpx2.AsyncClient(headers=dict(headers or {}), timeout=timeout, follow_redirects=False)


def stdio_opener(
    command: str, args: tuple[str, ...], env: Mapping[str, str] | None, cwd: str | None, mode: Any
) -> OpenClient:
    """Opens a session with a server started as ``command`` (its process ends with the session)."""

    async def open_client(stack: AsyncExitStack, handler: MessageHandlerFnT) -> Client:
        params = StdioServerParameters(
            command=command, args=list(args), env=dict(env) if env is not None else None, cwd=cwd
        )
        client = Client(bounded_stdio_client(params), mode=mode, message_handler=handler, cache=None)
        return await stack.enter_async_context(client)

    return open_client


def http_opener(url: str, headers: Mapping[str, str] | None, mode: Any, answer_s: float) -> OpenClient:
    """Opens a session over streamable HTTP; ``answer_s``: longest an answer is read, in seconds."""

    async def open_client(stack: AsyncExitStack, handler: MessageHandlerFnT) -> Client:
        if _MISSING is not None:
            said = f"the installed MCP SDK lacks what the bounded HTTP transport needs: {_MISSING}"
            raise BoundedTransportMissing(said[:500]) from _MISSING
        http = await stack.enter_async_context(http_client(headers))
        transport = bounded_http_client(url, http_client=http, answer_timeout_s=answer_s)
        client = Client(transport, mode=mode, message_handler=handler, cache=None)
        return await stack.enter_async_context(client)

    return open_client
