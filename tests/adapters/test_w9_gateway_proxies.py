"""Whose address counts the unknown tokens at the HTTP gateway: the peer's, or one a trusted proxy forwards.

``actionspace gateway --transport http`` runs in a child process on a socket this test bound (real
uvicorn, the gateway's own settings); only the guard's clock is frozen there, so no guess comes back
while a test runs, however slow the machine.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from actionspace.adapters._gateway_config import load_config
from actionspace.errors import ConfigurationError
from actionspace.service.auth import GUESSES_PER_MINUTE
from tests.adapters.gateway_support import ALICE_TOKEN, desk_env, stop, write_config

_FROZEN_GATEWAY = """
import functools, sys
import actionspace.adapters.mcp_gateway as gateway
gateway.HttpGuard = functools.partial(gateway.HttpGuard, clock=lambda: 1000.0)
from actionspace.cli import main
sys.argv = ["actionspace", *sys.argv[1:]]
main()
"""
_JSON = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}


@contextmanager
def _gateway(config: Path, *options: str) -> Iterator[str]:
    """The gateway on 127.0.0.1 (a free port), with these command-line options; yields its URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    command = ["gateway", "--config", str(config), "--transport", "http", "--fd", str(sock.fileno())]
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR", "PYTHONPATH")}
    proc = subprocess.Popen(
        [sys.executable, "-c", _FROZEN_GATEWAY, *command, *options],
        pass_fds=(sock.fileno(),),
        env={**env, **desk_env(config.parent)},
        cwd=str(config.parent),
    )
    sock.close()
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop(proc)


def _post(client: httpx.Client, url: str, token: str, forwarded: str) -> httpx.Response:
    headers = {**_JSON, "Authorization": f"Bearer {token}", "X-Forwarded-For": forwarded}
    return client.post(url, json=_LIST, headers=headers)


def _refused_for_guessing(answer: httpx.Response) -> None:
    assert answer.status_code == 429, answer.text
    assert answer.json()["error"] == "rate_limited"
    assert int(answer.headers["retry-after"]) >= 1


def test_a_local_client_naming_another_address_in_forwarded_for_still_spends_its_own_guesses(
    tmp_path: Path,
) -> None:
    """uvicorn alone reads ``X-Forwarded-For`` from 127.0.0.1: each guess would count for another address."""
    with _gateway(write_config(tmp_path)) as url, httpx.Client(timeout=30) as client:
        for n in range(GUESSES_PER_MINUTE):
            assert _post(client, url, f"guess-{n}", f"198.51.100.{n}").status_code == 401
        _refused_for_guessing(_post(client, url, "guess-x", "203.0.113.77"))
        # a good token too: else the one answer that is not a 429 would name the right guess
        _refused_for_guessing(_post(client, url, ALICE_TOKEN, "203.0.113.78"))


def test_clients_behind_a_trusted_proxy_are_limited_apart_and_a_spoof_left_of_their_hop_is_not_read(
    tmp_path: Path,
) -> None:
    with (
        _gateway(write_config(tmp_path), "--trusted-proxy", "127.0.0.1") as url,
        httpx.Client(timeout=30) as client,
    ):
        for n in range(GUESSES_PER_MINUTE):
            assert _post(client, url, f"guess-{n}", "203.0.113.1").status_code == 401
        _refused_for_guessing(_post(client, url, ALICE_TOKEN, "203.0.113.1"))
        _refused_for_guessing(_post(client, url, ALICE_TOKEN, "9.9.9.9, 203.0.113.1"))
        other = _post(client, url, ALICE_TOKEN, "203.0.113.2")
        assert other.status_code not in (401, 429), other.text  # on to MCP (which wants a session)
        assert _post(client, url, "guess-y", "203.0.113.2").status_code == 401


@pytest.mark.parametrize("bad", ["10.0.0.0/33", "proxy.example", ""])
def test_a_trusted_proxy_that_is_not_an_address_or_network_is_refused_at_start(
    tmp_path: Path, bad: str
) -> None:
    from actionspace.cli import _mount
    from actionspace.cli import app as cli_app

    config = write_config(tmp_path)
    _mount()
    result = CliRunner().invoke(
        cli_app, ["gateway", "--config", str(config), "--transport", "http", "--trusted-proxy", bad]
    )
    assert result.exit_code == 2 and "trusted proxy" in result.output, result.output
    path = tmp_path / "proxied.toml"
    path.write_text(
        config.read_text(encoding="utf-8").replace(
            'name = "desk"', f'name = "desk"\ntrusted_proxies = ["{bad}"]'
        ),
        encoding="utf-8",
    )
    with pytest.raises(ConfigurationError, match="trusted proxy"):
        load_config(path)
