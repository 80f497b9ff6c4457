"""A server over streamable HTTP that floods the client with its own requests (``ping``) on a call's SSE
answer and never takes the client's answers to them (``test_w18_flood_http_program.py``): at most
``MAX_SERVED`` of them are handed to the session at a time, as over stdio, so the client holds a bounded
number of tasks, whatever the ids (all distinct, or one id again and again); and the answers it does
write wait on no call of its own, so the next call is answered at once."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from actionspace import Runtime
from actionspace.adapters._mcp_inflight import MAX_SERVED
from actionspace.adapters.mcp_client import HttpServer, McpToolset
from actionspace.catalog.spec import NO_RETRY

PROGRAM = str(Path(__file__).with_name("test_w18_flood_http_program.py"))
FLOOD = 20_000
CALL_S = 120.0
"""A call's timeout: far beyond reading the flood on any machine."""
NEXT_S = 30.0
"""The call after the flood is answered well within this (before, it waited behind every answer)."""


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    return tmp_path / "notes.txt"


@pytest.fixture
def endpoint(notes: Path) -> Iterator[str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    env = {**os.environ, "W18_NOTES": str(notes)}
    proc = subprocess.Popen([sys.executable, PROGRAM, str(sock.fileno())], pass_fds=[sock.fileno()], env=env)
    sock.close()
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait(timeout=30)


@pytest.fixture
def served(endpoint: str) -> Iterator[tuple[Runtime, McpToolset]]:
    rt = Runtime("memory://", recover_on_start=False)
    options = {name: {"timeout_s": CALL_S, "retry": NO_RETRY} for name in ("ok", "asks")}
    server = HttpServer(endpoint, name="w18", allowlisted=True, mode="legacy", tool_options=options)
    toolset = rt.add_mcp_server(server)
    try:
        yield rt, toolset
    finally:
        rt.close()


async def _tasks() -> int:
    return len(asyncio.all_tasks())


def tasks_of(toolset: McpToolset) -> int:
    """How many tasks the server's connection holds on its own loop."""
    return toolset.connection.submit(_tasks()).result(timeout=60)


def answers(notes: Path) -> int:
    return sum(line.startswith("answer ") for line in notes.read_text().splitlines()) if notes.exists() else 0


@pytest.mark.parametrize("get", [0, 1], ids=["on_the_answer", "on_the_notification_stream"])
@pytest.mark.parametrize("same", [0, 1], ids=["distinct_ids", "one_id_again_and_again"])
def test_a_flood_of_requests_over_http_holds_a_bounded_number_of_tasks_and_starves_no_call(
    served: tuple[Runtime, McpToolset], notes: Path, same: int, get: int
) -> None:
    rt, toolset = served
    before, listings = tasks_of(toolset), toolset.connection.refreshes
    arguments = {"count": FLOOD, "same": same, "get": get}
    obs = rt.call({"name": "asks", "arguments": arguments}, run_id=rt.new_run())
    assert obs.status == "ok" and obs.data == "asked", obs.error
    if get:  # the requests come on another stream than the answer: wait for the listing at the flood's end
        flooded = time.monotonic() + NEXT_S * 2
        while toolset.connection.refreshes == listings and time.monotonic() < flooded:
            time.sleep(0.05)
    # each request handed on costs a task until its answer is written; the rest are dropped unanswered
    assert tasks_of(toolset) - before < 4 * MAX_SERVED
    started = time.monotonic()
    nxt = rt.call({"name": "ok", "arguments": {}}, run_id=rt.new_run())
    assert nxt.status == "ok" and nxt.data == "fine", nxt.error
    assert time.monotonic() - started < NEXT_S
    assert answers(notes) <= MAX_SERVED
