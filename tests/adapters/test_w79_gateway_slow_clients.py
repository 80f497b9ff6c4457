"""``actionspace gateway --transport http`` against a client that sends its request a byte at a time."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.adapters.gateway_support import ALICE_TOKEN, EXE, desk_env, stop, write_config


@contextmanager
def _gateway(folder: Path) -> Iterator[int]:
    """The HTTP gateway with half-second deadlines on a request's head and body; its port."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    command = [
        str(EXE), "gateway", "--config", str(write_config(folder)), "--transport", "http",
        "--fd", str(sock.fileno()), "--head-timeout", "0.5", "--body-timeout", "0.5",
    ]  # fmt: skip
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": root, **desk_env(folder)}
    proc = subprocess.Popen(command, pass_fds=(sock.fileno(),), env=env, cwd=str(folder))
    sock.close()
    try:
        _answering(port)
        yield port
    finally:
        stop(proc)


def _answering(port: int) -> None:
    """Returns once the gateway answers a request: its start-up is not counted as the deadline's."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        assert sock.recv(12).startswith(b"HTTP/1.1 "), "the gateway did not start"


def _trickle(port: int, first: bytes, byte: bytes, within_s: float) -> tuple[bytes, float]:
    """Send ``first``, then ``byte`` every 0.1 s until the server closes; what it sent, and when."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(first)
        began = time.monotonic()
        sock.settimeout(0.1)
        answer = b""
        while time.monotonic() - began < within_s:
            try:
                sock.sendall(byte)
                chunk = sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                break
            if not chunk:
                break
            answer += chunk
        return answer, time.monotonic() - began


def _initialize() -> bytes:
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
    ).encode()


def test_the_http_gateway_answers_a_head_sent_a_byte_at_a_time_with_408_and_closes(tmp_path: Path) -> None:
    with _gateway(tmp_path) as port:
        first = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
        answer, took = _trickle(port, first, b"a", 8)
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert took < 5


def test_the_http_gateway_answers_a_body_sent_a_byte_at_a_time_with_408_and_closes(tmp_path: Path) -> None:
    body = _initialize()
    with _gateway(tmp_path) as port:
        first = (
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Accept: application/json, text/event-stream\r\n"
            + f"Authorization: Bearer {ALICE_TOKEN}\r\nContent-Length: {len(body) + 500}\r\n\r\n".encode()
            + body
        )
        answer, took = _trickle(port, first, b" ", 8)
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert took < 5
