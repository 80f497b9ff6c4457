"""A run whose server was killed (SIGKILL: no release) while a call waited for approval is taken
over by the server that takes the approval, once the killed server's lease on it has ended.

The first server runs in a real uvicorn process on a SQLite file and is killed; the second serves
the same file in this process. The tools write what they did to a file both processes append to.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from actionspace import Runtime
from actionspace.service import RunnerConfig, create_app
from tests.service.apptools import TOKENS, bearer
from tests.service.test_w27_run_continuation import ABC, CALLS, _finished, _held, _runtime, _sent_once

LEASE_S = 1.0
ROOT = Path(__file__).resolve().parents[2]


class FileTally:
    """How many times each step really ran, in every process that shares ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()

    def ran(self, step: str) -> dict[str, Any]:
        with self.lock, self.path.open("a", encoding="utf-8") as out:
            out.write(step + "\n")
            out.flush()
            os.fsync(out.fileno())
        return {"step": step, "done": True}

    @property
    def counts(self) -> Counter[str]:
        if not self.path.exists():
            return Counter()
        return Counter(self.path.read_text(encoding="utf-8").split())


def _config() -> RunnerConfig:
    return RunnerConfig(approval_poll_s=0.02, driver_lease_s=LEASE_S)


def serve(store: str, steps: str, fd: int) -> None:
    """Serve ``store`` on the listening socket ``fd`` until killed (the killed server's process)."""
    import uvicorn

    rt = _runtime(store, FileTally(Path(steps)))  # type: ignore[arg-type]
    app = create_app(rt, tokens=TOKENS, runner=_config())
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    server.run(sockets=[socket.socket(fileno=fd)])


@contextmanager
def _killable(store: str, steps: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """A server process on ``store``; yields it and its base URL, and kills it at the end."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    code = (
        "import sys; from tests.service.test_w44_killed_driver import serve; "
        "serve(*sys.argv[1:3], int(sys.argv[3]))"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, store, str(steps), str(sock.fileno())],
        cwd=ROOT,
        pass_fds=(sock.fileno(),),
    )
    sock.close()
    try:
        yield proc, f"http://127.0.0.1:{port}"
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


@contextmanager
def _server(store: str, tally: FileTally) -> Iterator[tuple[TestClient, Runtime, FastAPI]]:
    rt = _runtime(store, tally)  # type: ignore[arg-type]
    app = create_app(rt, tokens=TOKENS, runner=_config())
    try:
        with TestClient(app) as client:
            yield client, rt, app
    finally:
        app.state.runner.close()
        rt.close()


def _start_and_kill(tmp_path: Path, body: dict[str, Any], run_id: str, node: str) -> tuple[str, str]:
    """Submit ``body`` to a server process, kill it while ``node`` waits; (store, request id)."""
    import httpx

    store, steps = f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "steps.txt"
    with _killable(store, steps) as (proc, base):
        deadline = time.monotonic() + 30
        while True:
            try:
                started = httpx.post(
                    f"{base}/api/runs",
                    json={**body, "run_id": run_id},
                    headers=bearer("agent-token"),
                    timeout=60.0,
                )
                break
            except httpx.ConnectError:  # not listening yet; a slow answer is waited for, never sent twice
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
        assert started.status_code == 202, started.text
        reader = _runtime(store, FileTally(steps))  # type: ignore[arg-type]
        try:
            request_id = _held(reader, run_id, node)
        finally:
            reader.close()
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    return store, request_id


def _lease_ended(rt: Runtime, run_id: str) -> None:
    """Wait until the last lease recorded on ``run_id`` has ended (read against this clock)."""
    until = max(float(e.data["until"]) for e in rt.trace.events(run_id) if "until" in e.data)
    deadline = time.monotonic() + 30
    while time.time() <= until + 0.05:
        assert time.monotonic() < deadline, "the lease never ended"
        threading.Event().wait(0.05)


@pytest.mark.parametrize("lapsed", [False, True], ids=["approved-under-lease", "approved-after-lease"])
def test_a_plan_whose_server_was_killed_runs_its_later_nodes_once_and_ends(
    tmp_path: Path, lapsed: bool
) -> None:
    store, request_id = _start_and_kill(tmp_path, {"plan": ABC}, "k1", "b")
    tally = FileTally(tmp_path / "steps.txt")
    assert tally.counts == {"a": 1}
    with _server(store, tally) as (client, rt, app):
        if lapsed:
            _lease_ended(rt, "k1")
        decided = client.post(f"/api/approvals/{request_id}/approve", headers=bearer("approver-token"))
        assert decided.status_code == 200, decided.text
        resumed = app.state.runner.resumed(request_id, "k1")
        assert resumed is not None
        assert resumed.result(timeout=30) == "ok"
        events = rt.trace.events("k1")
        assert tally.counts == {"a": 1, "b": 1, "c": 1}
        assert [f["status"] for f in _finished(events)] == ["ok"]
        assert _sent_once(rt, "k1") == {"a": 1, "b": 1, "c": 1}
        submitted = next(e.data for e in events if e.kind == "service_run_submitted")
        taken = [e.data for e in events if e.kind == "service_run_driver" and e.data["action"] == "continued"]
        assert [t["from"] for t in taken] == [submitted["server"]]
        assert client.get("/api/runs/k1", headers=bearer("agent-token")).json()["status"] == "ok"


def test_calls_whose_server_was_killed_send_the_later_outputs_once(tmp_path: Path) -> None:
    store, request_id = _start_and_kill(tmp_path, CALLS, "k2", "c2")
    tally = FileTally(tmp_path / "steps.txt")
    with _server(store, tally) as (client, rt, app):
        decided = client.post(f"/api/approvals/{request_id}/approve", headers=bearer("approver-token"))
        assert decided.status_code == 200, decided.text
        resumed = app.state.runner.resumed(request_id, "k2")
        assert resumed is not None and resumed.result(timeout=30) == "ok"
        assert tally.counts == {"a": 1, "b": 1, "c": 1}
        finished = _finished(rt.trace.events("k2"))
        assert [(f["status"], f["calls"]) for f in finished] == [("ok", 3)]
        assert _sent_once(rt, "k2") == {"c1": 1, "c2": 1, "c3": 1}
