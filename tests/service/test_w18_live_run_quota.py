"""One principal cannot start runs without bound: past its live runs it is answered 429, typed.

Each run a principal started through the API counts until it ends; one past
``create_app(max_live_runs=)`` is refused ``429 rate_limited`` with ``Retry-After`` and leaves
nothing behind (not even its run id taken), while other principals start theirs as before, and
the principal starts again once one of its runs has ended.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient

from actionspace import Principal
from actionspace.service import RunnerConfig, create_app
from tests.service.apptools import TOKENS, SignallingApprovals, World, bearer, build_runtime

_PAYMENT = {"name": "send_payment", "arguments": {"to": "acct-1", "amount": 5}}
_TOKENS = {
    **TOKENS,
    "agent2-token": Principal(id="agent2", scopes=TOKENS["agent-token"].scopes),
    "other-tenant-agent": Principal(id="agent", tenant="t2", scopes=TOKENS["agent-token"].scopes),
}


@contextmanager
def _app(max_live_runs: int) -> Iterator[tuple[TestClient, FastAPI, SignallingApprovals, Any]]:
    rt, signalling = build_runtime(World())
    app = create_app(
        rt, tokens=_TOKENS, runner=RunnerConfig(approval_poll_s=0.02), max_live_runs=max_live_runs
    )
    try:
        with TestClient(app, raise_server_exceptions=False) as client:
            yield client, app, signalling, rt
    finally:
        app.state.runner.close()
        rt.close()


def _held_run(client: TestClient, token: str, run_id: str) -> Any:
    """Start a run whose one call waits for a person: it stays live until decided."""
    return client.post("/api/runs", headers=bearer(token), json={"run_id": run_id, "calls": [_PAYMENT]})


def test_a_principal_past_its_live_runs_is_refused_429_and_nothing_of_the_run_is_written() -> None:
    with _app(max_live_runs=2) as (client, app, signalling, rt):
        requests = []
        for n in range(2):
            assert _held_run(client, "agent-token", f"held_{n}").status_code == 202
            requests.append(signalling.wait_for_request())
        refused = _held_run(client, "agent-token", "one_too_many")
        assert refused.status_code == 429, refused.text
        assert refused.json()["error"]["category"] == "rate_limited"
        assert int(refused.headers["Retry-After"]) >= 1
        assert rt.trace.events("one_too_many") == []
        # the bound is each principal's own: another principal, and the same id in another tenant, start
        assert _held_run(client, "agent2-token", "someone_else").status_code == 202
        assert _held_run(client, "other-tenant-agent", "other_tenant").status_code == 202
        # one of the principal's runs ends: it may start one more (the refused id was never taken)
        denied = client.post(f"/api/approvals/{requests[0].id}/deny", headers=bearer("admin-token"))
        assert denied.status_code == 200
        app.state.runner.wait("held_0", timeout=10)
        deadline = time.monotonic() + 10
        while (again := _held_run(client, "agent-token", "one_too_many")).status_code == 429:
            assert time.monotonic() < deadline, again.text
            time.sleep(0.02)
        assert again.status_code == 202, again.text


def test_many_starts_at_once_admit_exactly_the_bound() -> None:
    with _app(max_live_runs=3) as (client, _, _signalling, rt):
        barrier = threading.Barrier(12)
        answers: list[int] = []
        lock = threading.Lock()

        def start(n: int) -> None:
            barrier.wait()
            status = _held_run(client, "agent-token", f"burst_{n}").status_code
            with lock:
                answers.append(status)

        threads = [threading.Thread(target=start, args=(n,)) for n in range(12)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert sorted(answers) == [202] * 3 + [429] * 9
        started = [n for n in range(12) if rt.trace.events(f"burst_{n}")]
        assert len(started) == 3


def test_a_refused_start_of_a_taken_id_does_not_count_against_the_principal() -> None:
    """A 409 (the id is someone's live run) leaves the principal's count as it was."""
    with _app(max_live_runs=1) as (client, _, signalling, _rt):
        assert _held_run(client, "agent2-token", "shared").status_code == 202
        signalling.wait_for_request()
        for _ in range(3):
            assert _held_run(client, "agent-token", "shared").status_code == 409
        assert _held_run(client, "agent-token", "mine").status_code == 202
