"""A hostile client against a real ``actionspace serve`` child, over raw sockets and HTTP.

What the in-process tests prove of the application holds through uvicorn and the command's own
options: two ``Authorization`` headers, a head the server cannot read, a body it cannot decode,
and a principal starting more runs than ``--max-live-runs`` lets it have, are each a typed 4xx.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from actionspace import tool

ADMIN = "admin-token-w18-0000000000"


@tool(effect="external", requires_approval=True)
def wire_funds(to: str) -> dict[str, str]:
    """Send money; always held for a person.

    Args:
        to: Recipient account.
    """
    return {"to": to}


HELD_TOOLS = [wire_funds]
"""What the child serves: a call of it waits for a person, so its run stays live."""


@contextmanager
def _serve(tmp_path: Path, *options: str) -> Iterator[int]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    root = Path(__file__).resolve().parents[2]
    command = [
        str(Path(sys.executable).with_name("actionspace")), "serve", "--no-demo", "--host", "127.0.0.1",
        "--port", str(port), "--token", ADMIN, "--store", f"sqlite:///{tmp_path / 's.db'}",
        "--tools", "tests.service.test_w18_real_serve:HELD_TOOLS", *options,
    ]  # fmt: skip
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(root)])),
    }
    process = subprocess.Popen(command, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
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
            process.wait(timeout=20)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)


def _raw(port: int, request: bytes) -> tuple[int, dict[str, Any]]:
    """Send ``request`` as is; the status and JSON body of the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        answer = b""
        while b"\r\n\r\n" not in answer or len(answer.partition(b"\r\n\r\n")[2]) < _length(answer):
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), json.loads(body[: _length(answer)])


def _length(answer: bytes) -> int:
    for line in answer.partition(b"\r\n\r\n")[0].split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 1 << 30


def test_a_real_server_answers_each_hostile_request_with_a_typed_4xx(tmp_path: Path) -> None:
    with _serve(tmp_path) as port:
        status, body = _raw(
            port,
            b"GET /api/runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer nobody\r\n"
            b"Authorization: Bearer " + ADMIN.encode() + b"\r\nConnection: close\r\n\r\n",
        )
        assert (status, body["error"]["category"]) == (400, "invalid_arguments"), body
        status, body = _raw(port, b"GET /api/runs HTTP/1.1\r\nHost: x\r\nX-Huge: " + b"a" * 40_000)
        assert (status, body["error"]["category"]) == (400, "invalid_arguments"), body
        payload = b'{"calls": ["\xff\xfe"]}'
        status, body = _raw(
            port,
            b"POST /api/runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + ADMIN.encode() + b"\r\n"
            b"Content-Type: application/json\r\nConnection: close\r\n"
            b"Content-Length: " + str(len(payload)).encode() + b"\r\n\r\n" + payload,
        )
        assert (status, body["error"]["category"]) == (400, "invalid_arguments"), body
        status, body = _raw(port, b"GET /api/runs HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert (status, body["error"]["category"]) == (401, "permission_denied"), body


def test_serve_max_live_runs_bounds_the_runs_one_principal_has_live(tmp_path: Path) -> None:
    with _serve(tmp_path, "--max-live-runs", "2") as port:
        headers = {"Authorization": f"Bearer {ADMIN}"}
        call = {"name": "wire_funds", "arguments": {"to": "acct-9"}}
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=30) as client:
            for n in range(2):
                answer = client.post("/api/runs", json={"run_id": f"held_{n}", "calls": [call]})
                assert answer.status_code == 202, answer.text
            refused = client.post("/api/runs", json={"run_id": "third", "calls": [call]})
            assert refused.status_code == 429, refused.text
            assert refused.json()["error"]["category"] == "rate_limited" and refused.headers["Retry-After"]
            assert client.get("/api/runs/third").status_code == 404  # nothing of it was written
            deadline = time.monotonic() + 60
            while not (pending := client.get("/api/approvals", params={"run": "held_0"}).json()):
                assert time.monotonic() < deadline, "the held call was never filed"
                time.sleep(0.05)  # another process files it: polled as a console does
            decided = client.post(f"/api/approvals/{pending[0]['request_id']}/deny")
            assert decided.status_code == 200, decided.text
            while (
                again := client.post("/api/runs", json={"run_id": "third", "calls": [call]})
            ).status_code == 429:
                assert time.monotonic() < deadline, again.text
                time.sleep(0.05)
            assert again.status_code == 202, again.text
