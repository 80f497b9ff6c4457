"""A raw stdio MCP server (JSON-RPC lines, no SDK) whose notifications are hostile, started by
the w13 tests as a subprocess: ``python test_w13_notice_program.py KIND [TOOLS]``.

It answers the initialize handshake and ``tools/list`` (``TOOLS`` tools, default 2, listed in
pages of 500), and ``ping``. Before it answers a call of ``noisy`` it sends notifications of
``KIND``: ``deep`` (a log message and a progress note nested 90,000 levels deep), ``huge`` (log
messages and a progress message of 20 MB), ``many`` (12,000 small log and progress notes and
list-changed notices), ``endless`` (progress and log notes forever, never an answer), ``odd``
(notifications of unknown methods, of known methods with wrong params, and a server-sent
``notifications/cancelled`` for the call itself); ``quiet`` sends none. ``echo`` answers at once.
"""

from __future__ import annotations

import json
import sys
from typing import Any

_OBJ = {"type": "object", "properties": {}}
_PAGE = 500


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")


def note(method: str, params: Any) -> None:
    send({"jsonrpc": "2.0", "method": method, "params": params})


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def noise(kind: str, rid: Any, request_params: dict[str, Any] | None = None) -> None:
    if kind == "deep":
        deep = nested(90_000)
        sys.stdout.write('{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":')
        sys.stdout.write(deep + "}}\n")
        sys.stdout.write('{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,')
        sys.stdout.write('"progress":1,"message":"x","_meta":{"x":' + deep + "}}}\n")
    elif kind == "huge":
        big = "y" * 20_000_000
        for _ in range(3):
            note("notifications/message", {"level": "error", "logger": big[:100_000], "data": big})
        note("notifications/progress", {"progressToken": "t", "progress": 1, "message": big})
    elif kind == "many":
        for i in range(12_000):
            if i % 3 == 0:
                note("notifications/message", {"level": "debug", "data": {"i": i}})
            elif i % 3 == 1:
                note("notifications/progress", {"progressToken": f"t{i % 11}", "progress": i})
            else:
                note("notifications/tools/list_changed", {})
    elif kind == "endless":  # never answers: notes about the call, forever
        token = ((request_params.get("_meta") or {}).get("progressToken")) if request_params else None
        i = 0
        while True:
            note(
                "notifications/progress",
                {"progressToken": token if token is not None else "t", "progress": i},
            )
            note("notifications/message", {"level": "info", "data": i})
            sys.stdout.flush()
            i += 1
    elif kind == "odd":
        note("notifications/whatever", {"a": [1, {"b": None}]})
        note("notifications/message", {"level": "not-a-level", "data": 1})
        note("notifications/message", "not an object")
        note("notifications/progress", {"progressToken": {"nested": [1]}, "progress": "lots"})
        note("notifications/resources/updated", {"uri": 7})
        note("notifications/cancelled", {"requestId": rid, "reason": "server says so"})
        note("notifications/tools/list_changed", {"unexpected": ["x"] * 1000})
    sys.stdout.flush()


def answer(request: dict[str, Any], kind: str, count: int) -> None:
    rid, method = request.get("id"), request.get("method")
    params = request.get("params") or {}
    if method == "initialize":
        result: Any = {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {"listChanged": True}, "logging": {}},
            "serverInfo": {"name": "w13-notices", "version": "1"},
        }
    elif method == "tools/list":
        start = int(params.get("cursor") or 0)
        names = ["noisy", "echo"] + [f"t{i}" for i in range(max(0, count - 2))]
        page = names[start : start + _PAGE]
        result = {"tools": [{"name": n, "inputSchema": _OBJ} for n in page]}
        if start + _PAGE < len(names):
            result["nextCursor"] = str(start + _PAGE)
    elif method == "tools/call":
        if params.get("name") == "noisy":
            noise(kind, rid, params)
        result = {"content": [{"type": "text", "text": f"done {params.get('name')}"}]}
    elif method == "ping":
        result = {}
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"no {method}"}})
        sys.stdout.flush()
        return
    send({"jsonrpc": "2.0", "id": rid, "result": result})
    sys.stdout.flush()


def main() -> None:
    kind = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    for line in sys.stdin:
        try:
            request = json.loads(line)
        except ValueError:
            continue
        if isinstance(request, dict) and "id" in request and "method" in request:
            answer(request, kind, count)


if __name__ == "__main__":
    main()
