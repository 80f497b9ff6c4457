"""The HTTP gateway seen by a hostile client: session ownership, Host/Origin checks, leaked credentials."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client

from actionspace import Runtime
from actionspace.adapters.mcp_gateway import Gateway
from tests.adapters.gateway_sample_tools import DB_ENV
from tests.adapters.gateway_support import (
    ALICE_TOKEN,
    BOB_TOKEN,
    EXE,
    desk_env,
    error_of,
    http_gateway,
    stop,
    text_of,
    write_config,
)

_JSON = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
_INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
_LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


def _as(token: str, session: str | None = None, **extra: str) -> dict[str, str]:
    headers = {**_JSON, "Authorization": f"Bearer {token}", **extra}
    if session is not None:
        headers["mcp-session-id"] = session
    return headers


async def _open_session(http: httpx2.AsyncClient, url: str, token: str) -> str:
    opened = await http.post(url, json=_INIT, headers=_as(token))
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await http.post(url, json=done, headers=_as(token, session))).status_code == 202
    return session


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("gateway-u1")
    with http_gateway(write_config(folder)) as url:
        yield url


def test_another_principal_can_neither_use_nor_end_a_session_it_did_not_open(served: str) -> None:
    url = served

    async def go() -> None:
        async with httpx2.AsyncClient(timeout=30) as http:
            alice = await _open_session(http, url, ALICE_TOKEN)
            used = await http.post(url, json=_LIST, headers=_as(BOB_TOKEN, alice))
            assert used.status_code == 404, used.text
            listened = await http.get(url, headers=_as(BOB_TOKEN, alice))
            assert listened.status_code == 404
            ended = await http.delete(url, headers=_as(BOB_TOKEN, alice))
            assert ended.status_code == 404
            still = await http.post(url, json=_LIST, headers=_as(ALICE_TOKEN, alice))
            assert still.status_code == 200, still.text
            assert "create_ticket" in still.text
            bob = await _open_session(http, url, BOB_TOKEN)
            own = await http.post(url, json=_LIST, headers=_as(BOB_TOKEN, bob))
            assert own.status_code == 200 and "lookup_customer" in own.text
            assert (await http.delete(url, headers=_as(ALICE_TOKEN, bob))).status_code == 404
            assert (await http.delete(url, headers=_as(BOB_TOKEN, bob))).status_code == 200

    anyio.run(go)


def test_a_request_naming_a_session_nobody_opened_is_not_found(served: str) -> None:
    async def go() -> int:
        async with httpx2.AsyncClient(timeout=30) as http:
            made_up = await http.post(served, json=_LIST, headers=_as(ALICE_TOKEN, "f" * 32))
            return made_up.status_code

    assert anyio.run(go) == 404


def test_a_gateway_bound_to_loopback_refuses_foreign_hosts_whatever_the_config_says(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    config.write_text(config.read_text().replace('name = "desk"', 'name = "desk"\nhost = "0.0.0.0"'))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    proc = subprocess.Popen(
        [str(EXE), "gateway", "--config", str(config), "--transport", "http", "--fd", str(sock.fileno())],
        pass_fds=(sock.fileno(),),
        env={"PATH": "/usr/bin:/bin", **desk_env(tmp_path)},
        cwd=str(tmp_path),
    )
    sock.close()

    async def go() -> None:
        async with httpx2.AsyncClient(timeout=30) as http:
            rebound = await http.post(url, json=_INIT, headers=_as(ALICE_TOKEN, Host="attacker.example:80"))
            assert rebound.status_code == 421
            foreign = await http.post(
                url, json=_INIT, headers=_as(ALICE_TOKEN, Origin="http://attacker.example")
            )
            assert foreign.status_code == 403
            assert (await http.post(url, json=_INIT, headers=_as(ALICE_TOKEN))).status_code == 200

    try:
        anyio.run(go)
    finally:
        stop(proc)


async def _asgi(app: Any, method: str, headers: dict[str, str], body: bytes = b"") -> int:
    """One request straight into an ASGI app; returns the status it answered."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "query_string": b"",
        "root_path": "",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        "client": ("203.0.113.9", 5555),
        "server": ("192.0.2.1", 8765),
    }
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return int(sent[0]["status"])


def test_a_gateway_bound_beyond_loopback_still_refuses_a_cross_origin_browser_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DB_ENV, str(tmp_path / "desk.db"))
    config = write_config(tmp_path)
    config.write_text(config.read_text().replace('name = "desk"', 'name = "desk"\nhost = "0.0.0.0"'))
    gateway = Gateway.from_file(config, runtime=Runtime("memory://", recover_on_start=False))
    try:
        app = gateway.http_app()
        headers = _as(ALICE_TOKEN, Host="gw.internal:8765", Origin="http://attacker.example")
        assert anyio.run(_asgi, app, "POST", headers, b"{}") == 403
        headers = _as(ALICE_TOKEN, Host="gw.internal:8765", Origin="null")
        assert anyio.run(_asgi, app, "POST", headers, b"{}") == 403
    finally:
        gateway.runtime.close()


def test_a_store_error_reaching_the_client_carries_no_credential(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DB_ENV, str(tmp_path / "desk.db"))
    gateway = Gateway.from_file(write_config(tmp_path), runtime=Runtime("memory://", recover_on_start=False))
    secret = "hunter2-" + "x" * 12

    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise ValueError(f"could not connect to postgresql://app:{secret}@db:5432/ledger (token={secret})")

    monkeypatch.setattr(gateway.runtime, "acall", broken)
    alice = gateway.config.principal_by_id("alice")
    assert alice is not None

    async def go() -> types.CallToolResult:
        async with Client(gateway.server(lambda ctx: alice), cache=None) as c:
            return await c.call_tool("lookup_customer", {"customer_id": "c1"})

    try:
        result = anyio.run(go)
    finally:
        gateway.runtime.close()
    error = error_of(result)
    assert error["category"] == "internal"
    assert secret not in text_of(result)
    assert secret not in str(result.structured_content)
    assert "postgresql://app:" in error["message"]


def test_a_tools_error_crossing_the_gateway_keeps_its_credentials_hidden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from actionspace.catalog.spec import ToolSpec

    monkeypatch.setenv(DB_ENV, str(tmp_path / "desk.db"))
    gateway = Gateway.from_file(write_config(tmp_path), runtime=Runtime("memory://", recover_on_start=False))
    key = "sk-" + "a1b2c3d4" * 4

    def leak(customer_id: str) -> str:
        raise RuntimeError(f"upstream refused Authorization: Bearer {key}")

    schema = {"type": "object", "properties": {"customer_id": {"type": "string"}}}
    gateway.runtime.register(ToolSpec(name="leak", effect="read", input_schema=schema, fn=leak))
    alice = gateway.config.principal_by_id("alice")
    assert alice is not None

    async def go() -> types.CallToolResult:
        async with Client(gateway.server(lambda ctx: alice), cache=None) as c:
            return await c.call_tool("leak", {"customer_id": "c1"})

    try:
        result = anyio.run(go)
    finally:
        gateway.runtime.close()
    assert error_of(result)["category"] == "unclassified"
    assert key not in text_of(result) and key not in str(result.structured_content)
