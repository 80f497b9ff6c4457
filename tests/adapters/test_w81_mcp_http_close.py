"""Closing a session with an MCP server over streamable HTTP (a handshake-era one: the 2026 revision
has no sessions to end), whatever the server answers to the closing DELETE: ``Runtime.close()`` ends
within the transport's close deadline and the answer's body is never read (an endless body, a gzip
bomb, an error status with a bomb as its JSON body, no answer at all)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp_types.version import LATEST_HANDSHAKE_VERSION

from actionspace.adapters._mcp_http import CLOSE_TIMEOUT_S

PROGRAM = str(Path(__file__).with_name("test_w81_close_program.py"))


def start_program(notes: Path, version: str, modes: str) -> tuple[subprocess.Popen[bytes], str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    port = sock.getsockname()[1]
    env = {**os.environ, "W64_NOTES": str(notes)}
    argv = [sys.executable, PROGRAM, str(sock.fileno()), version, modes]
    proc = subprocess.Popen(argv, pass_fds=[sock.fileno()], env=env)
    sock.close()
    return proc, f"http://127.0.0.1:{port}/mcp"


_CLIENT = """
import json, resource, sys, time
def _hwm_mb():  # this process's own peak (ru_maxrss keeps the forking parent's across exec)
    with open("/proc/self/status") as f:
        return int(next(x for x in f if x.startswith("VmHWM")).split()[1]) // 1024

resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
from actionspace import Runtime
from actionspace.adapters.mcp_client import HttpServer
rt = Runtime("memory://", recover_on_start=False)
rt.add_mcp_server(HttpServer(sys.argv[1], name="w81", allowlisted=True, timeout_s=30.0))
first = rt.call({"name": "ok", "arguments": {}}, run_id=rt.new_run())
out = {"first": first.data, "base_mb": _hwm_mb()}
started = time.monotonic()
rt.close()
out["close_s"] = time.monotonic() - started
out["peak_mb"] = _hwm_mb()
print(json.dumps(out))
"""

_GROWTH_MB = 100
"""Peak RSS growth of the client while it closes a session whose DELETE answer is endless or a bomb."""


def closed(tmp_path: Path, era: str, modes: str) -> tuple[dict[str, Any], list[str]]:
    notes = tmp_path / "notes.txt"
    notes.touch()
    proc, url = start_program(notes, era, modes)
    try:
        done = subprocess.run(
            [sys.executable, "-c", _CLIENT, url], capture_output=True, text=True, timeout=120
        )
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert done.returncode == 0, done.stderr[-3000:]
    out: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return out, notes.read_text().splitlines()


@pytest.mark.parametrize("modes", ["delete_endless", "delete_bomb", "delete_error_bomb", "delete_stall"])
def test_closing_ends_within_its_deadline_and_never_reads_the_delete_answer(
    tmp_path: Path, modes: str
) -> None:
    out, lines = closed(tmp_path, LATEST_HANDSHAKE_VERSION, modes)
    assert out["first"] == "fine"
    assert "DELETE /mcp" in lines  # the session was ended as the protocol asks
    assert out["close_s"] < CLOSE_TIMEOUT_S + 2.0, out
    assert out["peak_mb"] - out["base_mb"] < _GROWTH_MB, out


def test_closing_a_well_behaved_server_does_not_wait_for_the_deadline(tmp_path: Path) -> None:
    out, lines = closed(tmp_path, LATEST_HANDSHAKE_VERSION, "none")
    assert "DELETE /mcp" in lines
    assert out["close_s"] < 1.5, out
