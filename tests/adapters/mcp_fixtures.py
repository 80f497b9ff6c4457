"""Real MCP servers for the adapter's tests: the SDK test server (stdio, HTTP) and PyPI servers."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from actionspace import Runtime
from actionspace.adapters.mcp_client import StdioServer

HERE = Path(__file__).resolve().parent
TEST_SERVER = str(HERE / "mcp_test_server.py")
ROOT = HERE.parent.parent
CONNECT_TIMEOUT_S = 120.0
"""Starting a Python server on a loaded two-core CI machine can take tens of seconds."""


def sdk_server_stdio(**options: object) -> StdioServer:
    """The SDK-built test server over stdio."""
    options.setdefault("connect_timeout_s", CONNECT_TIMEOUT_S)
    return StdioServer(sys.executable, args=(TEST_SERVER, "stdio"), name="test", **options)  # type: ignore[arg-type]


def time_server(**options: object) -> StdioServer:
    """mcp-server-time from PyPI."""
    options.setdefault("connect_timeout_s", CONNECT_TIMEOUT_S)
    return StdioServer(sys.executable, args=("-m", "mcp_server_time"), name="time", **options)  # type: ignore[arg-type]


def start_http_server() -> tuple[subprocess.Popen[bytes], str]:
    """The test server over streamable HTTP, on a socket bound here (no port race, no wait)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, TEST_SERVER, "http", str(sock.fileno())], pass_fds=[sock.fileno()]
    )
    sock.close()
    return proc, f"http://127.0.0.1:{port}/mcp"


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop the test server at once (it holds no state worth a graceful shutdown)."""
    proc.kill()
    proc.wait(timeout=30)


@pytest.fixture
def http_url() -> Iterator[str]:
    proc, url = start_http_server()
    try:
        yield url
    finally:
        stop(proc)


@pytest.fixture
def rt() -> Iterator[Runtime]:
    runtime = Runtime("memory://", recover_on_start=False)
    try:
        yield runtime
    finally:
        runtime.close()


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    if shutil.which("git") is None:
        pytest.fail("git is needed by mcp-server-git (Debian package git)")
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {**os.environ, "GIT_CONFIG_GLOBAL": str(tmp_path / "gitconfig")}
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True, env=env)
    for key, value in (("user.name", "Test"), ("user.email", "test@example.invalid")):
        subprocess.run(["git", "-C", str(repo), "config", key, value], check=True)
    (repo / "notes.txt").write_text("first\n")
    return repo


@pytest.fixture(scope="session")
def sqlite_server_command() -> str:
    """mcp-server-sqlite from PyPI, in its own venv (it needs the mcp 1.x server API)."""
    out = subprocess.run(
        ["bash", str(ROOT / "scripts" / "mcp_sqlite_venv.sh")],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return str(Path(out.stdout.strip().splitlines()[-1]) / "bin" / "mcp-server-sqlite")
