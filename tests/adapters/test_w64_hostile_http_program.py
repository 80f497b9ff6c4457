"""A hostile MCP server over streamable HTTP, written on raw sockets so every byte is its choice.

Run: ``python test_w64_hostile_http_program.py FD`` (FD: a listening socket inherited from the test).
It speaks the handshake-era protocol (``initialize``, JSON answers) well enough to be listed, then
misbehaves per tool: ``ok`` / ``ok_write`` answer; ``huge_json`` / ``huge_sse`` answer ``mb``
megabytes (a chunked body, no length); ``spaces_json`` sends whitespace forever; ``keepalive_sse``
sends keep-alive comments forever; ``stall`` sends its headers, then nothing; ``gzip_json`` /
``gzip_sse`` send about 10 GB of zeros as ``Content-Encoding: gzip``; ``wrong_id`` / ``wrong_id_sse``
answer another request id; ``bad_utf8`` answers invalid UTF-8; ``both`` / ``both_sse`` answer with a
result and an error; ``cut`` closes the connection mid-answer;
``error_bomb`` answers status 500 with a gzip bomb as its JSON body; ``error_json`` answers status 400
with a JSON-RPC ``invalid params`` error; ``string_id`` / ``string_id_sse`` answer under the request's
id as a string.
A ``*_write`` twin is a write tool. Every call is noted, one name a line, in the file ``$W64_NOTES``,
and so is the end of the connection that served it (``closed NAME``).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import zlib
from typing import Any

_READ = {"readOnlyHint": True, "openWorldHint": False}
_WRITE = {"readOnlyHint": False, "destructiveHint": False, "openWorldHint": False}
_HOSTILE = (
    "ok",
    "huge_json",
    "huge_sse",
    "spaces_json",
    "keepalive_sse",
    "stall",
    "gzip_json",
    "gzip_sse",
    "wrong_id",
    "wrong_id_sse",
    "bad_utf8",
    "both",
    "both_sse",
    "cut",
    "error_bomb",
    "error_json",
    "string_id",
    "string_id_sse",
)


def _tools() -> list[dict[str, Any]]:
    schema = {"type": "object", "properties": {"mb": {"type": "integer"}}}
    tools = [{"name": name, "inputSchema": schema, "annotations": _READ} for name in _HOSTILE]
    tools += [{"name": f"{name}_write", "inputSchema": schema, "annotations": _WRITE} for name in _HOSTILE]
    return tools


def _gzip_of_zeros(gigabytes: int) -> tuple[bytes, bytes, int]:
    """(start, block, count): ``start + block * count`` is a gzip stream of that many GB of zeros."""
    zeros = bytes(1 << 20)
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    start = packer.compress(zeros) + packer.flush(zlib.Z_FULL_FLUSH)
    block = packer.compress(zeros) + packer.flush(zlib.Z_FULL_FLUSH)
    return start, block, gigabytes * 1024


class _Reply:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.serving = ""

    async def head(self, status: str, headers: dict[str, str]) -> None:
        lines = [f"HTTP/1.1 {status}", *(f"{k}: {v}" for k, v in headers.items()), "", ""]
        self.writer.write("\r\n".join(lines).encode())
        await self.writer.drain()

    async def whole(self, status: str, body: bytes, content_type: str = "application/json") -> None:
        await self.head(
            status, {"content-type": content_type, "content-length": str(len(body)), "mcp-session-id": "w64"}
        )
        self.writer.write(body)
        await self.writer.drain()

    async def chunked(self, content_type: str, encoding: str | None = None) -> None:
        headers = {"content-type": content_type, "transfer-encoding": "chunked", "mcp-session-id": "w64"}
        if encoding:
            headers["content-encoding"] = encoding
        await self.head("200 OK", headers)

    async def chunk(self, data: bytes) -> None:
        self.writer.write(b"%x\r\n%s\r\n" % (len(data), data))
        await self.writer.drain()


def _note(line: str) -> None:
    with open(os.environ["W64_NOTES"], "a") as notes:
        notes.write(line + "\n")


def _answer(rid: Any, text: str) -> dict[str, Any]:
    result = {"resultType": "complete", "content": [{"type": "text", "text": text}]}
    return {"jsonrpc": "2.0", "id": rid, "result": result}


async def _forever(reply: _Reply, piece: bytes) -> None:
    while True:
        await reply.chunk(piece)
        await asyncio.sleep(0.01)


async def _huge(reply: _Reply, rid: Any, megabytes: int, sse: bool) -> None:
    head, tail = json.dumps(_answer(rid, "@")).encode().split(b"@")
    await reply.chunked("text/event-stream" if sse else "application/json")
    await reply.chunk((b"event: message\ndata: " if sse else b"") + head)
    piece = b"x" * (1 << 20)
    for _ in range(megabytes):
        await reply.chunk(piece)
    await reply.chunk(tail + (b"\n\n" if sse else b""))
    await reply.chunk(b"")


async def _gzip(reply: _Reply, sse: bool, status: str = "200 OK") -> None:
    start, block, count = _gzip_of_zeros(10)
    headers = {"content-type": "text/event-stream" if sse else "application/json", "content-encoding": "gzip"}
    await reply.head(status, {**headers, "transfer-encoding": "chunked"})
    await reply.chunk(start)
    for _ in range(count):
        await reply.chunk(block * 16)


async def _call(reply: _Reply, rid: Any, name: str, args: dict[str, Any]) -> None:
    _note(name)
    reply.serving = name
    kind = name.removesuffix("_write")
    if kind == "ok":
        await reply.whole("200 OK", json.dumps(_answer(rid, "fine")).encode())
    elif kind in ("huge_json", "huge_sse"):
        await _huge(reply, rid, int(args.get("mb", 100)), sse=kind == "huge_sse")
    elif kind == "spaces_json":
        await reply.chunked("application/json")
        await _forever(reply, b" " * 65536)
    elif kind == "keepalive_sse":
        await reply.chunked("text/event-stream")
        await _forever(reply, b": keep-alive\n\n")
    elif kind == "stall":
        await reply.chunked("application/json")
        await reply.reader.read(1)  # nothing more comes: returns when the client closes the connection
    elif kind in ("gzip_json", "gzip_sse"):
        await _gzip(reply, sse=kind == "gzip_sse")
    elif kind == "wrong_id":
        await reply.whole("200 OK", json.dumps(_answer(rid + 1000, "stray")).encode())
    elif kind == "wrong_id_sse":
        event = b"event: message\ndata: " + json.dumps(_answer(rid + 1000, "stray")).encode() + b"\n\n"
        await reply.whole("200 OK", event, content_type="text/event-stream")
    elif kind == "bad_utf8":
        body = json.dumps(_answer(rid, "@")).encode().replace(b"@", b"caf\xc3\x28 \xff\xfe")
        await reply.whole("200 OK", body)
    elif kind in ("both", "both_sse"):  # JSON-RPC allows a result or an error, never both
        both = json.dumps({**_answer(rid, "both"), "error": {"code": 1, "message": "both"}}).encode()
        if kind == "both":
            await reply.whole("200 OK", both)
        else:
            event = b"event: message\ndata: " + both + b"\n\n"
            await reply.whole("200 OK", event, content_type="text/event-stream")
    elif kind == "cut":
        await reply.chunked("application/json")
        await reply.chunk(b'{"jsonrpc": "2.0", "id": ')
        reply.writer.transport.abort()
    elif kind == "error_bomb":
        await _gzip(reply, sse=False, status="500 Internal Server Error")
    elif kind in ("string_id", "string_id_sse"):  # JSON-RPC: the same id, of the same type
        stringly = json.dumps(_answer(str(rid), "stray")).encode()
        if kind == "string_id":
            await reply.whole("200 OK", stringly)
        else:
            event = b"event: message\ndata: " + stringly + b"\n\n"
            await reply.whole("200 OK", event, content_type="text/event-stream")
    elif kind == "error_json":
        error = {"code": -32602, "message": "mb must be small"}
        body = json.dumps({"jsonrpc": "2.0", "id": rid, "error": error}).encode()
        await reply.whole("400 Bad Request", body)


async def _post(reply: _Reply, message: dict[str, Any]) -> None:
    method, rid = message.get("method"), message.get("id")
    if rid is None:
        await reply.whole("202 Accepted", b"")
    elif method == "initialize":
        result = {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "w64-hostile", "version": "1"},
        }
        await reply.whole("200 OK", json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}).encode())
    elif method == "tools/list":
        answer = {"jsonrpc": "2.0", "id": rid, "result": {"tools": _tools()}}
        await reply.whole("200 OK", json.dumps(answer).encode())
    elif method == "tools/call":
        params = message["params"]
        await _call(reply, rid, params["name"], params.get("arguments") or {})
    else:
        error = {"code": -32601, "message": f"no method {method}"}
        await reply.whole("200 OK", json.dumps({"jsonrpc": "2.0", "id": rid, "error": error}).encode())


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    reply = _Reply(reader, writer)
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method = lines[0].split(" ")[0]
            headers = {
                k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])
            }
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            if method == "POST":
                await _post(reply, json.loads(body))
            elif method == "DELETE":
                await reply.whole("200 OK", b"")
            else:
                await reply.whole("405 Method Not Allowed", b"")
    except (asyncio.IncompleteReadError, ConnectionError, OSError):
        pass
    finally:
        writer.close()
        if reply.serving:
            _note(f"closed {reply.serving}")


async def _main(fd: int) -> None:
    server = await asyncio.start_server(_serve, sock=socket.socket(fileno=fd))
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(_main(int(sys.argv[1])))
