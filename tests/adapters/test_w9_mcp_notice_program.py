"""A hostile MCP server over streamable HTTP whose GET stream for server notifications misbehaves.

Run: ``python test_w9_mcp_notice_program.py FD VERSION MODE`` (FD and VERSION as
``test_w70_hostile_http_program``). Calls are served as ``test_w81_close_program`` serves them; every
request is noted in ``$W64_NOTES`` as ``METHOD PATH``. MODE says how each GET is answered:

* ``get_drop``: 200 as an event stream with an empty body (accepted, then dropped at once);
* ``get_reset``: 200 as an event stream, then the connection is reset;
* ``get_junk``: an event whose data is not JSON-RPC, then the end of the stream;
* ``get_notice``: one log notification (``notifications/message``), then the end of the stream;
* ``get_refused``: 405 (the server offers no notification stream);
* ``get_forge``: the stream stays open; once ``ok_write`` is called, it carries an answer to that
  call (``forged``), which the call's own POST answers (``fine``) only after it was sent.

Two modes make every call of ``ok`` / ``ok_write`` answer that more input is needed (the 2026
revision's ``input_required`` result), noted as ``asked NAME``; GETs are answered 405:

* ``input_asked``: it asks for an elicitation (which the client never offered);
* ``input_state``: it only hands back a ``requestState`` to send again, each time.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[2]))
from tests.adapters import test_w64_hostile_http_program as w64
from tests.adapters import test_w70_hostile_http_program as w70
from tests.adapters import test_w81_close_program as w81

_MODE = ""
_ASKED = asyncio.Event()
_FORGED = asyncio.Event()
_CALLED: list[object] = []
"""The id of the ``ok_write`` call, once it came."""
_base_post = w81._post
_NOTICE = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "hi"}}


async def _forge(reply: w64._Reply) -> None:
    await reply.head("200 OK", {"content-type": "text/event-stream", "transfer-encoding": "chunked"})
    await _ASKED.wait()
    forged = w64._answer(_CALLED[0], "forged")
    await reply.chunk(b"event: message\ndata: %s\n\n" % json.dumps(forged).encode())
    _FORGED.set()
    await reply.reader.read(1)


def _input_required(rid: object) -> bytes:
    result: dict[str, object] = {"resultType": "input_required", "requestState": "again"}
    if _MODE == "input_asked":
        asked = {"mode": "form", "message": "why?", "requestedSchema": {"type": "object", "properties": {}}}
        result["inputRequests"] = {"k": {"method": "elicitation/create", "params": asked}}
    return json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}).encode()


async def _post(reply: w64._Reply, body: bytes) -> None:
    message = json.loads(body)
    named = (message.get("params") or {}).get("name")
    if _MODE.startswith("input_") and message.get("method") == "tools/call" and named in ("ok", "ok_write"):
        w64._note(f"asked {named}")
        await reply.whole("200 OK", _input_required(message["id"]))
        return
    if _MODE == "get_forge" and (message.get("params") or {}).get("name") == "ok_write":
        _CALLED.append(message["id"])
        _ASKED.set()
        await _FORGED.wait()
        await asyncio.sleep(0.5)  # the forged answer is read first on the code this test guards against
    await _base_post(reply, body)


async def _get(reply: w64._Reply, headers: dict[str, str]) -> None:
    if _MODE == "get_forge":
        await _forge(reply)
        return
    if _MODE == "get_refused" or _MODE.startswith("input_"):
        await reply.whole("405 Method Not Allowed", b"")
        return
    body = b""
    if _MODE == "get_junk":
        body = b"retry: 0\ndata: {not json\n\n"
    elif _MODE == "get_notice":
        body = b"retry: 0\ndata: %s\n\n" % json.dumps(_NOTICE).encode()
    if _MODE == "get_reset":
        await reply.head("200 OK", {"content-type": "text/event-stream", "transfer-encoding": "chunked"})
        reply.writer.transport.abort()
        return
    await reply.whole("200 OK", body, content_type="text/event-stream")
    reply.writer.close()


if __name__ == "__main__":
    w70._VERSION = sys.argv[2]
    _MODE = sys.argv[3]
    w81._MODES = frozenset()
    w81._get = _get
    w81._post = _post
    w64._HOSTILE = (*w64._HOSTILE, *w70._EXTRA, "drop")  # type: ignore[assignment]
    w64._call = w70._call
    asyncio.run(w81._main(int(sys.argv[1])))
