"""A stdio MCP server program (the SDK's low-level server) that answers calls with broken JSON-RPC, for
tests/adapters/test_w16_mcp_hostile_ids.py. Run: ``python test_w16_hostile_ids_program.py``.

Each tool's name says what its call gets, written straight to the wire past the SDK's own checks:
``twice`` (its answer, then the same answer again), ``no_id`` (an answer without an id), ``null_id``
(a JSON-RPC error with a null id, as for a request that could not be parsed), ``notice`` (a
notification with the answer's result in its params), ``request_same_id`` (a request from the server
under the call's own id), ``string_id`` (the answer under the call's id as a string),
``result_and_error`` (an answer holding both), ``bare_result`` (a result that is a string),
``trickle`` (a line of text one byte every 20 ms, never ending it); each but ``twice`` then never
answers. ``ok`` answers normally. A name ending in ``_write`` is the same, as a write.
"""

from __future__ import annotations

import json
import os
from typing import Any

import anyio
import mcp_types as types

_WIRE: Any = None
"""The real stdout pipe, kept before the SDK diverts fd 1."""
_OBJ = {"type": "object", "properties": {}}
_READ = types.ToolAnnotations(read_only_hint=True, open_world_hint=False)
_WRITE = types.ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
KINDS = (
    "twice",
    "no_id",
    "null_id",
    "notice",
    "request_same_id",
    "string_id",
    "result_and_error",
    "bare_result",
    "trickle",
)
_RESULT = {"resultType": "complete", "content": [{"type": "text", "text": "forged"}]}


async def _list(ctx: Any, params: Any) -> types.ListToolsResult:
    tools = [types.Tool(name="ok", input_schema=_OBJ, annotations=_READ)]
    for kind in KINDS:
        tools.append(types.Tool(name=kind, input_schema=_OBJ, annotations=_READ))
        tools.append(types.Tool(name=f"{kind}_write", input_schema=_OBJ, annotations=_WRITE))
    return types.ListToolsResult(tools=tools)


def _raw(message: Any) -> None:
    _WIRE.write((message if isinstance(message, str) else json.dumps(message)) + "\n")
    _WIRE.flush()


async def _call(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    kind, rid = params.name.removesuffix("_write"), ctx.request_id
    if kind == "ok":
        return types.CallToolResult(content=[types.TextContent(type="text", text="fine")])
    if kind == "twice":
        _raw({"jsonrpc": "2.0", "id": rid, "result": _RESULT})
        _raw(
            {
                "jsonrpc": "2.0",
                "id": rid,
                "result": {**_RESULT, "content": [{"type": "text", "text": "again"}]},
            }
        )
    elif kind == "no_id":
        _raw({"jsonrpc": "2.0", "result": _RESULT})
    elif kind == "null_id":
        _raw({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})
    elif kind == "notice":
        _raw({"jsonrpc": "2.0", "method": "tools/call", "params": {"id": rid, **_RESULT}})
    elif kind == "request_same_id":
        _raw({"jsonrpc": "2.0", "id": rid, "method": "ping"})
    elif kind == "string_id":
        _raw({"jsonrpc": "2.0", "id": f"{rid}", "result": _RESULT})
    elif kind == "result_and_error":
        _raw({"jsonrpc": "2.0", "id": rid, "result": _RESULT, "error": {"code": 1, "message": "both"}})
    elif kind == "bare_result":
        _raw({"jsonrpc": "2.0", "id": rid, "result": "forged"})
    elif kind == "trickle":
        for _ in range(100_000):
            _WIRE.write("x")
            _WIRE.flush()
            await anyio.sleep(0.02)
    await anyio.sleep(3600)
    raise RuntimeError("unreachable")


async def _serve() -> None:
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    server: Server[Any] = Server("w16-hostile-ids", on_list_tools=_list, on_call_tool=_call)
    options = server.create_initialization_options()
    async with stdio_server() as (read, write):
        await server.run(read, write, options)


if __name__ == "__main__":
    _WIRE = os.fdopen(os.dup(1), "w", buffering=1 << 20)
    anyio.run(_serve)
