"""Browser origins the HTTP gateway lets through: none but its own, unless named exactly in the config."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from actionspace.adapters._gateway_config import load_config
from actionspace.adapters._gateway_http import HttpGuard
from actionspace.errors import ConfigurationError
from actionspace.policy.principal import Principal
from tests.adapters.gateway_support import ALICE_TOKEN, EXE, desk_env, stop, write_config

_ALICE = Principal(id="alice", scopes=("read:*",))
_CONSOLE = "https://console.example.com"


async def _inner(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"{}"})


def _guard(host: str, origins: tuple[str, ...]) -> HttpGuard:
    return HttpGuard(
        _inner, lambda token: _ALICE if token == ALICE_TOKEN else None, host=host, allowed_origins=origins
    )


def _status(guard: HttpGuard, headers: dict[str, str]) -> int:
    scope: dict[str, Any] = {
        "type": "http",
        "method": "POST",
        "path": "/mcp",
        "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()],
    }
    sent: list[dict[str, Any]] = []

    async def receive() -> MutableMapping[str, Any]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(dict(message))

    anyio.run(guard, scope, receive, send)
    return int(sent[0]["status"])


def _from(origin: str | None, host: str = "gw.internal:8765") -> dict[str, str]:
    headers = {"Authorization": f"Bearer {ALICE_TOKEN}", "Host": host}
    if origin is not None:
        headers["Origin"] = origin
    return headers


LOOKALIKES = [
    "https://console.example.com.attacker.example",
    "https://evilconsole.example.com",
    "https://attacker.example/console.example.com",
    "https://console.example.com@attacker.example",
    "http://console.example.com",
    "https://console.example.com:8443",
    "https://console.example.co",
    "null",
    "",
    "https://",
    "https://console.example.com/",
    "https://console.example.com\r\nX: y",
    "HTTPS://console.example.com:443:1",
]


@pytest.mark.parametrize("host", ["0.0.0.0", "127.0.0.1"])
def test_an_origin_named_in_the_allowlist_is_let_through_and_its_lookalikes_are_not(host: str) -> None:
    guard = _guard(host, (_CONSOLE,))
    assert _status(guard, _from(_CONSOLE)) == 200
    assert _status(guard, _from("https://CONSOLE.example.com:443")) == 200  # the same origin, spelled long
    for origin in LOOKALIKES:
        assert _status(guard, _from(origin)) == 403, origin


@pytest.mark.parametrize("host", ["0.0.0.0", "127.0.0.1"])
def test_without_an_allowlist_a_foreign_origin_is_refused_and_a_missing_one_passes(host: str) -> None:
    guard = _guard(host, ())
    assert _status(guard, _from(_CONSOLE)) == 403
    assert _status(guard, _from("null")) == 403
    assert _status(guard, _from(None)) == 200


def test_off_loopback_the_origin_of_the_host_itself_still_passes() -> None:
    guard = _guard("0.0.0.0", (_CONSOLE,))
    assert _status(guard, _from("http://gw.internal:8765")) == 200
    assert _status(guard, _from("http://gw.internal:8766")) == 403


def test_an_unauthenticated_request_is_401_whatever_its_origin() -> None:
    guard = _guard("0.0.0.0", (_CONSOLE,))
    assert _status(guard, {"Origin": _CONSOLE, "Host": "gw.internal:8765"}) == 401


@pytest.mark.parametrize(
    ("origin", "complaint"),
    [
        ("*", "wildcard"),
        ("https://*.example.com", "wildcard"),
        ("null", "null"),
        ("console.example.com", "scheme://host"),
        ("ftp://console.example.com", "http or https"),
        ("https://console.example.com/app", "path"),
        ("https://user@console.example.com", "user"),
        ("https://console.example.com:99999", "port"),
        ("https://console.example.com?x=1", "query"),
    ],
)
def test_an_allowlist_entry_that_is_not_one_exact_origin_is_refused_at_start(
    origin: str, complaint: str, tmp_path: Path
) -> None:
    config = write_config(tmp_path)
    text = config.read_text().replace('name = "desk"', f'name = "desk"\nallowed_origins = [{origin!r}]')
    config.write_text(text)
    with pytest.raises(ConfigurationError, match=complaint):
        load_config(config)


def test_the_config_keeps_allowed_origins_in_their_exact_form(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    allowed = '["https://Console.Example.com:443", "http://localhost:3000"]'
    config.write_text(
        config.read_text().replace('name = "desk"', f'name = "desk"\nallowed_origins = {allowed}')
    )
    assert load_config(config).allowed_origins == ("https://console.example.com", "http://localhost:3000")


def test_the_allow_origin_flag_lets_a_named_console_reach_a_loopback_gateway(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    command = [str(EXE), "gateway", "--config", str(config), "--transport", "http"]
    command += ["--fd", str(sock.fileno()), "--allow-origin", _CONSOLE]
    proc = subprocess.Popen(
        command,
        pass_fds=(sock.fileno(),),
        env={"PATH": "/usr/bin:/bin", **desk_env(tmp_path)},
        cwd=str(tmp_path),
    )
    sock.close()
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    base = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

    async def post(origin: str) -> int:
        headers = {**base, "Authorization": f"Bearer {ALICE_TOKEN}", "Origin": origin}
        async with httpx2.AsyncClient(timeout=30) as http:
            return (await http.post(url, json=init, headers=headers)).status_code

    try:
        assert anyio.run(post, _CONSOLE) == 200
        assert anyio.run(post, "https://console.example.com.attacker.example") == 403
        assert anyio.run(post, "https://attacker.example") == 403
    finally:
        stop(proc)
