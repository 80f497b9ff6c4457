"""A hostile MCP server over streamable HTTP that misbehaves outside a call's answer: on the closing
DELETE, on the GET stream for server notifications and on the POST of a notification.

Run: ``python test_w81_close_program.py FD VERSION MODES`` (FD and VERSION as
``test_w70_hostile_http_program``; MODES: a comma-separated list of the misbehaviours below). Every
request is noted in ``$W64_NOTES`` as ``METHOD PATH`` besides the lines the w64 server writes.

* ``delete_endless``: the DELETE is answered 200 with a plain chunked body that never ends;
* ``delete_bomb``: the DELETE is answered 200 with about 5 GB of zeros as a gzip body;
* ``delete_error_bomb``: the DELETE is answered 500 with a gzip bomb as its JSON body;
* ``delete_stall``: the DELETE gets no answer at all (the connection stays open);
* ``get_error_stall``: the GET stream is answered 400 with a JSON body that never comes;
* ``get_retry_zero``: the GET stream is answered with one event saying ``retry: 0`` and then closed;
* ``notice_stall``: a ``notifications/cancelled`` POST is answered 400 with a JSON body that never
  comes; ``stall_write`` (the w64 tool) makes the client send one;
* ``notice_silent``: a ``notifications/cancelled`` POST gets no answer at all;
* ``notice_reset``: a ``notifications/cancelled`` POST is read, then its connection reset unanswered
  (noted as ``reset METHOD``);
* ``initialized_reset``: the same for the ``notifications/initialized`` POST of the handshake;
* ``answer_drop``: the ``drop`` / ``drop_write`` tools and ``subscriptions/listen`` are answered with
  an SSE stream of one priming event (an ``id``, ``retry: 0``) that then ends; so is every GET that
  resumes an answer (one with ``Last-Event-ID``), each noted as ``resume ID``; with ``resume_error``
  too, such a GET is answered 503 instead.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[2]))
from tests.adapters import test_w64_hostile_http_program as w64
from tests.adapters import test_w70_hostile_http_program as w70

_MODES: frozenset[str] = frozenset()
_DROPPED = ("drop", "drop_write")
"""The tools whose answer ``answer_drop`` drops (listed in every mode)."""
_RESETS = {"notice_reset": "notifications/cancelled", "initialized_reset": "notifications/initialized"}


async def _dropped(reply: w64._Reply, event_id: int) -> None:
    """An SSE answer of one priming event, then the end of the connection: resumable, never answered."""
    event = b"id: %d\nretry: 0\ndata:\n\n" % event_id
    await reply.whole("200 OK", event, content_type="text/event-stream")
    reply.writer.close()


async def _delete(reply: w64._Reply) -> None:
    if "delete_endless" in _MODES:
        await reply.chunked("application/octet-stream")
        while True:
            await reply.chunk(b"x" * (1 << 20))
    elif "delete_bomb" in _MODES:
        start, block, _ = w64._gzip_of_zeros(0)
        await reply.chunked("application/json", "gzip")
        await reply.chunk(start)
        for _ in range(5 * 64):
            await reply.chunk(block * 16)
        await reply.chunk(b"")
    elif "delete_error_bomb" in _MODES:
        await w64._gzip(reply, sse=False, status="500 Internal Server Error")
    elif "delete_stall" in _MODES:
        await reply.reader.read(1)
    else:
        await reply.whole("200 OK", b"")


async def _get(reply: w64._Reply, headers: dict[str, str]) -> None:
    resumed = headers.get("last-event-id")
    if "answer_drop" in _MODES and resumed is not None:
        w64._note(f"resume {resumed}")
        if "resume_error" in _MODES:
            await reply.whole("503 Service Unavailable", b"")
        else:
            await _dropped(reply, int(resumed) + 1 if resumed.isdigit() else 1)
    elif "get_error_stall" in _MODES:
        headers = {"content-type": "application/json", "content-length": "100000"}
        await reply.head("400 Bad Request", headers)
        await reply.reader.read(1)
    elif "get_retry_zero" in _MODES:
        await reply.whole("200 OK", b"retry: 0\ndata:\n\n", content_type="text/event-stream")
        reply.writer.close()
    else:
        await reply.whole("405 Method Not Allowed", b"")


async def _post(reply: w64._Reply, body: bytes) -> None:
    message = json.loads(body)
    method = message.get("method")
    if any(mode in _MODES and method == reset for mode, reset in _RESETS.items()):
        w64._note(f"reset {method}")
        reply.writer.transport.abort()
        return
    named = (message.get("params") or {}).get("name")
    if "answer_drop" in _MODES and (method == "subscriptions/listen" or named in _DROPPED):
        w64._note(f"dropped {named or method}")
        await _dropped(reply, 1)
        return
    if "notice_stall" in _MODES and message.get("method") == "notifications/cancelled":
        headers = {"content-type": "application/json", "content-length": "100000"}
        await reply.head("400 Bad Request", headers)
        await reply.reader.read(1)
        return
    if "notice_silent" in _MODES and message.get("method") == "notifications/cancelled":
        await reply.reader.read(1)
        return
    await w70._post(reply, message)


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    reply = w64._Reply(reader, writer)
    try:
        while not writer.is_closing():
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path = lines[0].split(" ")[:2]
            headers = {
                k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])
            }
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            w64._note(f"{method} {path}")
            if method == "POST":
                await _post(reply, body)
            elif method == "DELETE":
                await _delete(reply)
            else:
                await _get(reply, headers)
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
    _MODES = frozenset(sys.argv[3].split(","))
    w64._HOSTILE = (*w64._HOSTILE, *w70._EXTRA, "drop")  # type: ignore[assignment]
    w64._call = w70._call
    asyncio.run(_main(int(sys.argv[1])))
