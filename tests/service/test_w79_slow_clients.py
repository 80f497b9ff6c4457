"""A client that sends its request a byte at a time, against a real uvicorn server."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from actionspace import Principal, Runtime
from actionspace.service import RunnerConfig, create_app
from tests.service.apptools import TOKENS, uvicorn_server


@contextmanager
def _server(**limits: float) -> Iterator[tuple[str, int]]:
    rt = Runtime("memory://", principal=Principal(id="svc", scopes=("read:*",)), recover_on_start=False)
    app = create_app(rt, tokens=TOKENS, runner=RunnerConfig(approval_poll_s=0.05), **limits)  # type: ignore[arg-type]
    try:
        with uvicorn_server(app) as base:
            yield base, int(base.rsplit(":", 1)[1])
    finally:
        app.state.runner.close()
        rt.close()


def _answer_of(sock: socket.socket, deadline_s: float) -> bytes:
    """Everything the server sent until it closed the connection (or the deadline passed)."""
    sock.settimeout(0.2)
    got = b""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        if not chunk:
            break
        got += chunk
    return got


def test_a_body_trickled_a_byte_at_a_time_is_answered_408_and_the_connection_closed() -> None:
    with _server(body_timeout_s=0.5) as (base, port):
        sock = socket.create_connection(("127.0.0.1", port))
        with sock:
            sock.sendall(
                b"POST /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Authorization: Bearer agent-token\r\n"  # without one the 401 comes before the body
                b"Content-Length: 1000\r\n\r\n{"
            )
            began = time.monotonic()
            answer = b""
            sock.settimeout(0.1)
            while time.monotonic() - began < 5 and not answer:
                try:
                    sock.sendall(b" ")
                    answer = sock.recv(65536)
                except TimeoutError:
                    continue
                except OSError:
                    break
            answer += _answer_of(sock, 2)
        assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
        assert time.monotonic() - began < 4
        head, _, body = answer.partition(b"\r\n\r\n")
        assert b"connection: close" in head.lower()
        assert "did not arrive" in json.loads(body)["error"]["message"]
        with urllib.request.urlopen(f"{base}/api/health", timeout=5) as health:  # the server is still up
            assert health.status == 200


def test_a_body_that_arrives_in_time_reaches_its_route() -> None:
    with _server(body_timeout_s=5) as (_base, port):
        sock = socket.create_connection(("127.0.0.1", port))
        with sock:
            body = json.dumps({"calls": []}).encode()
            sock.sendall(
                b"POST /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Authorization: Bearer agent-token\r\nConnection: close\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
            )
            for byte in body:
                sock.sendall(bytes([byte]))
            answer = _answer_of(sock, 5)
        assert answer.startswith(b"HTTP/1.1 202"), answer[:300]


@contextmanager
def _actionspace_serve(tmp_path: Path) -> Iterator[int]:
    """A real ``actionspace serve`` with half-second deadlines on heads and bodies; its port."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    root = Path(__file__).resolve().parents[2]
    command = [
        str(Path(sys.executable).with_name("actionspace")), "serve", "--no-demo", "--host", "127.0.0.1",
        "--port", str(port), "--token", "admin-token-0000000000", "--store", f"sqlite://{tmp_path / 's.db'}",
        "--head-timeout", "0.5", "--body-timeout", "0.5",
    ]  # fmt: skip
    process = subprocess.Popen(command, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=1):
                    break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                output = process.stdout.read().decode() if process.stdout else ""
                raise AssertionError(f"actionspace serve did not start:\n{output[-2000:]}")
            time.sleep(0.2)  # waiting for another process to listen: no event to wait on
        yield port
    finally:
        process.terminate()
        try:
            assert process.wait(timeout=20) is not None  # a slow client does not hold the shutdown
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)


def _trickle(port: int, first: bytes, byte: bytes, within_s: float) -> tuple[bytes, float]:
    """Send ``first``, then ``byte`` every 0.1 s until the server answers; the answer and its delay."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(first)
        began = time.monotonic()
        sock.settimeout(0.1)
        answer = b""
        while time.monotonic() - began < within_s and not answer:
            try:
                sock.sendall(byte)
                answer = sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                break
        return answer + _answer_of(sock, 2), time.monotonic() - began


def test_actionspace_serve_answers_slow_heads_and_bodies_408_and_huge_headers_400_with_the_error_body(
    tmp_path: Path,
) -> None:
    with _actionspace_serve(tmp_path) as port:
        head, head_s = _trickle(port, b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ", b"a", 8)
        body, body_s = _trickle(
            port,
            b"POST /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer admin-token-0000000000\r\n"
            b"Content-Length: 9999\r\n\r\n{",
            b" ",
            8,
        )
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(b"GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Huge: " + b"a" * 40_000)
            huge = _answer_of(sock, 5)
        with socket.create_connection(("127.0.0.1", port)) as sock:  # kept alive, then idle
            sock.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            idle = _answer_of(sock, 5)
        _held = socket.create_connection(("127.0.0.1", port))  # left half-sent while the server stops
        _held.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=5) as health:
            assert health.status == 200
    _held.close()
    assert head.startswith(b"HTTP/1.1 408") and head_s < 5, head[:200]
    assert "did not arrive" in json.loads(head.partition(b"\r\n\r\n")[2])["error"]["message"]
    assert body.startswith(b"HTTP/1.1 408") and body_s < 5, body[:200]
    assert huge.startswith(b"HTTP/1.1 400"), huge[:200]
    huge_head, _, huge_body = huge.partition(b"\r\n\r\n")
    assert b"content-type: application/json" in huge_head.lower()
    assert "error" in json.loads(huge_body) and b"Traceback" not in huge
    assert idle.startswith(b"HTTP/1.1 200") and idle.count(b"HTTP/1.1") == 1, idle  # closed without a word
