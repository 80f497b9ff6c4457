"""A real MCP server (the SDK's MCPServer) that can die, come back changed, or not come back, for the
tests of tests/adapters/test_w19_mcp_reconnects.py and test_w19_mcp_served_bound.py.

Run: ``python test_w19_mcp_restarts_program.py stdio`` or ``... http FD`` (FD: a listening socket
inherited from the test; ``$W19_LAG_S``: how long each ``202 Accepted`` is held on its way back).
``$W19_NOTES``: a file each start and each write is noted in, one a line.
``$W19_PLAN``: a file whose first word says what this start does: ``a`` (serve the tools as first
listed), ``b`` (serve ``echo`` under the same name with another definition), ``die`` (exit at once,
before the handshake is answered) or ``mute`` (never answer anything). Missing: ``a``.

Tools: ``echo`` (a read); ``note`` (a write: noted as ``note TEXT``); ``note_then_die`` (a write noted
as ``got TEXT``, then the process ends without answering: a write whose answer is lost); ``crash``
(the process ends); ``asks`` (``count`` pings to the client, at most ``window`` of them unanswered at
a time, each waited for up to ``timeout_s``: answers "answered N lost M", an honest server).
"""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations


def _note(line: str) -> None:
    with open(os.environ["W19_NOTES"], "a") as notes:
        notes.write(line + "\n")


def _plan() -> str:
    path = os.environ.get("W19_PLAN")
    if not path or not Path(path).exists():
        return "a"
    words = Path(path).read_text().split()
    return words[0] if words else "a"


def _serve(argv: list[str]) -> None:
    plan = _plan()
    _note(f"start {plan} {os.getpid()}")
    if plan == "die":
        os._exit(4)
    if plan == "mute":
        while True:  # holds its stdin, or the socket's backlog, and answers nothing
            time.sleep(3600)
    server = MCPServer("w19-restarts")
    read = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    write = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)

    if plan == "b":

        def echo(text: str, times: int = 1) -> str:
            """Return the text repeated: another tool under the same name."""
            return text * times

    else:

        def echo(text: str) -> str:  # type: ignore[misc]
            """Return the text unchanged."""
            return text

    server.add_tool(echo, annotations=read)

    @server.tool(annotations=write)
    def note(text: str) -> str:
        """Note the text (a write)."""
        _note(f"note {text}")
        return f"noted {text}"

    @server.tool(annotations=write)
    def note_then_die(text: str) -> str:
        """Note the text, then end the process without answering."""
        _note(f"got {text}")
        os._exit(3)

    @server.tool(annotations=read)
    def crash() -> str:
        """End the process at once."""
        os._exit(3)

    @server.tool(annotations=read)
    async def asks(count: int, timeout_s: float, window: int, ctx: Context) -> str:
        """Ping the client ``count`` times, never more than ``window`` of them unanswered (or past their
        ``timeout_s``) at a time: an honest server, that waits for its answers before sending more."""
        done = {"answered": 0, "lost": 0}
        room = anyio.Semaphore(window)

        async def ping() -> None:
            try:
                with anyio.move_on_after(timeout_s) as scope:
                    await ctx.session.send_ping()
                done["lost" if scope.cancelled_caught else "answered"] += 1
            finally:
                room.release()

        async with anyio.create_task_group() as tg:
            for _ in range(count):
                await room.acquire()
                tg.start_soon(ping)
        return f"answered {done['answered']} lost {done['lost']}"

    if argv[1] == "stdio":
        server.run("stdio")
        return
    import uvicorn

    sock = socket.socket(fileno=int(argv[2]))
    app = server.streamable_http_app()
    lag_s = float(os.environ.get("W19_LAG_S", "0"))

    async def lagging(scope: Any, receive: Any, send: Any) -> None:
        """The app, with every ``202 Accepted`` (the status of a POSTed answer or notification, sent once
        the server has it) held ``lag_s`` on its way back: a client slow to see its answers' POSTs end."""

        async def sent(message: Any) -> None:
            if message.get("type") == "http.response.start" and message.get("status") == 202:
                await anyio.sleep(lag_s)
            await send(message)

        await app(scope, receive, sent)

    config = uvicorn.Config(lagging, log_level="warning", timeout_graceful_shutdown=1)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    _serve(sys.argv)
