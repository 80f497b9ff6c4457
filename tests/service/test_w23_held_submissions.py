"""What runs waiting for a person hold of their submissions is bounded in bytes, per tenant.

A run keeps its plan or raw outputs in memory until it ends, and a call held for approval keeps
it live for up to a day: bounded in runs alone (1000 per principal), a client parked runs of the
largest body accepted until the process ran out of memory.
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
_AGENT = TOKENS["agent-token"].scopes
_TOKENS = {
    **TOKENS,
    "agent2-token": Principal(id="agent2", scopes=_AGENT),
    "t2-token": Principal(id="agent", tenant="t2", scopes=_AGENT),
}
_MIB = 1024 * 1024


@contextmanager
def _app(**options: Any) -> Iterator[tuple[TestClient, FastAPI, SignallingApprovals, Any]]:
    rt, signalling = build_runtime(World())
    app = create_app(rt, tokens=_TOKENS, runner=RunnerConfig(approval_poll_s=0.02), **options)
    try:
        with TestClient(app, raise_server_exceptions=False) as client:
            yield client, app, signalling, rt
    finally:
        app.state.runner.close()
        rt.close()


def _held_run(client: TestClient, token: str, run_id: str, padding: int) -> Any:
    """Start a run whose first call waits for a person, a later output of ``padding`` bytes held with it."""
    calls = [_PAYMENT, "x" * padding]
    return client.post("/api/runs", headers=bearer(token), json={"run_id": run_id, "calls": calls})


def test_a_tenant_whose_waiting_runs_hold_64_mib_is_refused_429_and_another_tenant_is_not() -> None:
    with _app() as (client, app, signalling, rt):
        requests = []
        for n in range(4):  # 4 x 15 MiB: under the default 64 MiB
            assert _held_run(client, "agent-token", f"held_{n}", 15 * _MIB).status_code == 202
            requests.append(signalling.wait_for_request())
        for token in ("agent-token", "agent2-token"):  # the tenant's bound, whichever principal starts
            refused = _held_run(client, token, "one_too_many", 15 * _MIB)
            assert refused.status_code == 429, refused.text
            assert refused.json()["error"]["category"] == "rate_limited"
            assert int(refused.headers["Retry-After"]) >= 1
            assert rt.trace.events("one_too_many") == []
        # a small one still fits, and another tenant is not held up by this one's bytes
        assert _held_run(client, "agent2-token", "small", 1000).status_code == 202
        assert _held_run(client, "t2-token", "other_tenant", 15 * _MIB).status_code == 202
        # one run ends: its bytes are given back
        denied = client.post(f"/api/approvals/{requests[0].id}/deny", headers=bearer("admin-token"))
        assert denied.status_code == 200
        app.state.runner.wait("held_0", timeout=30)
        deadline = time.monotonic() + 30
        while (again := _held_run(client, "agent-token", "one_too_many", 15 * _MIB)).status_code == 429:
            assert time.monotonic() < deadline, again.text
            time.sleep(0.05)
        assert again.status_code == 202, again.text


def test_a_submission_larger_than_a_tenant_may_hold_at_all_is_413_and_not_written() -> None:
    with _app(max_held_bytes=100_000) as (client, _served, _signalling, rt):
        refused = _held_run(client, "agent-token", "too_large", 200_000)
        assert refused.status_code == 413, refused.text
        assert refused.json()["error"]["category"] == "invalid_arguments"
        assert rt.trace.events("too_large") == []
        assert _held_run(client, "agent-token", "fits", 50_000).status_code == 202


def test_starts_at_once_admit_exactly_the_bytes_the_bound_leaves_room_for() -> None:
    with _app(max_held_bytes=1_000_000) as (client, _served, _signalling, _rt):
        barrier = threading.Barrier(10)
        answers: list[int] = []
        lock = threading.Lock()

        def start(n: int) -> None:
            barrier.wait()
            status = _held_run(client, "agent-token", f"at_once_{n}", 300_000).status_code
            with lock:
                answers.append(status)

        threads = [threading.Thread(target=start, args=(n,)) for n in range(10)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert sorted(answers) == [202] * 3 + [429] * 7


def test_a_bound_below_one_byte_is_a_configuration_error() -> None:
    from actionspace.errors import ConfigurationError

    rt, _ = build_runtime(World())
    try:
        for bad in (0, -1):
            try:
                create_app(rt, tokens=_TOKENS, max_held_bytes=bad)
            except ConfigurationError as exc:
                assert "max_held_bytes" in str(exc)
            else:
                raise AssertionError(f"max_held_bytes={bad} was accepted")
    finally:
        rt.close()
