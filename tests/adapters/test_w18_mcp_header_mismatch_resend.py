"""A call a 2026-revision server rejects with ``HEADER_MISMATCH`` (its tool's listed schema changed, or
the client's listing of it is stale) is not sent again under a listing nobody checked: the SDK's own
recovery lists the tool again and resends the same arguments once, which would run them under a
definition the call was never made (or approved) for. Here the call ends ``version_mismatch``, sent
once, and the tools are listed again, so the next call meets the current definition."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import MessageHandlerFnT
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp_types import HEADER_MISMATCH

from actionspace import Runtime
from actionspace.adapters._mcp_connection import Connection
from actionspace.adapters.mcp_client import McpToolset, StdioServer

_INPUT: dict[str, Any] = {"type": "object", "properties": {"text": {"type": "string"}}}
_WRITE = types.ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
_READ = types.ToolAnnotations(read_only_hint=True, open_world_hint=False)


class Mismatching:
    """A low-level MCP server, in memory, rejecting every call with ``HEADER_MISMATCH``."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.listings = 0
        self.server: Server[Any] = Server("mismatching", on_list_tools=self._list, on_call_tool=self._call)

    async def _list(self, ctx: Any, params: Any) -> types.ListToolsResult:
        self.listings += 1
        tools = [
            types.Tool(name="note", description="Keep a note.", input_schema=_INPUT, annotations=_WRITE),
            types.Tool(name="look", description="Look.", input_schema=_INPUT, annotations=_READ),
        ]
        return types.ListToolsResult(tools=tools)

    async def _call(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        self.calls.append(params.name)
        raise MCPError(code=HEADER_MISMATCH, message="the tool's headers do not match its schema")

    def toolset(self, rt: Runtime) -> McpToolset:
        toolset = McpToolset(StdioServer(sys.executable, name="mismatching", allowlisted=True))

        async def open_client(stack: AsyncExitStack, handler: MessageHandlerFnT) -> Client:
            client = Client(self.server, message_handler=handler, cache=None)
            return await stack.enter_async_context(client)

        toolset.connection = Connection("mismatching", open_client, toolset._on_listing)
        toolset.register(rt)
        return toolset


@pytest.fixture
def rt() -> Iterator[Runtime]:
    runtime = Runtime("memory://", recover_on_start=False)
    try:
        yield runtime
    finally:
        runtime.close()


@pytest.mark.parametrize("name", ["note", "look"])
def test_a_call_rejected_for_a_header_mismatch_is_version_mismatch_and_never_resent(
    rt: Runtime, name: str
) -> None:
    server = Mismatching()
    toolset = server.toolset(rt)
    listed = server.listings
    obs = rt.call({"name": name, "arguments": {"text": "x"}}, run_id=rt.new_run())
    assert obs.error is not None and obs.error.category == "version_mismatch", obs.error
    assert server.calls == [name]
    deadline = time.monotonic() + 60
    while toolset.connection.refreshes == 0:  # listed again, for the catalog
        assert time.monotonic() < deadline, "the tools were not listed again"
        time.sleep(0.01)
    assert server.listings > listed
