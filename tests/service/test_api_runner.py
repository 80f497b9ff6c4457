"""The background runner under faults: a flaky approval store, a decision that never comes, shutdown."""

from __future__ import annotations

import sqlite3
import threading

from actionspace.approval.requests import ApprovalRequest
from actionspace.service import BackgroundRuns, RunnerConfig
from tests.service.apptools import World, bearer, build_runtime, served

PAY = {"name": "send_payment", "arguments": {"to": "acct-9", "amount": 500}}


def test_a_run_survives_an_approval_store_that_fails_while_it_waits_and_pays_once() -> None:
    with served() as (client, _rt, world, signalling, app):
        failures = {"left": 0}
        read = signalling.inner.get
        lock = threading.Lock()
        failed_reads = threading.Event()

        def flaky_get(request_id: str) -> ApprovalRequest | None:
            with lock:
                if failures["left"] > 0:
                    failures["left"] -= 1
                    if failures["left"] == 0:
                        failed_reads.set()
                    raise sqlite3.OperationalError("database is locked")
            return read(request_id)

        client.post("/api/runs", json={"calls": [PAY], "run_id": "flaky"}, headers=bearer("agent-token"))
        request = signalling.wait_for_request()
        with lock:
            failures["left"] = 3
        signalling.inner.get = flaky_get  # type: ignore[method-assign]
        assert failed_reads.wait(10), "the runner stopped polling"
        decided = client.post(f"/api/approvals/{request.id}/approve", headers=bearer("approver-token"))
        assert decided.status_code == 200
        assert app.state.runner.wait("flaky", timeout=10) == "ok"
        assert world.payments == [{"id": "p1", "to": "acct-9", "amount": 500}]


def test_a_call_nobody_decides_ends_needs_approval_after_the_wait_and_the_run_finishes() -> None:
    world = World()
    rt, signalling = build_runtime(world)
    runner = BackgroundRuns(rt, RunnerConfig(approval_poll_s=0.02, approval_wait_s=0.2))
    try:
        rt.new_run("nobody")
        runner.start_calls([PAY], run_id="nobody", principal=rt.principal)
        assert runner.wait("nobody", timeout=10) == "error"
        request = signalling.wait_for_request()
        assert rt.approvals.get(request.id) is not None
        assert rt.approvals.get(request.id).status == "pending"  # type: ignore[union-attr]
        finished = [e for e in rt.trace.events("nobody") if e.kind == "run_finished"]
        assert finished and finished[0].data["failed"] == {"nobody:c1": "needs_approval"}
        assert world.payments == []
    finally:
        runner.close()
        rt.close()


def test_closing_the_runner_cancels_a_waiting_run_without_running_its_call() -> None:
    world = World()
    rt, signalling = build_runtime(world)
    runner = BackgroundRuns(rt, RunnerConfig(approval_poll_s=0.02))
    try:
        rt.new_run("closing")
        runner.start_calls([PAY], run_id="closing", principal=rt.principal)
        signalling.wait_for_request()
        assert runner.live("closing") == "waiting_approval"
        runner.close(timeout=5)
        assert runner.live("closing") is None
        assert world.payments == []
    finally:
        runner.close()
        rt.close()
