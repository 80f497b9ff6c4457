"""A stdio MCP server on raw JSON lines (no SDK, so nothing checks what it writes) whose answers name
their request badly, for tests/adapters/test_w17_mcp_answer_ids.py. Run: ``python
test_w17_hostile_ids_program.py NOTES`` (NOTES: a file each call's tool name is appended to).

It speaks the handshake-era protocol. Each tool's name says what its call gets: ``ok`` ("fine");
``null_parse`` and ``null_again`` (a parse error with ``"id": null``, as JSON-RPC answers a request it
could not read);
``null_other`` (an internal error with a null id, which JSON-RPC does not allow); ``no_id_result`` (a
result without an id); ``no_id_error`` (a parse error without an id member); ``string_id`` (the answer
under the request's id as a string); ``spaced_id`` (as a string with a space before it, which the SDK
also reads as the number); ``hold`` (answered "held" only once the client cancels another request);
``glued`` (a line of junk holding ``starts`` message starts, each the head of an array running to the
line's end, then the answer: ``mb`` megabytes in all); ``flood`` (``count`` resource updates, then the
answer); ``asks`` (``count`` ``roots/list`` requests to the client, then the answer, then ``pause``
seconds before it reads its input again; the requests' ids are ``askN``, or ``lateN`` when ``late`` is
1; each answer it gets from the client is noted as ``answer ID``).
A ``*_write`` twin is a write tool.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

_READ = {"readOnlyHint": True, "openWorldHint": False}
_WRITE = {"readOnlyHint": False, "destructiveHint": False, "openWorldHint": False}
KINDS = (
    "ok",
    "null_parse",
    "null_again",
    "null_other",
    "no_id_result",
    "no_id_error",
    "string_id",
    "spaced_id",
    "hold",
    "glued",
    "flood",
    "asks",
)
_NUMBERS = ("starts", "mb", "count", "pause", "late")
_SCHEMA = {"type": "object", "properties": {n: {"type": "number"} for n in _NUMBERS}}


def _send(message: dict[str, Any] | bytes) -> None:
    data = message if isinstance(message, bytes) else json.dumps(message).encode()
    sys.stdout.buffer.write(data + b"\n")
    sys.stdout.buffer.flush()


def _result(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}]}


def _glued(rid: Any, starts: int, mb: int) -> bytes:
    answer = json.dumps({"jsonrpc": "2.0", "id": rid, "result": _result("glued")}).encode()
    piece = (mb << 20) // max(starts, 1)
    return b"junk" + (b'{"result":[' + b"1," * (piece // 2)) * starts + answer


def _call(notes: str, rid: Any, name: str, args: dict[str, Any], held: list[Any]) -> None:
    with open(notes, "a") as out:
        out.write(name + "\n")
    kind = name.removesuffix("_write")
    if kind == "ok":
        _send({"jsonrpc": "2.0", "id": rid, "result": _result("fine")})
    elif kind in ("null_parse", "null_again"):
        _send({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})
    elif kind == "null_other":
        _send({"jsonrpc": "2.0", "id": None, "error": {"code": -32603, "message": "went wrong"}})
    elif kind == "no_id_result":
        _send({"jsonrpc": "2.0", "result": _result("forged")})
    elif kind == "no_id_error":
        _send({"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}})
    elif kind == "string_id":
        _send({"jsonrpc": "2.0", "id": str(rid), "result": _result("forged")})
    elif kind == "spaced_id":
        _send({"jsonrpc": "2.0", "id": f" {rid}", "result": _result("forged")})
    elif kind == "hold":
        held.append(rid)
    elif kind == "glued":
        _send(_glued(rid, int(args.get("starts", 30)), int(args.get("mb", 30))))
    elif kind == "flood":
        update = json.dumps(
            {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "x:y"}}
        )
        sys.stdout.buffer.write((update.encode() + b"\n") * int(args.get("count", 1000)))
        _send({"jsonrpc": "2.0", "id": rid, "result": _result("flooded")})
    elif kind == "asks":
        tag = "late" if args.get("late") else "ask"
        for n in range(int(args.get("count", 1000))):
            asking = {"jsonrpc": "2.0", "id": f"{tag}{n}", "method": "roots/list"}
            sys.stdout.buffer.write(json.dumps(asking).encode() + b"\n")
        _send({"jsonrpc": "2.0", "id": rid, "result": _result("asked")})
        time.sleep(float(args.get("pause", 0)))


def main(notes: str) -> None:
    held: list[Any] = []
    for line in sys.stdin.buffer:
        message = json.loads(line)
        method, rid = message.get("method"), message.get("id")
        if method is None:
            with open(notes, "a") as out:
                out.write(f"answer {message.get('id')}\n")
        elif method == "notifications/cancelled":
            for waiting in held:  # another call given up: the held ones are answered now
                _send({"jsonrpc": "2.0", "id": waiting, "result": _result("held")})
            held.clear()
        elif rid is None:
            continue
        elif method == "initialize":
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": "w17-ids", "version": "1"},
            }
            _send({"jsonrpc": "2.0", "id": rid, "result": result})
        elif method == "tools/list":
            tools = [{"name": k, "inputSchema": _SCHEMA, "annotations": _READ} for k in KINDS]
            tools += [{"name": f"{k}_write", "inputSchema": _SCHEMA, "annotations": _WRITE} for k in KINDS]
            extra = int(os.environ.get("W17_MORE_TOOLS", "0"))  # for measuring the cost of a listing
            tools += [
                {"name": f"more{n}", "description": "More.", "inputSchema": _SCHEMA} for n in range(extra)
            ]
            _send({"jsonrpc": "2.0", "id": rid, "result": {"tools": tools}})
        elif method == "tools/call":
            params = message["params"]
            _call(notes, rid, params["name"], params.get("arguments") or {}, held)
        else:
            _send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"no {method}"}})


if __name__ == "__main__":
    main(sys.argv[1])
