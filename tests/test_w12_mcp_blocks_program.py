"""An MCP server program (the SDK's low-level server) whose answers are small in bytes but huge in
structure, started by ``test_w12_mcp_answer_structure`` as a subprocess.

Run: ``python test_w12_mcp_blocks_program.py stdio`` or ``... http FD [json]`` (FD: a listening
socket inherited from the test; ``json``: answers as JSON bodies instead of SSE events).

Tools: ``blocks`` / ``blocks_write`` answer ``n`` empty text blocks (about 25 bytes each), the
write first noting the call in the file ``$W12_NOTES``; ``braces`` answers one text of ``n``
``{[`` pairs (structure-looking, but a string); ``ok`` answers ``fine``. With ``$W12_TOOLS`` set,
it lists that many tools ``t0``, ``t1``... instead, in pages of ``$W12_PAGE`` (default 2000),
noting each page asked for.
"""

from __future__ import annotations

import os
import socket
import sys
from typing import Any

import anyio
import mcp_types as types

_SIZE = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
_READ = types.ToolAnnotations(read_only_hint=True, open_world_hint=False)
_WRITE = types.ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)


async def _list(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    many = int(os.environ.get("W12_TOOLS", "0"))
    if many:  # pages of generated tools, each page noted in $W12_NOTES as it is asked for
        start = int(params.cursor) if params is not None and params.cursor else 0
        size = int(os.environ.get("W12_PAGE", "2000"))
        with open(os.environ["W12_NOTES"], "a") as notes:
            notes.write(f"page {start}\n")
        tools = [
            types.Tool(name=f"t{i}", input_schema={"type": "object"})
            for i in range(start, min(start + size, many))
        ]
        return types.ListToolsResult(
            tools=tools, next_cursor=str(start + size) if start + size < many else None
        )
    return types.ListToolsResult(
        tools=[
            types.Tool(name="blocks", input_schema=_SIZE, annotations=_READ),
            types.Tool(name="blocks_write", input_schema=_SIZE, annotations=_WRITE),
            types.Tool(name="braces", input_schema=_SIZE, annotations=_READ),
            types.Tool(name="ok", input_schema={"type": "object"}, annotations=_READ),
        ]
    )


async def _call(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    args = params.arguments or {}
    if params.name == "ok":
        return types.CallToolResult(content=[types.TextContent(type="text", text="fine")])
    if params.name == "braces":
        return types.CallToolResult(content=[types.TextContent(type="text", text="{[" * int(args["n"]))])
    if params.name == "blocks_write":
        with open(os.environ["W12_NOTES"], "a") as notes:
            notes.write("written\n")
    empty = types.TextContent(type="text", text="")
    return types.CallToolResult(content=[empty] * int(args["n"]))


def _server() -> Any:
    from mcp.server.lowlevel import Server

    return Server("w12-blocks", on_list_tools=_list, on_call_tool=_call)


async def _serve_stdio() -> None:
    from mcp.server.stdio import stdio_server

    server = _server()
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def _serve_http(fd: int, json_response: bool) -> None:
    import uvicorn

    app = _server().streamable_http_app(json_response=json_response)
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=1)
    uvicorn.Server(config).run(sockets=[socket.socket(fileno=fd)])


if __name__ == "__main__":
    if sys.argv[1] == "http":
        _serve_http(int(sys.argv[2]), json_response=sys.argv[3:] == ["json"])
    else:
        anyio.run(_serve_stdio)
