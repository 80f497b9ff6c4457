"""Whose address counts the unknown tokens: the peer's, or behind a trusted proxy, the client it forwards."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from actionspace import Principal, Runtime
from actionspace.cli import _mount
from actionspace.cli import app as cli_app
from actionspace.errors import ConfigurationError
from actionspace.service import RunnerConfig, create_app
from actionspace.service.auth import GUESSES_PER_MINUTE, Auth, admin_principal
from actionspace.service.proxies import TrustedProxies, client_address
from tests.service.apptools import TOKENS, bearer, uvicorn_server

PROXIES = TrustedProxies.parse(["10.0.0.0/8", "fd00::/8"])


@contextmanager
def _app(**options: object) -> Iterator[FastAPI]:
    rt = Runtime("memory://", principal=Principal(id="svc", scopes=("read:*",)), recover_on_start=False)
    try:
        app = create_app(rt, tokens=TOKENS, runner=RunnerConfig(approval_poll_s=0.05), **options)  # type: ignore[arg-type]
        try:
            yield app
        finally:
            app.state.runner.close()
    finally:
        rt.close()


def _frozen(app: FastAPI) -> None:
    """No guess comes back while the test runs, whatever the machine's speed."""
    old: Auth = app.state.auth
    app.state.auth = Auth(TOKENS, clock=lambda: 1000.0, trusted_proxies=old.trusted_proxies)


def _spend_guesses(client: TestClient, headers: dict[str, str]) -> None:
    for n in range(GUESSES_PER_MINUTE):
        answer = client.get("/api/runs", headers={**bearer(f"guess-{n}"), **headers})
        assert answer.status_code == 401, (n, answer.text)


_public = st.ip_addresses(v=4).filter(lambda a: a not in ipaddress.ip_network("10.0.0.0/8")).map(str)
_trusted = st.integers(0, 2**24 - 1).map(lambda n: str(ipaddress.ip_address(0x0A000000 + n)))
_anything = st.one_of(_public, _trusted, st.text(alphabet="abc:[]. 0123456789", max_size=12))


@settings(max_examples=200, deadline=None)
@given(spoofed=st.lists(_anything, max_size=4), client=_public, proxies=st.lists(_trusted, max_size=3))
def test_the_client_is_the_right_most_hop_no_trusted_proxy_vouches_past_whatever_it_wrote_itself(
    spoofed: list[str], client: str, proxies: list[str]
) -> None:
    """A client writes what it likes left of its own hop; each trusted proxy appends what it saw."""
    chain = [*spoofed, client, *proxies[:-1]] if proxies else [*spoofed]
    peer = proxies[-1] if proxies else client
    header = ", ".join(chain)
    assert client_address(peer, [header] if header else [], PROXIES) == client
    assert client_address(peer, [header] if header else [], TrustedProxies()) == peer  # trusting nobody


def test_hops_are_read_across_headers_ports_and_ipv4_mapped_peers() -> None:
    assert (
        client_address("10.0.0.1", ["198.51.100.1", "203.0.113.9:4711, 10.0.0.2"], PROXIES) == "203.0.113.9"
    )
    assert client_address("::ffff:10.0.0.1", ["[2001:db8::5]:443"], PROXIES) == "2001:db8::5"
    assert client_address("fd00::1", ["2001:db8::7"], PROXIES) == "2001:db8::7"
    # what a proxy vouches for cannot be read: the proxy is the client, never the hop left of it
    assert client_address("10.0.0.1", ["198.51.100.1, not-an-address"], PROXIES) == "10.0.0.1"
    assert client_address("10.0.0.1", [], PROXIES) == "10.0.0.1"
    assert client_address("testclient", ["198.51.100.1"], PROXIES) == "testclient"


@pytest.mark.parametrize("bad", ["10.0.0.0/33", "proxy.example", "", "10.0.0.0/8, 10.1.0.0/16"])
def test_a_proxy_that_is_neither_an_address_nor_a_network_is_a_configuration_error(bad: str) -> None:
    with pytest.raises(ConfigurationError, match="trusted proxy"):
        TrustedProxies.parse([bad])
    with pytest.raises(ConfigurationError, match="trusted proxy"), _app(trusted_proxies=["10.0.0.0/8", bad]):
        pass


def test_without_trusted_proxies_a_spoofed_forwarded_for_changes_nothing() -> None:
    with _app() as app:
        _frozen(app)
        client = TestClient(app, client=("10.0.0.5", 4000))
        for n in range(GUESSES_PER_MINUTE):  # each guess claims another address: all count against the peer
            answer = client.get(
                "/api/runs", headers={**bearer(f"g{n}"), "X-Forwarded-For": f"198.51.100.{n}"}
            )
            assert answer.status_code == 401
        refused = client.get(
            "/api/runs", headers={**bearer("agent-token"), "X-Forwarded-For": "198.51.100.250"}
        )
        assert refused.status_code == 429 and refused.json()["error"]["category"] == "rate_limited"


def test_two_clients_behind_one_trusted_proxy_are_limited_apart_and_a_spoof_does_not_escape() -> None:
    with _app(trusted_proxies=["10.0.0.0/8"]) as app:
        _frozen(app)
        proxy = TestClient(app, client=("10.0.0.5", 4000))
        first = {"X-Forwarded-For": "203.0.113.1"}
        second = {"X-Forwarded-For": "203.0.113.2"}
        _spend_guesses(proxy, first)
        assert proxy.get("/api/runs", headers={**bearer("agent-token"), **first}).status_code == 429
        # the first client cannot get out by writing another address left of its own hop
        escaped = proxy.get(
            "/api/runs", headers={**bearer("agent-token"), "X-Forwarded-For": "9.9.9.9, 203.0.113.1"}
        )
        assert escaped.status_code == 429
        assert proxy.get("/api/runs", headers={**bearer("agent-token"), **second}).status_code == 200
        assert proxy.get("/api/runs", headers={**bearer("guess-x"), **second}).status_code == 401
        post = proxy.post("/api/runs", json={"calls": []}, headers={**bearer("agent-token"), **first})
        assert post.status_code == 429  # a body's early check counts the same address
        # a peer that is not a trusted proxy is its own client, whatever it forwards
        direct = TestClient(app, client=("192.0.2.7", 4000))
        _spend_guesses(direct, second)
        assert direct.get("/api/runs", headers={**bearer("agent-token"), **second}).status_code == 429
        assert proxy.get("/api/runs", headers={**bearer("agent-token"), **second}).status_code == 200


TOKEN = "admin-token-0000000000"


def _serve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *options: str, check: Callable[[str], None]
) -> None:
    """Run ``actionspace serve`` with these options; where it would start uvicorn, start a real uvicorn
    server in this process with the very options ``serve`` gives it, and ``check`` it (its base URL).

    The allowance of unknown tokens is frozen (no guess comes back however slow the machine).
    """
    ran: list[dict[str, Any]] = []

    def run(app: FastAPI, *, host: str, port: int, **given: Any) -> None:
        old: Auth = app.state.auth
        app.state.auth = Auth(
            {TOKEN: admin_principal()},
            clock=lambda: 1000.0,
            trusted_proxies=old.trusted_proxies,
            rate_limit=old.rate_limit,
        )
        with uvicorn_server(app, **given) as base:
            check(base)
        ran.append(given)

    monkeypatch.setattr(uvicorn, "run", run)
    command = ["serve", "--no-demo", "--token", TOKEN, "--store", f"sqlite://{tmp_path / 's.db'}", *options]
    _mount()
    result = CliRunner().invoke(cli_app, command)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert result.exit_code == 0 and len(ran) == 1, result.output


def test_actionspace_serve_ignores_forwarded_for_from_a_local_peer_unless_told_to_trust_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """uvicorn alone reads the header from 127.0.0.1: each guess would count for another address."""

    def check(base: str) -> None:
        with httpx.Client(base_url=base, timeout=30) as client:
            for n in range(GUESSES_PER_MINUTE):
                spoofed = {**bearer(f"g{n}"), "X-Forwarded-For": f"198.51.100.{n}"}
                assert client.get("/api/runs", headers=spoofed).status_code == 401
            refused = client.get("/api/runs", headers={**bearer(TOKEN), "X-Forwarded-For": "198.51.100.250"})
            assert refused.status_code == 429, refused.text
            assert refused.json()["error"]["category"] == "rate_limited"

    _serve(tmp_path, monkeypatch, check=check)


def test_actionspace_serve_with_a_trusted_proxy_limits_the_clients_behind_it_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def check(base: str) -> None:
        first = {"X-Forwarded-For": "203.0.113.1"}
        second = {"X-Forwarded-For": "203.0.113.2"}
        with httpx.Client(base_url=base, timeout=30) as client:
            for n in range(GUESSES_PER_MINUTE):
                assert client.get("/api/runs", headers={**bearer(f"g{n}"), **first}).status_code == 401
            assert client.get("/api/runs", headers={**bearer(TOKEN), **first}).status_code == 429
            assert client.get("/api/runs", headers={**bearer("g-x"), **second}).status_code == 401
            for _ in range(2):  # --rate-limit: the principal's two requests an hour
                assert client.get("/api/runs", headers={**bearer(TOKEN), **second}).status_code == 200
            limited = client.get("/api/runs", headers={**bearer(TOKEN), **second})
            assert limited.status_code == 429 and "2/hour" in limited.json()["error"]["message"]

    options = ("--trusted-proxy", "10.9.0.0/16", "--trusted-proxy", "127.0.0.1", "--rate-limit", "2/hour")
    _serve(tmp_path, monkeypatch, *options, check=check)
