"""A real MCP server for the adapter's tests (the SDK's MCPServer), over stdio or streamable HTTP.

Run: ``python mcp_test_server.py stdio`` or ``python mcp_test_server.py http FD`` (FD: a listening
socket inherited from the test, so there is no port race and no wait for start-up).
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

server = MCPServer("actionspace-test")
_cancelled = anyio.Event()
_started = anyio.Event()
_generation = [0]
_notes: list[str] = []

READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
LOCAL_WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)


def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


server.add_tool(echo, annotations=READ)


@server.tool(annotations=READ)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool(annotations=READ)
async def slow(seconds: float) -> str:
    """Wait, then answer; records that it started and whether it was cancelled."""
    _started.set()
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        _cancelled.set()
        raise
    return "done"


@server.tool(annotations=READ)
async def cancel_seen(timeout_s: float) -> bool:
    """True once a ``slow`` call was cancelled (waits up to timeout_s seconds)."""
    with anyio.move_on_after(timeout_s):
        await _cancelled.wait()
    return _cancelled.is_set()


@server.tool(annotations=READ)
async def slow_started(timeout_s: float) -> bool:
    """True once a ``slow`` call has started (waits up to timeout_s seconds)."""
    with anyio.move_on_after(timeout_s):
        await _started.wait()
    return _started.is_set()


@server.tool(annotations=READ)
def fail(reason: str) -> str:
    """Always fails with the reason, as an isError result."""
    raise ToolError(reason)


@server.tool(annotations=READ)
def crash() -> str:
    """End the server's process at once, without answering (a server that dies mid-call)."""
    os._exit(3)


@server.tool(annotations=LOCAL_WRITE)
async def slow_note(text: str, seconds: float) -> str:
    """Store a note after a delay (a write whose answer can be lost)."""
    await anyio.sleep(seconds)
    _notes.append(text)
    return f"stored {len(_notes)}"


@server.tool(annotations=READ)
async def chatty(count: int, ctx: Context) -> str:
    """Send ``count`` log messages about the call, then answer."""
    for i in range(count):
        await ctx.info(f"note {i}")
    return f"chatted {count}"


@server.tool(annotations=READ)
async def evolve(ctx: Context) -> int:
    """Change ``echo``'s input schema, then announce the changed tool list."""
    _generation[0] += 1
    n = _generation[0]

    def echo(text: str, suffix: str = "") -> str:
        """Return the text with a suffix."""
        return text + suffix

    server.remove_tool("echo")
    server.add_tool(echo, description=f"Return the text with a suffix (generation {n}).", annotations=READ)
    await ctx.notify_tools_changed()
    with contextlib.suppress(Exception):  # 2026-era sessions hear of it through subscriptions/listen only
        await ctx.session.send_tool_list_changed()
    return n


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run("stdio")
    else:
        import uvicorn

        sock = socket.socket(fileno=int(sys.argv[2]))
        app = server.streamable_http_app()
        config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=1)
        uvicorn.Server(config).run(sockets=[sock])
