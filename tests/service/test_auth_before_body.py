"""A request without a good token is answered before a byte of its body is read, let alone parsed.

The edge checks of a body (its size, NaN, nesting, how long it takes to arrive) cost the server a
read and a parse; an unauthenticated client must not be able to make it pay them.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any

import pytest
from fastapi import FastAPI

from actionspace import Principal, Runtime
from actionspace.service import RunnerConfig, create_app
from actionspace.service.auth import GUESSES_PER_MINUTE, Auth
from actionspace.service.limits import DEFAULT_MAX_BODY_BYTES
from tests.service.apptools import TOKENS, uvicorn_server

CHUNK = 64 * 1024
NAN_BODY = b'{"calls": [{"name": "lookup", "arguments": {"city": NaN}}], "pad": "%s"}' % (
    b"x" * (DEFAULT_MAX_BODY_BYTES - 100)
)
"""Just under the limit, and refused once parsed: the most an unauthenticated client could cost."""


@contextmanager
def _app(**options: Any) -> Iterator[FastAPI]:
    rt = Runtime("memory://", principal=Principal(id="svc", scopes=("read:*",)), recover_on_start=False)
    app = create_app(rt, tokens=TOKENS, runner=RunnerConfig(approval_poll_s=0.05), **options)
    try:
        yield app
    finally:
        app.state.runner.close()
        rt.close()


def _ask(
    app: FastAPI, headers: list[tuple[bytes, bytes]], body: bytes, *, method: str = "POST"
) -> tuple[int, dict[bytes, bytes], bytes, int]:
    """Send one request straight to the ASGI app: its status, headers, body, and the bytes it read."""
    read = 0
    sent: list[MutableMapping[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal read
        chunk = body[read : read + CHUNK]
        read += len(chunk)
        return {"type": "http.request", "body": chunk, "more_body": read < len(body)}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": "/api/runs",
        "raw_path": b"/api/runs",
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"testserver"), *headers],
        "client": ("192.0.2.10", 5000),
        "server": ("testserver", 80),
    }
    asyncio.run(app(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    answer = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], {k.lower(): v for k, v in start["headers"]}, answer, read


JSON = (b"content-type", b"application/json")


@pytest.mark.parametrize("token", [None, b"Bearer not-a-token", b"Basic YWRtaW46YWRtaW4="])
@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_a_request_without_a_good_token_is_answered_401_before_a_byte_of_its_body_is_read(
    token: bytes | None, declared: bool
) -> None:
    headers = [JSON]
    headers.append(
        (b"content-length", str(len(NAN_BODY)).encode()) if declared else (b"transfer-encoding", b"chunked")
    )
    if token is not None:
        headers.append((b"authorization", token))
    with _app() as app:
        status, answered, body, read = _ask(app, headers, NAN_BODY)
    assert (status, read) == (401, 0), body[:200]
    assert answered[b"www-authenticate"] == b"Bearer"
    assert answered[b"connection"] == b"close"  # the body is never read: the connection is not reused
    assert answered[b"x-content-type-options"] == b"nosniff"
    assert set(json.loads(body)) == {"error"} and json.loads(body)["error"]["message"]


def test_an_unknown_token_sent_with_a_body_spends_a_guess_and_an_address_out_of_guesses_gets_429_unread() -> (
    None
):
    with _app() as app:
        app.state.auth = Auth(TOKENS, clock=lambda: 1000.0)  # no guess comes back while the test runs
        length = (b"content-length", str(len(NAN_BODY)).encode())
        for n in range(GUESSES_PER_MINUTE):
            status, _, _, read = _ask(
                app, [JSON, length, (b"authorization", f"Bearer g{n}".encode())], NAN_BODY
            )
            assert (status, read) == (401, 0)
        status, answered, body, read = _ask(
            app, [JSON, length, (b"authorization", b"Bearer agent-token")], NAN_BODY
        )
    assert (status, read) == (429, 0), body[:200]
    assert json.loads(body)["error"]["category"] == "rate_limited"
    assert int(answered[b"retry-after"]) >= 1


def test_a_good_token_still_gets_every_edge_check_of_its_body() -> None:
    auth = (b"authorization", b"Bearer agent-token")
    with _app(max_body_bytes=DEFAULT_MAX_BODY_BYTES) as app:
        length = (b"content-length", str(len(NAN_BODY)).encode())
        status, _, body, read = _ask(app, [JSON, length, auth], NAN_BODY)
        assert (status, read) == (400, len(NAN_BODY)), body[:200]
        assert json.loads(body)["error"]["category"] == "invalid_arguments"
        deep = b"[" * 5000 + b"]" * 5000
        status, _, body, _ = _ask(app, [JSON, (b"content-length", str(len(deep)).encode()), auth], deep)
        assert status == 400 and json.loads(body)["error"]["category"] == "invalid_arguments"
        big = (b"content-length", str(DEFAULT_MAX_BODY_BYTES + 1).encode())
        for headers in ([JSON, big, auth], [JSON, big]):  # too large is still told before anything else
            status, _, body, read = _ask(app, headers, b"")
            assert (status, read) == (413, 0), body[:200]


def _answer_of(sock: socket.socket, deadline_s: float) -> bytes:
    """Everything the server sent until it closed the connection, or the deadline passed."""
    got = b""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        sock.settimeout(max(0.01, end - time.monotonic()))
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            break
        if not chunk:
            return got
        got += chunk
    return got + b"<still open>"


def test_a_client_that_sends_a_head_declaring_16_mib_and_waits_is_answered_401_and_closed_at_once() -> None:
    """Measured against a real server: the answer comes long before the body deadline, unread."""
    with _app(body_timeout_s=40.0) as app, uvicorn_server(app) as base:
        port = int(base.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(
                b"POST /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {DEFAULT_MAX_BODY_BYTES}\r\n\r\n".encode()
                + b'{"calls": ['
            )
            answer = _answer_of(sock, 20.0)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 401"), answer[:300]
    assert b"connection: close" in head.lower()
    assert not body.endswith(b"<still open>")  # closed at once; it used to wait 40 s for the body
    assert json.loads(body)["error"]["message"] == "missing bearer token"
