"""How the MCP client adapter opens a session: the bounded transports (``_mcp_stdio``, ``_mcp_http``)
under the SDK's ``Client``. Over stdio always the bounded one (it needs no private name of the SDK's:
``_mcp_process``), since the SDK's ``stdio_client`` cannot tell a request it never handed to the server
from one the server may have read; over HTTP the SDK's own where the installed SDK lacks what it uses."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AsyncExitStack
from typing import Any

from mcp import Client, StdioServerParameters
from mcp.client.session import MessageHandlerFnT
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from actionspace.adapters._mcp_connection import OpenClient
from actionspace.adapters._mcp_stdio import bounded_stdio_client

try:  # the bounded HTTP transport subclasses the SDK's and uses its private stream helpers
    from actionspace.adapters._mcp_http import bounded_http_client
except ImportError:  # pragma: no cover - depends on the installed SDK
    bounded_http_client = None  # type: ignore[assignment]

__all__ = ["http_opener", "stdio_opener"]


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
        http = await stack.enter_async_context(
            create_mcp_http_client(headers=dict(headers) if headers else None)
        )
        transport: Any
        if bounded_http_client is None:  # pragma: no cover - depends on the installed SDK
            transport = streamable_http_client(url, http_client=http)
        else:
            transport = bounded_http_client(url, http_client=http, answer_timeout_s=answer_s)
        client = Client(transport, mode=mode, message_handler=handler, cache=None)
        return await stack.enter_async_context(client)

    return open_client
