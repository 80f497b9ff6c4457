"""A hostile MCP server over streamable HTTP that answers calls with redirects.

Run: ``python test_w75_redirect_program.py FD VERSION`` (as ``test_w70_hostile_http_program``). Every
request is noted in ``$W64_NOTES`` as ``NAME PATH HOST AUTH`` (``AUTH``: ``auth`` when an
``Authorization`` header came, else ``-``) besides the lines the w64 server writes. A call that reaches
any path other than ``/mcp`` answers ``moved fine``. Tools, each with a ``*_write`` twin:

* ``moved``: 307 to ``/mcp/moved``;
* ``bomb_moved``: 307 to ``/mcp/moved`` with about 5 GB of zeros as a gzip body;
* ``huge_moved``: 307 to ``/mcp/moved`` with a plain body of ``mb`` megabytes;
* ``stall_moved``: 307 to ``/mcp/moved`` with a chunked body that never comes;
* ``loop``: 307 to ``/mcp`` again, for ever;
* ``cross_origin``: 307 to the same server named ``localhost`` (another origin);
* ``see_other``: 303 to ``/mcp/moved`` (a POST turned into a GET);
* ``ftp`` / ``javascript`` / ``data``: a redirect to a scheme that is not HTTP;
* ``garbage_location``: 307 with a Location that is not a URL, and a JSON answer as its body;
* ``no_location``: 307 without a Location, and a JSON answer as its body;
* ``multiple_choices``: 300 with a JSON answer as its body.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parents[2]))
from tests.adapters import test_w64_hostile_http_program as w64
from tests.adapters import test_w70_hostile_http_program as w70

_EXTRA = (
    "moved",
    "bomb_moved",
    "huge_moved",
    "stall_moved",
    "loop",
    "cross_origin",
    "see_other",
    "ftp",
    "javascript",
    "data",
    "garbage_location",
    "no_location",
    "multiple_choices",
)
_base_call = w64._call
_LOCATIONS = {
    "ftp": "ftp://127.0.0.1/mcp",
    "javascript": "javascript:alert(1)",
    "data": "data:application/json,{}",
    "garbage_location": "http://[::1:bad/\x7f%zz",
}


class _Request(w64._Reply):
    path = "/mcp"
    host = ""
    auth = False


async def _redirect(reply: w64._Reply, status: str, location: str | None, body: bytes = b"") -> None:
    headers = {"content-type": "application/json", "content-length": str(len(body)), "mcp-session-id": "w64"}
    if location is not None:
        headers["location"] = location
    await reply.head(status, headers)
    reply.writer.write(body)
    await reply.writer.drain()


async def _chunked_redirect(reply: w64._Reply, location: str, encoding: str | None = None) -> None:
    headers = {"content-type": "application/json", "transfer-encoding": "chunked", "location": location}
    if encoding:
        headers["content-encoding"] = encoding
    await reply.head("307 Temporary Redirect", headers)


async def _call(reply: w64._Reply, rid: Any, name: str, args: dict[str, Any]) -> None:
    kind = name.removesuffix("_write")
    if kind not in _EXTRA:
        await _base_call(reply, rid, name, args)
        return
    assert isinstance(reply, _Request)
    w64._note(f"{name} {reply.path} {reply.host} {'auth' if reply.auth else '-'}")
    reply.serving = name
    answer = json.dumps(w64._answer(rid, "moved fine")).encode()
    if reply.path != "/mcp":
        await reply.whole("200 OK", answer)
    elif kind == "moved":
        await _redirect(reply, "307 Temporary Redirect", "/mcp/moved")
    elif kind == "bomb_moved":
        start, block, _ = w64._gzip_of_zeros(0)
        await _chunked_redirect(reply, "/mcp/moved", "gzip")
        await reply.chunk(start)
        for _ in range(5 * 64):
            await reply.chunk(block * 16)
        await reply.chunk(b"")
    elif kind == "huge_moved":
        await _chunked_redirect(reply, "/mcp/moved")
        for _ in range(int(args.get("mb", 100))):
            await reply.chunk(b"x" * (1 << 20))
        await reply.chunk(b"")
    elif kind == "stall_moved":
        await _chunked_redirect(reply, "/mcp/moved")
        await reply.reader.read(1)
    elif kind == "loop":
        await _redirect(reply, "307 Temporary Redirect", "/mcp")
    elif kind == "cross_origin":
        port = reply.host.rpartition(":")[2]
        await _redirect(reply, "307 Temporary Redirect", f"http://localhost:{port}/mcp/moved")
    elif kind == "see_other":
        await _redirect(reply, "303 See Other", "/mcp/moved")
    elif kind in _LOCATIONS:
        await _redirect(reply, "307 Temporary Redirect", _LOCATIONS[kind], answer)
    elif kind == "no_location":
        await _redirect(reply, "307 Temporary Redirect", None, answer)
    elif kind == "multiple_choices":
        await _redirect(reply, "300 Multiple Choices", "/mcp/moved", answer)


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    reply = _Request(reader, writer)
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, reply.path = lines[0].split(" ")[:2]
            headers = {
                k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])
            }
            reply.host, reply.auth = headers.get("host", ""), "authorization" in headers
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            if method == "POST":
                await w70._post(reply, json.loads(body))
            elif method == "DELETE":
                await reply.whole("200 OK", b"")
            else:
                w64._note(f"{method} {reply.path}")
                await reply.whole("405 Method Not Allowed", b"")
    except (asyncio.IncompleteReadError, ConnectionError, OSError):
        pass
    finally:
        writer.close()
        if reply.serving:
            w64._note(f"closed {reply.serving}")


async def _main(fd: int) -> None:
    server = await asyncio.start_server(_serve, sock=socket.socket(fileno=fd))
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    w70._VERSION = sys.argv[2]
    w64._HOSTILE = (*w64._HOSTILE, *_EXTRA)  # type: ignore[assignment]
    w64._call = _call
    asyncio.run(_main(int(sys.argv[1])))
