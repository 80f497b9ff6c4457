"""Shared set-up of the gateway tests: a config file, a desk database, clients of the real gateway."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
from mcp.client.session import ClientSession, MessageHandlerFnT
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.adapters.gateway_sample_tools import DB_ENV

HERE = Path(__file__).parent
ALICE_TOKEN = "alice-token-0123456789"
BOB_TOKEN = "bob-token-0123456789ab"
EXE = Path(sys.executable).parent / "actionspace"


def write_config(
    folder: Path, *, upstream_time: bool = False, upstream_lab: bool = False, tools: str = "DESK"
) -> Path:
    """A gateway config serving the sample desk (and, when asked, the PyPI time server or the
    SDK-built test server whose tool list changes on demand)."""
    upstream = ""
    if upstream_time:
        upstream += f"""
[[upstreams]]
name = "time"
command = [{str(sys.executable)!r}, "-m", "mcp_server_time", "--local-timezone", "UTC"]
allowlisted = true
"""
    if upstream_lab:
        upstream += f"""
[[upstreams]]
name = "lab"
command = [{str(sys.executable)!r}, {str(HERE / "mcp_test_server.py")!r}, "stdio"]
allowlisted = true
"""
    text = f"""
[gateway]
name = "desk"
store = "sqlite:///gateway.db"
stdio_principal = "alice"
pythonpath = [{str(HERE)!r}]

[approval]
effects = ["external"]

[[tools]]
import = "gateway_sample_tools:{tools}"
{upstream}
[[principals]]
id = "alice"
token = "{ALICE_TOKEN}"
scopes = ["read:*", "none:*", "write:create_ticket", "write:open_ticket_then_hang", "external:*"]

[[principals]]
id = "bob"
token = "{BOB_TOKEN}"
scopes = ["read:*"]
"""
    path = folder / "gateway.toml"
    path.write_text(text, encoding="utf-8")
    return path


def store_url(folder: Path) -> str:
    return "sqlite:///" + str((folder / "gateway.db").resolve())


def desk_env(folder: Path) -> dict[str, str]:
    return {DB_ENV: str(folder / "desk.db")}


@asynccontextmanager
async def stdio_session(
    config: Path, *, token: str | None = None, message_handler: MessageHandlerFnT | None = None
) -> AsyncIterator[ClientSession]:
    """An initialized official-client session with ``actionspace gateway`` spawned over stdio."""
    env = desk_env(config.parent)
    if token is not None:
        env["ACTIONSPACE_GATEWAY_TOKEN"] = token
    params = StdioServerParameters(
        command=str(EXE), args=["gateway", "--config", str(config)], env=env, cwd=str(config.parent)
    )
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, message_handler=message_handler) as session,
    ):
        await session.initialize()
        yield session


@contextmanager
def http_gateway(config: Path, **env: str) -> Iterator[str]:
    """``actionspace gateway --transport http`` in a subprocess; yields the endpoint URL."""
    url, proc = spawn_http_gateway(config, **env)
    try:
        yield url
    finally:
        stop(proc)


def spawn_http_gateway(config: Path, **env: str) -> tuple[str, subprocess.Popen[bytes]]:
    """Start the HTTP gateway on a socket this process bound and listens on.

    The socket listens before the child starts, so clients connect at once (the kernel queues
    them) and no port can be taken by someone else in between.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [str(EXE), "gateway", "--config", str(config), "--transport", "http", "--fd", str(sock.fileno())],
        pass_fds=(sock.fileno(),),
        env={**_base_env(), **desk_env(config.parent), **env},
        cwd=str(config.parent),
    )
    sock.close()
    return f"http://127.0.0.1:{port}/mcp", proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _base_env() -> dict[str, str]:
    import os

    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "VIRTUAL_ENV", "PYTHONPATH")
    return {k: v for k, v in os.environ.items() if k in keep}


@asynccontextmanager
async def http_session(url: str, token: str) -> AsyncIterator[ClientSession]:
    """An initialized official-client session over streamable HTTP with a bearer token."""
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def error_of(result: types.CallToolResult) -> dict[str, Any]:
    """The error object of an ``isError`` result's structured content."""
    assert result.is_error, result
    assert result.structured_content is not None
    error = result.structured_content["error"]
    assert isinstance(error, dict)
    return error


def text_of(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def run_of(result: types.CallToolResult | types.ListToolsResult) -> str:
    """The run a gateway's answer says it served (``_meta``, :data:`RUN_META`)."""
    from actionspace.adapters.mcp_gateway import RUN_META

    assert result.meta is not None, result
    run_id = result.meta[RUN_META]
    assert isinstance(run_id, str)
    return run_id
