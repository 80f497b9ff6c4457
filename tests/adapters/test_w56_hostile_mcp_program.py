"""A hostile MCP server program (the SDK's low-level server), started by the w56 tests as a subprocess.

Run: ``python test_w56_hostile_mcp_program.py MODE stdio`` or ``... MODE http FD`` (FD: a listening
socket inherited from the test). ``MODE`` chooses how the server misbehaves as a whole:

* ``normal``: serves the tools below; ``hang_start``: never answers anything;
  ``hang_shutdown``: serves, but ignores the end of its stdin and SIGTERM;
  ``cursor_loop``: every ``tools/list`` page names the same cursor again;
  ``flip``: ``flip_tools`` changes ``shifty``'s schema and announces the change.

Tools misbehave per call: ``die`` / ``die_write`` end the process mid-call (``die_write`` first
notes the call in the file ``$W56_NOTES``), ``sleep`` answers after ``seconds``, ``is_error``,
``odd_content`` (a content type no client knows), ``huge`` (``mb`` megabytes of text),
``liar`` (structured content against its own output schema), ``wrong_id`` (answers another request
id, then never answers), ``progress_flood``, ``garbage`` (junk lines on stdout, then an answer).
Raw answers are written straight to the wire, bypassing the SDK's own checks.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time
from typing import Any

import anyio
import mcp_types as types

_WIRE: Any = None
"""The real stdout pipe (stdio mode), kept before the SDK diverts fd 1."""
_OBJ = {"type": "object", "properties": {}}
_READ = types.ToolAnnotations(read_only_hint=True, open_world_hint=False)
_WRITE = types.ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
_NUMBER = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def _tools() -> list[types.Tool]:
    seconds = {"type": "object", "properties": {"seconds": {"type": "number"}}}
    megabytes = {"type": "object", "properties": {"mb": {"type": "integer"}}}
    tools = [
        types.Tool(name=name, input_schema=_OBJ, annotations=_READ)
        for name in ("die", "is_error", "odd_content", "wrong_id", "garbage", "progress_flood", "flip_tools")
    ]
    tools += [
        types.Tool(name="die_write", input_schema=_OBJ, annotations=_WRITE),
        types.Tool(name="wrong_id_write", input_schema=_OBJ, annotations=_WRITE),
        types.Tool(name="sleep", input_schema=seconds, annotations=_READ),
        types.Tool(name="sleep_write", input_schema=seconds, annotations=_WRITE),
        types.Tool(name="huge", input_schema=megabytes, annotations=_READ),
        types.Tool(name="liar", input_schema=_OBJ, output_schema=_NUMBER, annotations=_READ),
        types.Tool(name="liar_write", input_schema=_OBJ, output_schema=_NUMBER, annotations=_WRITE),
    ]
    return tools


_flipped = [0]


async def _list(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    if _MODE == "cursor_loop":
        return types.ListToolsResult(tools=_tools(), next_cursor="again")
    tools = _tools()
    if _MODE == "flip":
        shape = {"type": "object", "properties": {f"v{_flipped[0]}": {"type": "string"}}}
        tools.append(types.Tool(name="shifty", input_schema=shape, annotations=_READ))
    return types.ListToolsResult(tools=tools)


def _raw(message: dict[str, Any]) -> None:
    if _WIRE is None:
        raise RuntimeError("raw answers need the stdio transport")
    _WIRE.write(json.dumps(message) + "\n")
    _WIRE.flush()


def _text(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


async def _call(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    name, args = params.name, params.arguments or {}
    rid = ctx.request_id
    if name in ("die", "die_write"):
        if name == "die_write":
            with open(os.environ["W56_NOTES"], "a") as notes:
                notes.write("written\n")
        os._exit(3)
    if name in ("sleep", "sleep_write"):
        await anyio.sleep(float(args.get("seconds", 0)))
        if name == "sleep_write":
            with open(os.environ["W56_NOTES"], "a") as notes:
                notes.write("slept\n")
        return _text("woke")
    if name == "is_error":
        return types.CallToolResult(
            content=[types.TextContent(type="text", text="no such city")], is_error=True
        )
    if name == "odd_content":
        _raw(
            {
                "jsonrpc": "2.0",
                "id": rid,
                "result": {"resultType": "complete", "content": [{"type": "hologram", "beam": 3}]},
            }
        )
        await anyio.sleep(3600)
    if name == "huge":
        size = int(args.get("mb", 100)) * 1_000_000
        _raw(
            {
                "jsonrpc": "2.0",
                "id": rid,
                "result": {"resultType": "complete", "content": [{"type": "text", "text": "x" * size}]},
            }
        )
        await anyio.sleep(3600)
    if name in ("liar", "liar_write"):
        return types.CallToolResult(content=[_text("n").content[0]], structured_content={"n": "not a number"})
    if name in ("wrong_id", "wrong_id_write"):
        other = rid + 1000 if isinstance(rid, int) else f"{rid}-other"
        _raw(
            {
                "jsonrpc": "2.0",
                "id": other,
                "result": {"resultType": "complete", "content": [{"type": "text", "text": "stray"}]},
            }
        )
        await anyio.sleep(3600)
    if name == "progress_flood":
        for i in range(20_000):
            note = {"progressToken": f"t{i % 7}", "progress": i}
            _raw({"jsonrpc": "2.0", "method": "notifications/progress", "params": note})
        return _text("flooded")
    if name == "garbage":
        for junk in ("garbage", "{not json", '{"jsonrpc": "2.0"}', "[1, 2", "\x00\x01\x02"):
            _WIRE.write(junk + "\n")
        _WIRE.flush()
        return _text("clean")
    if name == "flip_tools":
        _flipped[0] += 1
        await ctx.session.send_tool_list_changed()
        return _text(str(_flipped[0]))
    raise ValueError(f"unknown tool {name}")


_MODE = sys.argv[1] if __name__ == "__main__" else "normal"


async def _serve_stdio() -> None:
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    server: Server[Any] = Server("w56-hostile", on_list_tools=_list, on_call_tool=_call)
    options = server.create_initialization_options()
    async with stdio_server() as (read, write):
        await server.run(read, write, options)


def _serve_http(fd: int) -> None:
    import uvicorn
    from mcp.server.lowlevel import Server

    server: Server[Any] = Server("w56-hostile", on_list_tools=_list, on_call_tool=_call)
    app = server.streamable_http_app()
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=1)
    uvicorn.Server(config).run(sockets=[socket.socket(fileno=fd)])


def _main() -> None:
    global _WIRE
    transport = sys.argv[2]
    if _MODE == "hang_start":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if transport == "http":
            listener = socket.socket(fileno=int(sys.argv[3]))
            held = [listener.accept()[0] for _ in range(4)]  # accepted, never answered
            time.sleep(3600 + len(held))
        time.sleep(3600)
        return
    if _MODE == "hang_shutdown":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if transport == "http":
        _serve_http(int(sys.argv[3]))
        return
    _WIRE = os.fdopen(os.dup(1), "w", buffering=1 << 20)
    anyio.run(_serve_stdio)
    if _MODE == "hang_shutdown":
        time.sleep(3600)


if __name__ == "__main__":
    _main()
