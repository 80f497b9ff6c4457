"""The hostile streamable-HTTP MCP server of ``test_w64_hostile_http_program``, in either protocol era,
with more ways to encode an answer.

Run: ``python test_w70_hostile_http_program.py FD VERSION`` (FD: a listening socket inherited from the
test; VERSION: the one protocol revision ``server/discover`` advertises; a handshake-era one makes a
client fall back to ``initialize``). Extra tools, each with a ``*_write`` twin:

* ``gzip_ok`` / ``deflate_ok`` / ``raw_deflate_ok`` / ``identity_ok`` answer ``fine`` so encoded;
* ``two_members_ok`` answers ``fine`` as two gzip members, one after the other;
* ``brotli_ok`` / ``unknown_ok`` / ``double_unknown_ok`` send a plain JSON answer labelled with an
  encoding the client does not decode (``br``; ``x-w70``; ``gzip, x-w70``);
* ``brotli_sse`` does the same with an SSE answer;
* ``corrupt_gzip`` / ``corrupt_gzip_sse`` send a gzip stream that breaks in its middle;
* ``cut_gzip`` sends a gzip stream that stops before its end;
* ``gzip_one_chunk`` sends about 3 GB of zeros as one gzip HTTP chunk.
"""

from __future__ import annotations

import asyncio
import json
import sys
import zlib
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parents[2]))
from tests.adapters import test_w64_hostile_http_program as w64

_EXTRA = (
    "gzip_ok",
    "deflate_ok",
    "raw_deflate_ok",
    "identity_ok",
    "two_members_ok",
    "brotli_ok",
    "unknown_ok",
    "double_unknown_ok",
    "brotli_sse",
    "corrupt_gzip",
    "corrupt_gzip_sse",
    "cut_gzip",
    "gzip_one_chunk",
)
_VERSION = "2025-11-25"
_CACHEABLE: dict[str, Any] = {"resultType": "complete", "ttlMs": 0, "cacheScope": "private"}
_base_call = w64._call
_base_post = w64._post


def _packed(data: bytes, wbits: int) -> bytes:
    packer = zlib.compressobj(6, zlib.DEFLATED, wbits)
    return packer.compress(data) + packer.flush()


async def _encoded(
    reply: w64._Reply, body: bytes, encoding: str, content_type: str = "application/json"
) -> None:
    headers = {"content-type": content_type, "content-length": str(len(body)), "content-encoding": encoding}
    await reply.head("200 OK", {**headers, "mcp-session-id": "w64"})
    reply.writer.write(body)
    await reply.writer.drain()


async def _call(reply: w64._Reply, rid: Any, name: str, args: dict[str, Any]) -> None:
    kind = name.removesuffix("_write")
    if kind not in _EXTRA:
        await _base_call(reply, rid, name, args)
        return
    w64._note(name)
    reply.serving = name
    fine = json.dumps(w64._answer(rid, "fine")).encode()
    event = b"event: message\ndata: " + fine + b"\n\n"
    if kind == "gzip_ok":
        await _encoded(reply, _packed(fine, 31), "gzip")
    elif kind == "deflate_ok":
        await _encoded(reply, _packed(fine, 15), "deflate")
    elif kind == "raw_deflate_ok":
        await _encoded(reply, _packed(fine, -15), "deflate")
    elif kind == "identity_ok":
        await _encoded(reply, fine, "identity")
    elif kind == "two_members_ok":
        await _encoded(reply, _packed(fine[:20], 31) + _packed(fine[20:], 31), "gzip")
    elif kind == "brotli_ok":
        await _encoded(reply, fine, "br")
    elif kind == "unknown_ok":
        await _encoded(reply, fine, "x-w70")
    elif kind == "double_unknown_ok":
        await _encoded(reply, _packed(fine, 31), "gzip, x-w70")
    elif kind == "brotli_sse":
        await _encoded(reply, event, "br", content_type="text/event-stream")
    elif kind in ("corrupt_gzip", "corrupt_gzip_sse"):
        packed = _packed((event if kind.endswith("sse") else fine) * 50, 31)
        broken = packed[:15] + bytes(b ^ 0x5A for b in packed[15:40]) + packed[40:]
        content_type = "text/event-stream" if kind.endswith("sse") else "application/json"
        await _encoded(reply, broken, "gzip", content_type=content_type)
    elif kind == "cut_gzip":
        await _encoded(reply, _packed(fine, 31)[:-12], "gzip")
    elif kind == "gzip_one_chunk":
        start, block, _ = w64._gzip_of_zeros(0)
        await reply.chunked("application/json", "gzip")
        await reply.chunk(start + block * 3 * 1024)


async def _post(reply: w64._Reply, message: dict[str, Any]) -> None:
    rid, method = message.get("id"), message.get("method")
    if rid is not None:
        w64._note(f"method {method}")
    result: dict[str, Any] = dict(_CACHEABLE)
    if method == "server/discover":
        result |= {"supportedVersions": [_VERSION], "capabilities": {"tools": {"listChanged": False}}}
        result |= {"serverInfo": {"name": "w70-hostile", "version": "1"}}
    elif method == "tools/list":
        result |= {"tools": w64._tools()}
    else:
        if method == "initialize":
            message["params"]["protocolVersion"] = _VERSION
        await _base_post(reply, message)
        return
    await reply.whole("200 OK", json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}).encode())


def main(fd: int, version: str) -> None:
    global _VERSION
    _VERSION = version
    w64._HOSTILE = (*w64._HOSTILE, *_EXTRA)  # type: ignore[assignment]
    w64._call = _call
    w64._post = _post
    asyncio.run(w64._main(fd))


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
