"""A server killed (SIGKILL) after a plan round ended with a node held for approval, before it
recorded that node's ``plan_node_held``, does not lose the approval: the server that takes the
decision runs the node inside its plan (its references' labels as the plan gives them), once, and
the run ends ``ok``, never ``policy_violation``.

The killed server is a real uvicorn process on a SQLite file whose runner dies at the first
``plan_node_held`` it would write; the second server serves the same file in this process.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.service import create_app
from tests.service.apptools import TOKENS, bearer
from tests.service.test_w27_run_continuation import ABC, _finished, _runtime, _sent_once
from tests.service.test_w44_killed_driver import ROOT, FileTally, _config, _lease_ended, _server


def serve_dying(store: str, steps: str, fd: int) -> None:
    """Serve ``store`` on the listening socket ``fd``; the process kills itself where the runner
    would record its first ``plan_node_held``, once the round's events are committed."""
    import uvicorn

    from actionspace.service import runner

    def die(rt: Runtime, _plan: Any, result: Any) -> None:
        rt.trace.events(result.run_id)  # what the round recorded is committed: only the note is lost
        os.kill(os.getpid(), signal.SIGKILL)

    vars(runner)["note_held"] = die
    rt = _runtime(store, FileTally(Path(steps)))  # type: ignore[arg-type]
    app = create_app(rt, tokens=TOKENS, runner=_config())
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    server.run(sockets=[socket.socket(fileno=fd)])


@contextmanager
def _dying(store: str, steps: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    code = (
        "import sys; from tests.service.test_w66_held_round_kill import serve_dying; "
        "serve_dying(*sys.argv[1:3], int(sys.argv[3]))"
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


def _killed_after_the_round(tmp_path: Path, run_id: str) -> tuple[str, str]:
    """Submit ABC; the server dies once its first round ended with b held; (store, request id)."""
    import httpx

    store, steps = f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "steps.txt"
    with _dying(store, steps) as (proc, base):
        deadline = time.monotonic() + 30
        while True:
            try:
                started = httpx.post(
                    f"{base}/api/runs",
                    json={"plan": ABC, "run_id": run_id},
                    headers=bearer("agent-token"),
                    timeout=60.0,
                )
                break
            except httpx.ConnectError:  # not listening yet; a slow answer is waited for, never sent twice
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
        assert started.status_code == 202, started.text
        assert proc.wait(timeout=30) == -signal.SIGKILL
    reader = _runtime(store, FileTally(steps))  # type: ignore[arg-type]
    try:
        kinds = [e.kind for e in reader.trace.events(run_id)]
        assert "plan_finished" in kinds and "plan_node_held" not in kinds and "run_finished" not in kinds
        held = [r for r in reader.approvals.list("pending") if r.run_id == run_id and r.node_id == "b"]
        assert len(held) == 1
        return store, held[0].id
    finally:
        reader.close()


@pytest.mark.parametrize("lapsed", [False, True], ids=["approved-under-lease", "approved-after-lease"])
def test_an_approval_of_a_node_whose_held_record_a_kill_cut_off_runs_it_in_its_plan_once(
    tmp_path: Path, lapsed: bool
) -> None:
    store, request_id = _killed_after_the_round(tmp_path, "h1")
    tally = FileTally(tmp_path / "steps.txt")
    assert tally.counts == {"a": 1}
    with _server(store, tally) as (client, rt, app):
        if lapsed:
            _lease_ended(rt, "h1")
        decided = client.post(f"/api/approvals/{request_id}/approve", headers=bearer("approver-token"))
        assert decided.status_code == 200, decided.text
        resumed = app.state.runner.resumed(request_id, "h1")
        assert resumed is not None
        assert resumed.result(timeout=60) == "ok"
        events = rt.trace.events("h1")
        assert tally.counts == {"a": 1, "b": 1, "c": 1}
        assert [f["status"] for f in _finished(events)] == ["ok"]
        assert _sent_once(rt, "h1") == {"a": 1, "b": 1, "c": 1}
        violations = [e.data for e in events if e.data.get("category") == "policy_violation"]
        assert violations == []
        assert rt.approvals.get(request_id).status == "consumed"  # type: ignore[union-attr]
