"""A real stdio MCP server (the SDK's MCPServer) that can stop reading its input, for the tests of
tests/adapters/test_w22_mcp_stdio_stalls.py.

Run: ``python test_w22_mcp_stdio_stalls_program.py``. ``$W22_NOTES``: a file each start (``start PID``)
and each call (``call TOOL TEXT-PREFIX``) is noted in, one a line, as the call begins.

Tools: ``echo`` (a read, answers its text's length), ``note`` (a write: noted), ``freeze`` (a read that
holds the server's only thread for ``seconds``: it reads and answers nothing meanwhile, as a server stuck
in a busy loop). A test stops the whole process with ``SIGSTOP`` through the pid of its last start.
"""

from __future__ import annotations

import os
import time

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations


def _note(line: str) -> None:
    with open(os.environ["W22_NOTES"], "a") as notes:
        notes.write(line + "\n")


def main() -> None:
    _note(f"start {os.getpid()}")
    server = MCPServer("w22-stalls")
    read = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    write = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)

    @server.tool(annotations=read)
    def echo(text: str) -> int:
        """Answer the length of the text."""
        _note(f"call echo {text[:20]}")
        return len(text)

    @server.tool(annotations=write)
    def note(text: str) -> str:
        """Note the text (a write)."""
        _note(f"call note {text[:20]}")
        return f"noted {len(text)}"

    @server.tool(annotations=read)
    async def freeze(seconds: float) -> str:
        """Hold the event loop (and so the server's input) for ``seconds``."""
        _note("call freeze")
        time.sleep(seconds)
        return "thawed"

    server.run("stdio")


if __name__ == "__main__":
    main()
