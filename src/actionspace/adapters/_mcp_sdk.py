"""How the MCP client adapter drives its SDK's client: a bounded listing, a resend it refuses, a refusal it
tells apart.

Kept apart from ``_mcp_connection`` so that the connection reads as the session's lifecycle.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import mcp_types as types
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import HEADER_MISMATCH

__all__ = ["list_tools", "logged_failure", "refused_here", "without_resend"]

_log = logging.getLogger("actionspace.mcp")

_MAX_PAGES = 100
"""Most ``tools/list`` pages read in one listing: a server whose cursor never ends cannot hang us."""
_DRIVER = "mcp.client._input_required"
"""The SDK module that answers ``input_required`` results: where it refuses an input request."""


def logged_failure(name: str) -> Callable[[asyncio.Future[Any]], None]:
    """A done callback that logs why a listing no call waits for any more failed."""

    def log(task: asyncio.Future[Any]) -> None:
        if not task.cancelled() and task.exception() is not None:
            _log.warning("MCP server %s: listing the tools again failed: %r", name, task.exception())

    return log


def without_resend(client: Client) -> None:
    """Keep the SDK from sending a call again after the server rejected it with ``HEADER_MISMATCH``.

    Its recovery lists the tool again and resends the same arguments once, under a definition nobody
    checked the call against (or approved it for). The rejection is the call's answer instead
    (``version_mismatch``), and the connection lists again for the catalog (:meth:`Connection._call`)."""

    async def relist_refused(name: str) -> None:
        raise MCPError(
            code=HEADER_MISMATCH, message=f"{name[:100]!r} is not sent again under another listing"
        )

    if hasattr(client, "_relist_tool"):
        client._relist_tool = relist_refused  # type: ignore[method-assign]


def refused_here(exc: MCPError) -> bool:
    """Whether ``exc`` is the SDK's own refusal of an input request that an ``input_required`` answer
    embedded (raised where it dispatches them), not an error the server sent: both carry a code."""
    frame = exc.__traceback__
    while frame is not None and frame.tb_next is not None:
        frame = frame.tb_next
    if frame is None:
        return False
    code = frame.tb_frame
    return code.f_globals.get("__name__") == _DRIVER and code.f_code.co_name == "_dispatch_all"


async def list_tools(client: Client, name: str, max_tools: int) -> list[types.Tool]:
    """The server's tools, page by page: at most ``max_tools`` (the first ones), :data:`_MAX_PAGES` pages."""
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(_MAX_PAGES):
        page = await client.list_tools(cursor=cursor, cache_mode="refresh")
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None or len(tools) > max_tools:
            break
    if len(tools) > max_tools:  # no further page is asked for: the rest is never held
        _log.warning(
            "MCP server %s lists more than %d tools: only its first %d are taken",
            name,
            max_tools,
            max_tools,
        )
        del tools[max_tools:]
    return tools
