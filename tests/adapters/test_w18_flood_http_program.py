"""An MCP server over streamable HTTP, on raw sockets, that floods the client with its own requests and
never takes their answers, for tests/adapters/test_w18_mcp_http_request_floods.py.

Run: ``python test_w18_flood_http_program.py FD`` (FD: a listening socket inherited from the test).
It speaks the handshake-era protocol. Tools: ``ok`` answers "fine"; ``asks`` answers on an SSE stream
that first carries ``count`` ``ping`` requests to the client (ids ``askN``, or all ``"same"`` when
``same`` is 1), then the answer "asked"; with ``get`` 1 the requests go on the GET stream instead, and
the answer is a JSON body (and the flood ends with a tool list change). A POST carrying the client's
answer to one of them is noted (``answer ID``, one a line, in ``$W18_NOTES``) and then held open, never
answered, until the client gives up on it.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
from typing import Any

_READ = {"readOnlyHint": True, "openWorldHint": False}
_SCHEMA = {"type": "object", "properties": {k: {"type": "integer"} for k in ("count", "same", "get")}}


class _Reply:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    async def whole(self, status: str, body: bytes, content_type: str = "application/json") -> None:
        head = [f"HTTP/1.1 {status}", f"content-type: {content_type}", f"content-length: {len(body)}"]
        head.append("mcp-session-id: w18")
        self.writer.write(("\r\n".join([*head, "", ""])).encode() + body)
        await self.writer.drain()


def _note(line: str) -> None:
    with open(os.environ["W18_NOTES"], "a") as notes:
        notes.write(line + "\n")


def _answer(rid: Any, text: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": text}]}}


def _event(message: dict[str, Any]) -> bytes:
    return b"event: message\ndata: " + json.dumps(message).encode() + b"\n\n"


_STREAMS: list[asyncio.StreamWriter] = []
"""The GET streams open (chunked SSE)."""


async def _call(reply: _Reply, rid: Any, name: str, args: dict[str, Any]) -> None:
    if name == "ok":
        await reply.whole("200 OK", json.dumps(_answer(rid, "fine")).encode())
        return
    same = bool(args.get("same"))
    asks = b"".join(
        _event({"jsonrpc": "2.0", "id": "same" if same else f"ask{n}", "method": "ping"})
        for n in range(int(args.get("count", 1000)))
    )
    if not args.get("get"):
        await reply.whole("200 OK", asks + _event(_answer(rid, "asked")), content_type="text/event-stream")
        return
    asks += _event({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})  # the flood's end
    for stream in _STREAMS:
        stream.write(b"%x\r\n%s\r\n" % (len(asks), asks))
        await stream.drain()
    await reply.whole("200 OK", json.dumps(_answer(rid, "asked")).encode())


async def _get_stream(reply: _Reply) -> None:
    head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
    reply.writer.write((head + "mcp-session-id: w18\r\n\r\n").encode())
    await reply.writer.drain()
    _STREAMS.append(reply.writer)
    try:
        await reply.reader.read(1)  # open until the client closes it
    finally:
        _STREAMS.remove(reply.writer)


async def _post(reply: _Reply, message: dict[str, Any]) -> bool:
    """Answer one POST; False when the connection is to be held, unanswered, until the client closes it."""
    method, rid = message.get("method"), message.get("id")
    if method is None:  # the client's answer to one of our requests: noted, never taken
        _note(f"answer {rid}")
        return False
    if rid is None:
        await reply.whole("202 Accepted", b"")
    elif method == "initialize":
        result = {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "w18-floods", "version": "1"},
        }
        await reply.whole("200 OK", json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}).encode())
    elif method == "tools/list":
        tools = [{"name": n, "inputSchema": _SCHEMA, "annotations": _READ} for n in ("ok", "asks")]
        await reply.whole(
            "200 OK", json.dumps({"jsonrpc": "2.0", "id": rid, "result": {"tools": tools}}).encode()
        )
    elif method == "tools/call":
        params = message["params"]
        await _call(reply, rid, params["name"], params.get("arguments") or {})
    else:
        error = {"code": -32601, "message": f"no method {method}"}
        await reply.whole("200 OK", json.dumps({"jsonrpc": "2.0", "id": rid, "error": error}).encode())
    return True


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    reply = _Reply(reader, writer)
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method = lines[0].split(" ")[0]
            headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            if method == "POST":
                if not await _post(reply, json.loads(body)):
                    await reader.read(1)  # held: returns when the client closes the connection
                    return
            elif method == "DELETE":
                await reply.whole("200 OK", b"")
            elif method == "GET":
                await _get_stream(reply)
                return
            else:
                await reply.whole("405 Method Not Allowed", b"")
    except (asyncio.IncompleteReadError, ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def _main(fd: int) -> None:
    server = await asyncio.start_server(_serve, sock=socket.socket(fileno=fd))
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(_main(int(sys.argv[1])))
