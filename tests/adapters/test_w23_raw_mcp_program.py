"""A stdio MCP server on raw JSON lines (no SDK: nothing checks what it writes) that misbehaves per tool,
for tests/adapters/test_w23_mcp_misbehaving_servers.py. Run: ``python test_w23_raw_mcp_program.py NOTES``
(NOTES: a file each start, ``start PID``, and each call, ``call NAME``, is appended to).
``$W23_MODE=hang_after_init``: it answers ``initialize`` and nothing after it.

Tools (a ``*_write`` twin of each is a write tool):
``ok`` ("fine"); ``raw`` (writes ``bytes.fromhex(hex)`` as a line, ``{ID}`` replaced by the request's
id, then its answer "after"); ``hold`` (answered "held TEXT" only after the next ``release`` is answered:
answers out of order); ``release`` (then the held calls, in the order its text lists their indexes,
``2,0,1``; by default the last first); ``stranger`` (an answer to an id never sent, then its own);
``bad_utf8`` (its answer's text holds bytes that are not UTF-8); ``cut_exit`` (half its answer, no line
end, then the process exits); ``close_stdout`` (closes its output and goes on reading its input, never
exiting); ``not_a_result`` (a result whose content is not a list); ``changed`` (a tool list change
announced before the answer); ``close_stdin`` (answered, then its input closed: it reads nothing more
but runs on, its output open).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

_READ = {"readOnlyHint": True, "openWorldHint": False}
_WRITE = {"readOnlyHint": False, "destructiveHint": False, "openWorldHint": False}
KINDS: tuple[str, ...] = (
    "ok",
    "raw",
    "hold",
    "release",
    "stranger",
    "bad_utf8",
    "cut_exit",
    "close_stdout",
    "not_a_result",
    "changed",
    "close_stdin",
)
_SCHEMA = {"type": "object", "properties": {"hex": {"type": "string"}, "text": {"type": "string"}}}
_OUT: list[Any] = [sys.stdout.buffer]


def _send(message: dict[str, Any] | bytes, end: bytes = b"\n") -> None:
    data = message if isinstance(message, bytes) else json.dumps(message).encode()
    out = _OUT[0]
    if out is None:
        return
    out.write(data + end)
    out.flush()


def _answer(rid: Any, text: str) -> None:
    _send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": text}]}})


def _note(notes: str, line: str) -> None:
    with open(notes, "a") as out:
        out.write(line + "\n")


def _call(rid: Any, name: str, args: dict[str, Any], held: list[Any]) -> None:
    kind = name.removesuffix("_write")
    if kind == "ok":
        _answer(rid, "fine " + str(args.get("text", "")))
    elif kind == "raw":
        _send(bytes.fromhex(str(args.get("hex", ""))).replace(b"{ID}", json.dumps(rid).encode()))
        _answer(rid, "after")
    elif kind == "hold":
        held.append((rid, str(args.get("text", ""))))
    elif kind == "release":
        _answer(rid, "released")
        order = [int(n) for n in str(args.get("text") or "").split(",") if n]
        for n in order or reversed(range(len(held))):
            waiting, text = held[n]
            _answer(waiting, "held " + text)
        held.clear()
    elif kind == "stranger":
        stranger = rid + 1000 if isinstance(rid, int) else f"{rid}-not"
        _answer(stranger, "forged")
        _answer(rid, "mine")
    elif kind == "bad_utf8":
        head = json.dumps({"jsonrpc": "2.0", "id": rid}).encode()[:-1]
        _send(head + b', "result": {"content": [{"type": "text", "text": "bad \xff\xfe here"}]}}')
    elif kind == "cut_exit":
        _send(json.dumps({"jsonrpc": "2.0", "id": rid}).encode()[:-1] + b', "result": {"cont', end=b"")
        os._exit(0)
    elif kind == "close_stdout":
        _OUT[0].close()
        _OUT[0] = None
        os.close(1)
    elif kind == "not_a_result":
        _send({"jsonrpc": "2.0", "id": rid, "result": {"content": "not a list"}})
    elif kind == "close_stdin":
        _answer(rid, "deaf")
        os.close(0)
        while True:
            time.sleep(1)
    elif kind == "changed":
        _send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        _answer(rid, "changed")


def main(notes: str) -> None:
    _note(notes, f"start {os.getpid()}")
    hang = os.environ.get("W23_MODE") == "hang_after_init"
    held: list[Any] = []
    for line in sys.stdin.buffer:
        message = json.loads(line)
        method, rid = message.get("method"), message.get("id")
        if method is None or rid is None:
            continue
        if method == "initialize":
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "w23-raw", "version": "1"},
            }
            _send({"jsonrpc": "2.0", "id": rid, "result": result})
        elif hang:
            continue
        elif method == "tools/list":
            tools = [{"name": k, "inputSchema": _SCHEMA, "annotations": _READ} for k in KINDS]
            tools += [{"name": f"{k}_write", "inputSchema": _SCHEMA, "annotations": _WRITE} for k in KINDS]
            _send({"jsonrpc": "2.0", "id": rid, "result": {"tools": tools}})
        elif method == "tools/call":
            params = message["params"]
            _note(notes, f"call {params['name']}")
            _call(rid, params["name"], params.get("arguments") or {}, held)
        elif method == "ping":
            _send({"jsonrpc": "2.0", "id": rid, "result": {}})
        else:
            _send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"no {method}"}})
    while _OUT[0] is None:  # its output closed: it stays, as a server stuck without a way to answer
        time.sleep(1)


if __name__ == "__main__":
    main(sys.argv[1])
