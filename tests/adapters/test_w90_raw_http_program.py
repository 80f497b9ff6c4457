"""A misbehaving MCP server over streamable HTTP on raw sockets (no SDK: nothing checks what it sends),
for tests/adapters/test_w90_mcp_http_misbehaving_servers.py.

Run: ``python test_w90_raw_http_program.py FD`` (FD: a listening socket inherited from the test). Every
request is noted in ``$W90_NOTES`` as ``METHOD SESSION WHAT`` (``SESSION``: its ``Mcp-Session-Id``, or
``-``; ``WHAT``: the JSON-RPC method, the tool's name for a call, ``unread`` for a POST answered before
its body was read), and the end of the connection that served a call as ``closed NAME``.

``$W90_MODE`` sets how the session is kept: ``keep`` (one id, ``s1``), ``none`` (no ``Mcp-Session-Id``
ever), ``churn`` (every answer names a new id; only ``s1`` is known), ``forget`` (after the first call,
``s1`` is answered ``404``; a new ``initialize`` gets ``s2``), ``refuse`` (after the listing, a call's
POST is answered ``503`` once its head is read, its body never read, and its connection closed).

Tools (a ``*_write`` twin of each is a write tool): ``ok`` ("fine"); ``text`` (an SSE answer whose text is
``bytes.fromhex(hex)`` put between the JSON string's quotes as they are); ``json_text`` (the same as a JSON
body); ``hold`` (answered "held" only once a ``release`` came: answers out of order); ``release``;
``twice`` (its SSE answer twice, the second another text); ``stranger`` (an SSE answer to an id never
sent, then its own); ``cut_event`` (half an event, then the connection cut); ``ended_event`` (half an
event, then the body ended); ``endless_event`` (one event's data, never ended); ``endless_comments``
(keep-alive comments for ever); ``huge_json`` (a 40 MB JSON answer); ``cross_origin`` (307 to the same
server named ``localhost``); ``fail_after_read`` (500 with a text body).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parents[2]))
from tests.adapters.test_w64_hostile_http_program import _Reply

_READ = {"readOnlyHint": True, "openWorldHint": False}
_WRITE = {"readOnlyHint": False, "destructiveHint": False, "openWorldHint": False}
KINDS = (
    "ok",
    "text",
    "json_text",
    "hold",
    "release",
    "twice",
    "stranger",
    "cut_event",
    "ended_event",
    "endless_event",
    "endless_comments",
    "huge_json",
    "cross_origin",
    "fail_after_read",
)
_MODE = os.environ.get("W90_MODE", "keep")
_SCHEMA = {"type": "object", "properties": {"hex": {"type": "string"}}}


class _State:
    session = "s1"
    """The session id the server knows."""
    churned = 0
    listed = False
    called = 0
    release: asyncio.Event | None = None


def _note(line: str) -> None:
    with open(os.environ["W90_NOTES"], "a") as notes:
        notes.write(line + "\n")


def _answer(rid: Any, text: str) -> bytes:
    result = {"resultType": "complete", "content": [{"type": "text", "text": text}]}
    return json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}).encode()


def _event(data: bytes) -> bytes:
    return b"event: message\ndata: " + data + b"\n\n"


def _with_raw_text(rid: Any, raw: bytes) -> bytes:
    head, tail = _answer(rid, "@").split(b"@")
    return head + raw + tail


class _Served(_Reply):
    """Replies naming the session as the mode says."""

    async def whole(self, status: str, body: bytes, content_type: str = "application/json") -> None:
        await self.head(status, {"content-type": content_type, "content-length": str(len(body)), **_named()})
        self.writer.write(body)
        await self.writer.drain()

    async def chunked(self, content_type: str, encoding: str | None = None) -> None:
        await self.head("200 OK", {"content-type": content_type, "transfer-encoding": "chunked", **_named()})


def _named() -> dict[str, str]:
    if _MODE == "none":
        return {}
    if _MODE == "churn" and _State.listed:
        _State.churned += 1
        return {"mcp-session-id": f"churned-{_State.churned}"}
    return {"mcp-session-id": _State.session}


async def _call(reply: _Served, rid: Any, name: str, args: dict[str, Any], host: str) -> None:
    reply.serving = name
    kind = name.removesuffix("_write")
    sse = "text/event-stream"
    if kind == "ok":
        await reply.whole("200 OK", _answer(rid, "fine"))
    elif kind == "text":
        await reply.whole("200 OK", _event(_with_raw_text(rid, bytes.fromhex(args["hex"]))), sse)
    elif kind == "json_text":
        await reply.whole("200 OK", _with_raw_text(rid, bytes.fromhex(args["hex"])))
    elif kind == "hold":
        _State.release = _State.release or asyncio.Event()
        await _State.release.wait()
        await reply.whole("200 OK", _answer(rid, "held"))
    elif kind == "release":
        _State.release = _State.release or asyncio.Event()
        await reply.whole("200 OK", _answer(rid, "released"))
        await asyncio.sleep(0.3)  # this answer is read first
        _State.release.set()
    elif kind == "twice":
        await reply.whole("200 OK", _event(_answer(rid, "first")) + _event(_answer(rid, "second")), sse)
    elif kind == "stranger":
        await reply.whole("200 OK", _event(_answer(987654, "stray")) + _event(_answer(rid, "own")), sse)
    elif kind in ("cut_event", "ended_event"):
        await reply.chunked(sse)
        await reply.chunk(b"event: message\ndata: " + _answer(rid, "half")[:30])
        if kind == "cut_event":
            reply.writer.transport.abort()
        else:
            await reply.chunk(b"")
    elif kind == "endless_event":
        await reply.chunked(sse)
        await reply.chunk(b"event: message\ndata: " + _answer(rid, "")[:20])
        while True:
            await reply.chunk(b"x" * (1 << 20))
    elif kind == "endless_comments":
        await reply.chunked(sse)
        while True:
            await reply.chunk(b": keep-alive\n\n")
            await asyncio.sleep(0.01)
    elif kind == "huge_json":
        await reply.whole("200 OK", _with_raw_text(rid, b"x" * (40 << 20)))
    elif kind == "cross_origin":
        port = host.rpartition(":")[2]
        await reply.head("307 Temporary Redirect", {"location": f"http://localhost:{port}/mcp", **_named()})
    elif kind == "fail_after_read":
        await reply.whole("500 Internal Server Error", b"it broke", "text/plain")


async def _post(reply: _Served, message: dict[str, Any], host: str) -> None:
    method, rid = message.get("method"), message.get("id")
    if rid is None:
        await reply.whole("202 Accepted", b"")
    elif method == "initialize":
        result = {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "w90-raw", "version": "1"},
        }
        await reply.whole("200 OK", json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}).encode())
    elif method == "tools/list":
        tools = [{"name": n, "inputSchema": _SCHEMA, "annotations": _READ} for n in KINDS]
        tools += [{"name": f"{n}_write", "inputSchema": _SCHEMA, "annotations": _WRITE} for n in KINDS]
        await reply.whole(
            "200 OK", json.dumps({"jsonrpc": "2.0", "id": rid, "result": {"tools": tools}}).encode()
        )
    elif method == "tools/call":
        params = message["params"]
        await _call(reply, rid, params["name"], params.get("arguments") or {}, host)
    else:
        error = {"code": -32601, "message": f"no method {method}"}
        await reply.whole("200 OK", json.dumps({"jsonrpc": "2.0", "id": rid, "error": error}).encode())


def _what(message: dict[str, Any]) -> str:
    if message.get("method") == "tools/call":
        return str(message["params"]["name"])
    return str(message.get("method") or "answer")


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    reply = _Served(reader, writer)
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method = lines[0].split(" ")[0]
            headers = {
                k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])
            }
            session = headers.get("mcp-session-id", "-")
            if method == "POST" and _MODE == "refuse" and _State.listed:
                _note(f"POST {session} unread")
                await reply.whole("503 Service Unavailable", b"", "text/plain")
                writer.transport.abort()
                return
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            if method != "POST":
                _note(f"{method} {session} -")
                await reply.whole("405 Method Not Allowed" if method == "GET" else "200 OK", b"")
                continue
            message = json.loads(body)
            asked = message.get("method")
            if _MODE == "forget" and asked == "initialize" and _State.called:
                _State.session = "s2"
            known = session in ("-", _State.session) and not (_MODE == "forget" and _State.called == 1)
            if asked != "initialize" and _MODE in ("forget", "churn") and not known:
                _note(f"POST {session} 404")
                _State.called += asked == "tools/call"
                await reply.whole("404 Not Found", b"", "text/plain")
                continue
            _note(f"POST {session} {_what(message)}")
            _State.listed = _State.listed or asked == "tools/list"
            _State.called += asked == "tools/call"
            await _post(reply, message, headers.get("host", ""))
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
