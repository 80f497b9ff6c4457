"""The background runner under faults: a flaky approval store, a decision that never comes, shutdown."""

from __future__ import annotations

import asyncio
import inspect
import sqlite3
import threading
from typing import Any

import pytest

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


def test_a_run_cancelled_before_its_first_step_is_forgotten_and_its_call_closed() -> None:
    # closing the runner cancels every task of its lanes (close()'s cancel_all); a run whose task
    # had not taken its first step never entered the runner's guard: it must not stay "running",
    # and its coroutine must be closed, not left to the collector ("never awaited")
    world = World()
    rt, _ = build_runtime(world)
    runner = BackgroundRuns(rt, RunnerConfig())
    lane = asyncio.new_event_loop()  # a lane whose loop this test turns by hand
    runner._lanes.loop_for = lambda _key: lane  # type: ignore[method-assign,assignment]
    made = _recording_runs(runner)

    def cancel_all() -> None:
        for task in asyncio.all_tasks(lane):
            task.cancel()

    try:
        rt.new_run("early")
        runner.start_calls([PAY], run_id="early", principal=rt.principal)
        assert runner.live("early") == "running"
        lane.call_soon_threadsafe(cancel_all)  # after the task is made, before its first step
        for _ in range(5):
            lane.call_soon(lane.stop)
            lane.run_forever()
        assert runner._futures["early"].cancelled()
        assert [inspect.getcoroutinestate(c) for c in made] == [inspect.CORO_CLOSED]
        assert runner.live("early") is None
        assert world.payments == []
    finally:
        lane.close()
        rt.close()


def test_a_run_the_closed_runner_cannot_take_is_closed_and_refused() -> None:
    world = World()
    rt, _ = build_runtime(world)
    runner = BackgroundRuns(rt, RunnerConfig())
    runner.close()
    try:
        made = _recording_runs(runner)
        with pytest.raises(RuntimeError, match="closed"):
            runner.start_calls([PAY], run_id="late", principal=rt.principal)
        assert [inspect.getcoroutinestate(c) for c in made] == [inspect.CORO_CLOSED]
    finally:
        rt.close()


def _recording_runs(runner: BackgroundRuns) -> list[Any]:
    """The coroutines ``runner.start_calls`` makes from now on, each as it was made."""
    made: list[Any] = []
    original = runner._calls

    def calls(*args: Any) -> Any:
        made.append(original(*args))
        return made[-1]

    runner._calls = calls  # type: ignore[method-assign,assignment]
    return made
