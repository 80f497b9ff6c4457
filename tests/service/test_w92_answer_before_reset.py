"""An answer given before the request's body was read reaches a client that is still sending it.

The API answers some requests without reading their body: 408 when the body is too slow, 413 when
its declared length is over the bound. uvicorn then closes the connection, and closing a socket
with unread bytes makes the kernel reset it: a client that was still writing its body (clients
send the whole request before reading) gets the reset, and the reset throws away the answer
waiting unread in its receive buffer. The served protocol reads and drops what the client still
sends until it closes, so the answer arrives.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager

from actionspace import Principal, Runtime
from actionspace.service import RunnerConfig, create_app
from actionspace.service.slow_clients import deadlines
from tests.service.apptools import TOKENS, uvicorn_server


@contextmanager
def _port(**limits: float) -> Iterator[int]:
    """A server whose own 408/413 come from the application (the protocol's deadlines are later)."""
    rt = Runtime("memory://", principal=Principal(id="svc", scopes=("read:*",)), recover_on_start=False)
    app = create_app(rt, tokens=TOKENS, runner=RunnerConfig(approval_poll_s=0.05), **limits)  # type: ignore[arg-type]
    try:
        with uvicorn_server(app, http=deadlines(10.0, 10.0)) as base:
            yield int(base.rsplit(":", 1)[1])
    finally:
        app.state.runner.close()
        rt.close()


def _read_all(sock: socket.socket) -> bytes:
    """What the server sent, up to its end of the connection; a reset raises as it would in any client."""
    sock.settimeout(5)
    got = b""
    while chunk := sock.recv(65536):
        got += chunk
    return got


def _head(length: int) -> bytes:
    return (
        b"POST /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer agent-token\r\n" + f"Content-Length: {length}\r\n\r\n".encode()
    )


def test_a_trickled_body_answered_408_by_the_app_is_read_by_a_client_that_wrote_on_after_the_answer() -> None:
    with _port(body_timeout_s=0.3) as port, socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(_head(1000) + b"{")
        began = time.monotonic()
        while time.monotonic() - began < 1.0:  # well past the 408: the client writes without reading
            sock.sendall(b" ")
            time.sleep(0.05)
        time.sleep(0.2)  # whatever the server answers to those bytes (a reset, or nothing) is in by now
        answer = _read_all(sock)
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert "did not arrive" in json.loads(answer.partition(b"\r\n\r\n")[2])["error"]["message"]


def test_a_body_over_the_bound_answered_413_unread_is_read_by_a_client_that_sends_all_of_it_first() -> None:
    body = b"[" + b"0," * 400_000 + b"0]"
    with _port(max_body_bytes=10_000) as port, socket.create_connection(("127.0.0.1", port)) as sock:
        sock.settimeout(5)
        sock.sendall(_head(len(body)))
        time.sleep(0.2)  # the server has answered on the head alone and ended the connection
        sock.sendall(body)  # 800 kB: more than the kernel buffers, so the server must read them
        time.sleep(0.2)
        answer = _read_all(sock)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert json.loads(answer.partition(b"\r\n\r\n")[2])["error"]["category"]
