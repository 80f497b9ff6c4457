"""A server that hangs on start or on shutdown: adding it and closing the runtime end on time, and
no server process is left running (nor unreaped) behind either."""

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
from actionspace.adapters.mcp_client import HttpServer, StdioServer
from actionspace.errors import ConfigurationError

PROGRAM = str(Path(__file__).with_name("test_w56_hostile_mcp_program.py"))
CONNECT_S = 4.0
SHUTDOWN_GRACE_S = 8.0
"""Stopping a server that ignores its stdin closing and SIGTERM: the SDK waits 2 s, then 2 s, then kills."""


def hostile_stdio(mode: str, **options: object) -> StdioServer:
    options.setdefault("connect_timeout_s", 120.0)
    return StdioServer(sys.executable, args=(PROGRAM, mode, "stdio"), name="w56", **options)  # type: ignore[arg-type]


def program_children() -> list[tuple[int, str]]:
    """(pid, state) of every child process of this one that runs the hostile program, zombies too."""
    found: list[tuple[int, str]] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == os.getpid() and (PROGRAM.encode() in cmdline or fields[0] == "Z"):
            found.append((int(entry), fields[0]))
    return found


@pytest.fixture
def rt() -> Iterator[Runtime]:
    runtime = Runtime("memory://", recover_on_start=False)
    try:
        yield runtime
    finally:
        runtime.close()
        for pid, _ in program_children():  # never leave a test's server behind, whatever failed
            os.kill(pid, 9)


def test_a_stdio_server_that_never_answers_the_handshake_fails_on_time_and_leaves_no_process(
    rt: Runtime,
) -> None:
    started = time.monotonic()
    with pytest.raises(ConfigurationError, match="cannot connect"):
        rt.add_mcp_server(hostile_stdio("hang_start", connect_timeout_s=CONNECT_S))
    assert time.monotonic() - started < CONNECT_S + SHUTDOWN_GRACE_S
    assert program_children() == []


def test_an_async_add_of_a_server_that_never_answers_fails_on_time_and_leaves_no_process(rt: Runtime) -> None:
    async def add() -> None:
        await rt.aadd_mcp_server(hostile_stdio("hang_start", connect_timeout_s=CONNECT_S))

    started = time.monotonic()
    with pytest.raises(ConfigurationError, match="cannot connect"):
        asyncio.run(add())
    assert time.monotonic() - started < CONNECT_S + SHUTDOWN_GRACE_S
    assert program_children() == []


def test_an_http_server_that_accepts_but_never_answers_fails_within_the_connect_timeout(rt: Runtime) -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, PROGRAM, "hang_start", "http", str(sock.fileno())], pass_fds=[sock.fileno()]
    )
    sock.close()
    try:
        started = time.monotonic()
        with pytest.raises(ConfigurationError, match="cannot connect"):
            rt.add_mcp_server(
                HttpServer(f"http://127.0.0.1:{port}/mcp", name="w56", connect_timeout_s=CONNECT_S)
            )
        assert time.monotonic() - started < CONNECT_S + 3.0  # nothing to stop: the HTTP client just closes
    finally:
        proc.kill()
        proc.wait(timeout=30)


def test_closing_the_runtime_stops_a_server_that_ignores_shutdown_on_time_and_reaps_it() -> None:
    runtime = Runtime("memory://", recover_on_start=False)
    try:
        runtime.add_mcp_server(hostile_stdio("hang_shutdown"))
        assert len(program_children()) == 1
    finally:
        started = time.monotonic()
        runtime.close()
    assert time.monotonic() - started < SHUTDOWN_GRACE_S
    assert program_children() == []


def test_a_server_added_after_one_failed_to_start_connects_and_serves(rt: Runtime) -> None:
    with pytest.raises(ConfigurationError):
        rt.add_mcp_server(hostile_stdio("hang_start", connect_timeout_s=CONNECT_S))
    toolset = rt.add_mcp_server(hostile_stdio("normal", allowlisted=True))
    obs = rt.call({"name": "is_error", "arguments": {}}, run_id=rt.new_run())
    assert obs.error is not None and obs.error.message == "no such city"
    assert "die" in toolset.specs()
