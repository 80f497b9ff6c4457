"""``actionspace serve`` caps the connections it serves at once; one over the cap is a typed 503.

Without a cap every connection a client opens is served (uvicorn sets none by default), each with
its buffers and a request in flight, so a flood of connections grows the server without bound.
"""

from __future__ import annotations

import inspect
import json
import socket
import time
from pathlib import Path

import pytest

from actionspace.service import slow_clients
from actionspace.service.cli import serve_command, uvicorn_options
from tests.service.test_w18_real_serve import _serve

HEALTH = b"GET /api/health HTTP/1.1\r\nHost: x\r\n\r\n"


def _answer(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """The status, headers and body of one response read from ``sock``."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    while len(body) < int(headers["content-length"]):
        chunk = sock.recv(65536)
        assert chunk
        body += chunk
    return int(lines[0].split(" ", 2)[1]), headers, body


def test_a_connection_over_the_cap_is_answered_a_typed_503_and_the_slot_comes_back(tmp_path: Path) -> None:
    with _serve(tmp_path, "--max-connections", "2", "--head-timeout", "120") as port:
        held = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(2)]
        try:
            for sock in held:  # each begins a head and stays open: two connections in service
                sock.sendall(b"GET /api/health HTTP/1.1\r\n")
            with socket.create_connection(("127.0.0.1", port), timeout=30) as over:
                over.sendall(HEALTH)
                status, headers, body = _answer(over)
                assert status == 503, body
                assert json.loads(body)["error"]["category"] == "transient"
                assert headers["retry-after"] == "1" and headers["connection"] == "close"
                assert over.recv(1) == b""  # closed after its answer
            with socket.create_connection(("127.0.0.1", port), timeout=60) as silent:
                # one over the cap that sends nothing is answered and closed, not held for its head
                began = time.monotonic()
                assert _answer(silent)[0] == 503
                assert silent.recv(1) == b""
                assert time.monotonic() - began < 60
            for sock in held:  # the connections within the cap are served as ever
                sock.sendall(b"Host: x\r\n\r\n")
                assert _answer(sock)[0] == 200
        finally:
            for sock in held:
                sock.close()
        deadline = time.monotonic() + 60
        while True:  # once those closed, a new connection is served
            with socket.create_connection(("127.0.0.1", port), timeout=30) as again:
                again.sendall(HEALTH)
                status = _answer(again)[0]
            if status == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.1)  # the server notices the closes in its own time: no event to wait on
        assert status == 200


def test_serve_caps_connections_by_default() -> None:
    cap = getattr(slow_clients, "DEFAULT_MAX_CONNECTIONS", None)
    assert isinstance(cap, int) and 1 <= cap <= 1000  # under a process's usual 1024 open files
    assert inspect.signature(serve_command).parameters["max_connections"].default == cap
    assert uvicorn_options(10.0, 60.0)["http"].max_connections == cap
    options = uvicorn_options(10.0, 60.0, max_connections=3)  # type: ignore[call-arg, unused-ignore]
    assert options["http"].max_connections == 3


@pytest.mark.parametrize("cap", [0, -1, True, 1.5, "2"])
def test_a_cap_that_is_no_count_is_refused(cap: object) -> None:
    with pytest.raises(ValueError, match="max_connections"):
        slow_clients.deadlines(10.0, 60.0, max_connections=cap)  # type: ignore[arg-type]
