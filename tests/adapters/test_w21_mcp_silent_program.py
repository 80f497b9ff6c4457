"""A real MCP server over streamable HTTP (the SDK's MCPServer) that keeps its own record of what reached
it, for ``test_w21_mcp_silent_servers.py``.

Run: ``python test_w21_mcp_silent_program.py FD`` (FD: a listening socket inherited from the test).
``$W21_NOTES``: a file each message is noted in, one a line, as the server reads its POST's body:
``call NAME TEXT`` for a ``tools/call`` (its ``text`` argument), ``cancelled ID`` for a
``notifications/cancelled``, ``post METHOD`` for anything else. ``$W21_HOLD_CANCELS_S``: how long the
answer (``202 Accepted``) to the POST of a ``notifications/cancelled`` is held: a server that takes its
notice and never says so (default 0).

Tools: ``echo`` (a read), ``note`` (a write), ``slow`` (a read that takes ``seconds``).
"""

from __future__ import annotations

import json
import os
import socket
import sys
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations


def _note(line: str) -> None:
    with open(os.environ["W21_NOTES"], "a") as notes:
        notes.write(line + "\n")


def _noted(body: bytes) -> bool:
    """Note what ``body`` holds; whether it is a ``notifications/cancelled``."""
    try:
        message = json.loads(body)
    except ValueError:
        return False
    if not isinstance(message, dict):
        return False
    method = message.get("method")
    params = message.get("params") or {}
    if method == "tools/call":
        _note(f"call {params.get('name')} {(params.get('arguments') or {}).get('text')}")
    elif method == "notifications/cancelled":
        _note(f"cancelled {params.get('requestId')}")
        return True
    else:
        _note(f"post {method}")
    return False


def main(fd: int) -> None:
    import uvicorn

    server = MCPServer("w21-silent")
    read = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    write = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)

    @server.tool(annotations=read)
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool(annotations=write)
    def note(text: str) -> str:
        """Note the text (a write)."""
        return f"noted {text}"

    @server.tool(annotations=read)
    async def slow(text: str, seconds: float) -> str:
        """Return the text after ``seconds``."""
        await anyio.sleep(seconds)
        return text

    app = server.streamable_http_app()
    hold_s = float(os.environ.get("W21_HOLD_CANCELS_S", "0"))

    async def recording(scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") != "http" or scope.get("method") != "POST":
            await app(scope, receive, send)
            return
        body = bytearray()
        cancels = False

        async def received() -> Any:
            nonlocal cancels
            message = await receive()
            if message.get("type") == "http.request":
                body.extend(message.get("body", b""))
                if not message.get("more_body"):
                    cancels = _noted(bytes(body))
            return message

        async def sent(message: Any) -> None:
            if message.get("type") == "http.response.start" and message.get("status") == 202 and cancels:
                await anyio.sleep(hold_s)
            await send(message)

        await app(scope, received, sent)

    config = uvicorn.Config(recording, log_level="warning", timeout_graceful_shutdown=1)
    uvicorn.Server(config).run(sockets=[socket.socket(fileno=fd)])


if __name__ == "__main__":
    main(int(sys.argv[1]))
