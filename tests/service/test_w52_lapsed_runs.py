"""A run whose server was killed (SIGKILL) while no call waited for a person is picked up by a live
server once the killed server's lease on it ended: what committed is replayed from the ledger, the
write in flight at the kill is settled as the ledger's recovery says (never sent twice), the rest
runs once and the run ends.

The killed server is a real uvicorn process on a SQLite file; the servers that pick the run up
serve the same file in this process. The tools write what they did to a file all processes share.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from actionspace import Runtime
from actionspace.ledger.status import Committed, NotCommitted
from actionspace.service import RunnerConfig, create_app
from actionspace.trace.events import TraceEvent
from tests.service.apptools import TOKENS, bearer
from tests.service.test_w27_run_continuation import _finished, _node, _runtime, _sent_once
from tests.service.test_w44_killed_driver import FileTally

LEASE_S = 1.0
ROOT = Path(__file__).resolve().parents[2]
PLANS = {
    "none": {"nodes": [_node("a", "stamp"), _node("b", "slow_none", "a"), _node("c", "stamp", "b")]},
    "query": {"nodes": [_node("a", "stamp"), _node("b", "slow_query", "a"), _node("c", "stamp", "b")]},
}


def _runtime_with_slow(store: str, tally: FileTally, *, block: bool) -> Runtime:
    """The runtime of ``_runtime`` with two slow writes (they block for ever when ``block``):
    ``slow_none`` cannot say whether it committed, ``slow_query`` can (it asks the shared file)."""
    rt = _runtime(store, tally)  # type: ignore[arg-type]

    def work(step: str) -> dict[str, Any]:
        tally.ran(f"{step}-start")
        if block:
            threading.Event().wait(3600)
        return tally.ran(step)

    def slow_none(step: str) -> dict[str, Any]:
        return work(step)

    def slow_query(step: str) -> dict[str, Any]:
        return work(step)

    def asked(*, key: str, arguments: dict[str, Any]) -> Committed | NotCommitted:
        done = tally.counts[str(arguments["step"])] > 0
        return Committed(result={"step": arguments["step"], "done": True}) if done else NotCommitted()

    rt.tool(effect="write", writes=["box:{step}"])(slow_none)
    rt.tool(effect="write", writes=["box:{step}"], idempotency="query", status_query=asked)(slow_query)
    return rt


def _config() -> RunnerConfig:
    return RunnerConfig(approval_poll_s=0.02, driver_lease_s=LEASE_S)


def serve(store: str, steps: str, fd: int) -> None:
    """Serve ``store`` on the listening socket ``fd`` until killed (the killed server's process)."""
    import uvicorn

    rt = _runtime_with_slow(store, FileTally(Path(steps)), block=True)
    app = create_app(rt, tokens=TOKENS, runner=_config())
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    server.run(sockets=[socket.socket(fileno=fd)])


def _until(condition: Any, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        threading.Event().wait(0.02)


def _start_and_kill(tmp_path: Path, body: dict[str, Any], run_id: str) -> str:
    """Submit ``body`` to a server process and kill it while ``b``'s tool runs; the store URL."""
    import httpx

    store, steps = f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "steps.txt"
    tally = FileTally(steps)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    code = (
        "import sys; from tests.service.test_w52_lapsed_runs import serve; "
        "serve(*sys.argv[1:3], int(sys.argv[3]))"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, store, str(steps), str(sock.fileno())],
        cwd=ROOT,
        pass_fds=(sock.fileno(),),
    )
    sock.close()
    try:
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
        _until(lambda: tally.counts["b-start"] == 1, "b's tool never started")
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
    return store


@contextmanager
def _server(store: str, tally: FileTally) -> Iterator[tuple[TestClient, Runtime, FastAPI]]:
    rt = _runtime_with_slow(store, tally, block=False)
    app = create_app(rt, tokens=TOKENS, runner=_config())
    try:
        with TestClient(app) as client:
            yield client, rt, app
    finally:
        app.state.runner.close()
        rt.close()


def _count_scans(app: FastAPI) -> list[float]:
    """The times the runner of ``app`` began a scan for lapsed runs from now on (appended by its
    scan thread)."""
    began: list[float] = []
    drives = app.state.runner._drives
    lapsed = drives.lapsed

    def counted(live: Any) -> Any:
        began.append(time.monotonic())
        return lapsed(live)

    drives.lapsed = counted
    return began


def _continued(events: list[TraceEvent]) -> list[dict[str, Any]]:
    return [
        dict(e.data) for e in events if e.kind == "service_run_driver" and e.data["action"] == "continued"
    ]


def _check_ended(rt: Runtime, run_id: str, kind: str, tally: FileTally) -> None:
    events = rt.trace.events(run_id)
    finished = _finished(events)
    submitted = next(e.data for e in events if e.kind == "service_run_submitted")
    assert [t["from"] for t in _continued(events)] == [submitted["server"]]
    replayed = {e.call_id for e in events if e.kind == "observation" and e.data.get("replayed")}
    assert f"{run_id}:a" in replayed  # committed before the kill: answered from the ledger
    if kind == "none":  # in flight at the kill, unable to say: a person settles it, nothing resent
        assert tally.counts == {"a": 1, "b-start": 1}
        assert [f["status"] for f in finished] == ["partial"]
        assert finished[0]["failed"] == {"b": "unknown_commit", "c": "cancelled"}
        (entry,) = [e for e in rt.ledger.list(limit=1000) if e.run_id == run_id and e.node_id == "b"]
        assert entry.state == "unknown_commit"
        assert _sent_once(rt, run_id) == {"a": 1, "b": 1}
    else:  # the status query says it did not commit: sent again with its key, once, then c
        assert tally.counts == {"a": 1, "b-start": 2, "b": 1, "c": 1}
        assert [f["status"] for f in finished] == ["ok"]
        assert _sent_once(rt, run_id) == {"a": 1, "b": 1, "c": 1}


@pytest.mark.parametrize("kind", ["none", "query"])
def test_a_plan_whose_server_was_killed_mid_tool_is_picked_up_and_ends(tmp_path: Path, kind: str) -> None:
    store = _start_and_kill(tmp_path, {"plan": PLANS[kind]}, "m1")
    tally = FileTally(tmp_path / "steps.txt")
    with _server(store, tally) as (client, rt, _app):
        _until(lambda: _finished(rt.trace.events("m1")), "the run was never picked up")
        _check_ended(rt, "m1", kind, tally)
        row = client.get("/api/runs/m1", headers=bearer("agent-token")).json()
        assert row["status"] == _finished(rt.trace.events("m1"))[0]["status"]


def test_calls_whose_server_was_killed_mid_tool_are_picked_up_and_the_later_ones_sent_once(
    tmp_path: Path,
) -> None:
    calls = [
        {"name": "stamp", "arguments": {"step": "a"}, "id": "k1"},
        {"name": "slow_none", "arguments": {"step": "b"}, "id": "k2"},
        {"name": "stamp", "arguments": {"step": "c"}, "id": "k3"},
    ]
    store = _start_and_kill(tmp_path, {"calls": calls}, "m3")
    tally = FileTally(tmp_path / "steps.txt")
    with _server(store, tally) as (_client, rt, _app):
        _until(lambda: _finished(rt.trace.events("m3")), "the run was never picked up")
        (finished,) = _finished(rt.trace.events("m3"))
        assert tally.counts == {"a": 1, "b-start": 1, "c": 1}
        assert _sent_once(rt, "m3") == {"c1": 1, "c2": 1, "c3": 1}
        assert (finished["status"], finished["calls"], finished["failed"]) == (
            "partial",
            3,
            {"k2": "unknown_commit"},
        )


def test_two_servers_racing_for_a_killed_servers_run_continue_it_once(tmp_path: Path) -> None:
    store = _start_and_kill(tmp_path, {"plan": PLANS["query"]}, "m2")
    tally = FileTally(tmp_path / "steps.txt")
    with ExitStack() as stack:
        _c1, rt1, app1 = stack.enter_context(_server(store, tally))
        _c2, _rt2, app2 = stack.enter_context(_server(store, tally))
        scans = [_count_scans(app1), _count_scans(app2)]
        _until(lambda: _finished(rt1.trace.events("m2")), "the run was never picked up")
        ended = [len(s) for s in scans]
        # a scan begun after the run ended has ended once the one after it began (scans follow
        # one another on each server's scan thread)
        _until(
            lambda: all(len(s) >= n + 2 for s, n in zip(scans, ended, strict=True)), "no scan after the end"
        )
        _check_ended(rt1, "m2", "query", tally)
        assert len(_finished(rt1.trace.events("m2"))) == 1
