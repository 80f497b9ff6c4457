"""The HTTP gateway counts unknown tokens by the network a client controls, as ``serve`` does.

An IPv6 client picks any address of its /64 (privacy addresses rotate by themselves) and a
dual-stack socket names an IPv4 peer ``::ffff:a.b.c.d``: counted by the address as written, such a
client had a fresh allowance of guesses with every address it took.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient
from starlette.types import Receive, Scope, Send

from actionspace import Principal
from actionspace.adapters._gateway_http import GUESSES_PER_MINUTE, HttpGuard
from actionspace.service.proxies import TrustedProxies

_GOOD = "good-token"
_PRINCIPAL = Principal(id="alice", scopes=("*",))
_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}


async def _tools(scope: Scope, receive: Receive, send: Send) -> None:
    """Stands for the SDK's endpoint: answers every request it is handed 200."""
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"reached"})


class _Peers:
    """The guard behind a socket whose peer is the address each request names in ``x-test-peer``
    (the test client itself has one fixed address)."""

    def __init__(self, guard: HttpGuard) -> None:
        self.guard = guard
        self.client = TestClient(self._app)  # no lifespan: the guard has none to run

    async def _app(self, scope: Scope, receive: Receive, send: Send) -> None:
        peer = dict(scope["headers"]).get(b"x-test-peer", b"").decode()
        await self.guard({**scope, "client": (peer, 40000)}, receive, send)


def _guard(**options: Any) -> _Peers:
    """The gateway's guard on a public address, its clock frozen: no guess comes back in a test."""
    guard = HttpGuard(
        _tools,
        lambda token: _PRINCIPAL if token == _GOOD else None,
        host="0.0.0.0",
        clock=lambda: 1000.0,
        **options,
    )
    return _Peers(guard)


def _ask(guard: _Peers, peer: str, token: str, forwarded: str | None = None) -> int:
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
    headers["x-test-peer"] = peer
    if forwarded is not None:
        headers["X-Forwarded-For"] = forwarded
    return guard.client.post("/mcp", json=_LIST, headers=headers).status_code


def _in_64(prefix: int, host: int) -> str:
    return str(ipaddress.IPv6Address((prefix << 64) | host))


def test_an_ipv6_client_rotating_through_its_64_spends_one_allowance_of_guesses() -> None:
    guard = _guard()
    prefix = 0x2001_0DB8_0000_0001
    for n in range(GUESSES_PER_MINUTE):
        assert _ask(guard, _in_64(prefix, n + 1), f"guess-{n}") == 401
    # a fresh address of the same /64: refused for guessing, the good token too
    assert _ask(guard, _in_64(prefix, 0xFFFF_0000_0000_0001), "guess-x") == 429
    assert _ask(guard, _in_64(prefix, 0xABCD), _GOOD) == 429
    # another /64 (another site) is not held up
    assert _ask(guard, _in_64(prefix + 1, 7), _GOOD) == 200


def test_an_ipv4_peer_spelled_as_a_mapped_ipv6_address_counts_as_its_ipv4_address() -> None:
    guard = _guard()
    for n in range(GUESSES_PER_MINUTE):
        peer = "198.51.100.9" if n % 2 else "::ffff:198.51.100.9"
        assert _ask(guard, peer, f"guess-{n}") == 401
    assert _ask(guard, "::ffff:c633:6409", _GOOD) == 429
    assert _ask(guard, "198.51.100.9", _GOOD) == 429
    assert _ask(guard, "198.51.100.10", _GOOD) == 200


def test_a_client_a_trusted_proxy_forwards_is_counted_by_its_64_too() -> None:
    guard = _guard(trusted_proxies=TrustedProxies.parse(["10.0.0.0/8"]))
    prefix = 0x2001_0DB8_00AA_0002
    for n in range(GUESSES_PER_MINUTE):
        forwarded = f"[{_in_64(prefix, n * 7919 + 3)}]:443" if n % 2 else f"{_in_64(prefix, n + 9)}%eth0"
        assert _ask(guard, "10.1.2.3", f"guess-{n}", forwarded) == 401
    assert _ask(guard, "10.1.2.3", _GOOD, _in_64(prefix, 2**63)) == 429
    assert _ask(guard, "10.9.9.9", _GOOD, _in_64(prefix ^ 1, 1)) == 200


_DRAWN = GUESSES_PER_MINUTE + 1


@settings(max_examples=10, deadline=None)
@given(
    prefix=st.integers(0x2000 << 48, (0x3FFF << 48) | (2**48 - 1)),
    hosts=st.lists(
        st.integers(0, 2**64 - 1), min_size=GUESSES_PER_MINUTE + 1, max_size=GUESSES_PER_MINUTE + 1
    ),
)
def test_whatever_addresses_of_one_64_a_client_takes_it_has_no_more_guesses_than_one_address(
    prefix: int, hosts: list[int]
) -> None:
    guard = _guard()
    answers = [_ask(guard, _in_64(prefix, host), f"guess-{n}") for n, host in enumerate(hosts)]
    assert answers == [401] * GUESSES_PER_MINUTE + [429]
