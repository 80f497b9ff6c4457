"""Unknown tokens are counted by the network a client controls, however its address is spelled.

An IPv6 client picks any address of its /64 and a dual-stack socket names an IPv4 peer as
``::ffff:a.b.c.d``: counted by the address as written, such a client never ran out of guesses.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Principal, Runtime
from actionspace.service import RunnerConfig, create_app
from actionspace.service.auth import GUESSES_PER_MINUTE, Auth
from tests.service.apptools import TOKENS, bearer, uvicorn_server


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
    """A fresh allowance for every address, none given back while the test runs."""
    old: Auth = app.state.auth
    app.state.auth = Auth(TOKENS, clock=lambda: 1000.0, trusted_proxies=old.trusted_proxies)


def _spell(address: ipaddress.IPv6Address, how: int, port: int) -> str:
    """One of the ways a proxy may write an IPv6 client into ``X-Forwarded-For``."""
    spellings = [
        str(address),
        address.exploded,
        str(address).upper(),
        f"[{address}]:{port}",
        f"{address}%eth{port % 3}",
        f"[{address.exploded.upper()}%{port}]:{port}",
    ]
    return spellings[how % len(spellings)]


_prefix = st.integers(0x2000 << 48, (0x3FFF << 48) | (2**48 - 1))  # global unicast /64s
_host = st.tuples(st.integers(0, 2**64 - 1), st.integers(0, 5), st.integers(1, 65535))


def test_a_client_rotating_through_its_ipv6_64_in_any_spelling_is_limited_once_its_guesses_run_out() -> None:
    app_ = _app(trusted_proxies=["127.0.0.1"])
    with app_ as app, uvicorn_server(app, proxy_headers=False) as base, httpx.Client(base_url=base) as http:

        @settings(max_examples=12, deadline=None)
        @given(prefix=_prefix, hosts=st.lists(_host, min_size=GUESSES_PER_MINUTE + 1, max_size=120))
        def check(prefix: int, hosts: list[tuple[int, int, int]]) -> None:
            _frozen(app)

            def forwarded(host: tuple[int, int, int]) -> dict[str, str]:
                interface, how, port = host
                address = ipaddress.IPv6Address((prefix << 64) | interface)
                return {"X-Forwarded-For": _spell(address, how, port)}

            for n, host in enumerate(hosts[:GUESSES_PER_MINUTE]):
                answer = http.get("/api/runs", headers={**bearer(f"guess-{n}"), **forwarded(host)})
                assert answer.status_code == 401, (n, answer.text)
            # from any other address of the same /64, the right token too is refused
            refused = http.get("/api/runs", headers={**bearer("reader-token"), **forwarded(hosts[-1])})
            assert refused.status_code == 429, refused.text
            assert refused.json()["error"]["category"] == "rate_limited"
            assert int(refused.headers["Retry-After"]) >= 1
            # the next /64 is another client: not held up
            neighbour = ipaddress.IPv6Address(((prefix ^ 1) << 64) | hosts[-1][0])
            other = http.get(
                "/api/runs", headers={**bearer("reader-token"), "X-Forwarded-For": str(neighbour)}
            )
            assert other.status_code == 200, other.text

        check()


_ipv4 = st.ip_addresses(v=4).filter(lambda a: a.is_global)


@settings(max_examples=10, deadline=None)
@given(
    address=_ipv4, mapped=st.lists(st.booleans(), min_size=GUESSES_PER_MINUTE, max_size=GUESSES_PER_MINUTE)
)
def test_an_ipv4_peer_spelled_ipv4_mapped_by_a_dual_stack_socket_is_one_client(
    address: ipaddress.IPv4Address, mapped: list[bool]
) -> None:
    with _app() as app:
        _frozen(app)

        def client_at(as_mapped: bool) -> TestClient:
            peer = f"::ffff:{address}" if as_mapped else str(address)
            return TestClient(app, client=(peer, 50000), raise_server_exceptions=False)

        for n, as_mapped in enumerate(mapped):
            answer = client_at(as_mapped).get("/api/runs", headers=bearer(f"guess-{n}"))
            assert answer.status_code == 401, (n, answer.text)
        for as_mapped in (True, False):
            refused = client_at(as_mapped).get("/api/runs", headers=bearer("reader-token"))
            assert refused.status_code == 429, refused.text
            assert refused.json()["error"]["category"] == "rate_limited"


def test_a_peer_rotating_its_ipv6_interface_id_and_zone_is_limited_by_its_64() -> None:
    with _app() as app:
        _frozen(app)
        for n in range(GUESSES_PER_MINUTE):
            peer = f"2001:db8:7:9::{n + 1:x}%eth{n % 4}"
            client = TestClient(app, client=(peer, 40000 + n), raise_server_exceptions=False)
            assert client.get("/api/runs", headers=bearer(f"guess-{n}")).status_code == 401
        last = TestClient(app, client=("2001:db8:7:9:ffff::1", 1), raise_server_exceptions=False)
        assert last.get("/api/runs", headers=bearer("reader-token")).status_code == 429
        elsewhere = TestClient(app, client=("2001:db8:7:a::1", 1), raise_server_exceptions=False)
        assert elsewhere.get("/api/runs", headers=bearer("reader-token")).status_code == 200


@settings(max_examples=300, deadline=None)
@given(prefix=_prefix, interface=st.integers(0, 2**64 - 1), how=st.integers(0, 5), port=st.integers(1, 65535))
def test_every_spelling_of_an_ipv6_address_keys_as_its_64_and_an_ipv4_mapped_one_as_its_ipv4(
    prefix: int, interface: int, how: int, port: int
) -> None:
    from actionspace.service.proxies import guess_key  # here: the HTTP tests above run without it

    address = ipaddress.IPv6Address((prefix << 64) | interface)
    key = guess_key(_spell(address, how, port))
    assert ipaddress.ip_network(key) == ipaddress.IPv6Network((prefix << 64, 64))
    v4 = ipaddress.IPv4Address(interface & 0xFFFFFFFF)
    for spelled in (f"::ffff:{v4}", f"[::ffff:{v4}]:{port}", f"::FFFF:{v4}", str(v4), f"{v4}:{port}"):
        assert guess_key(spelled) == str(v4)


def test_text_that_is_no_address_keys_as_itself() -> None:
    from actionspace.service.proxies import guess_key

    for text in ("testclient", "", "unix:/run/actionspace.sock", "not::an::address"):
        assert guess_key(text) == text
