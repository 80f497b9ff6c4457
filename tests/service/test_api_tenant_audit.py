"""What a token of one tenant can learn of another's, and two service processes sharing one store."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from actionspace import Principal
from actionspace.service import RunnerConfig, create_app
from tests.service.apptools import TOKENS, World, bearer, build_runtime, served

TENANTS = {
    "t2-agent": Principal(id="a2", scopes=("runs:write", "runs:read", "read:*", "external:*"), tenant="t2"),
    "t1-agent": Principal(id="a1", scopes=("runs:write", "runs:read", "read:*"), tenant="t1"),
    "t1-metrics": Principal(id="m1", scopes=("metrics:read",), tenant="t1"),
    "t2-decider": Principal(id="d2", scopes=("approvals:read", "approvals:decide"), tenant="t2"),
    "admin-token": Principal(id="admin", scopes=("*",)),
}
PAY = {"name": "send_payment", "arguments": {"to": "acct-9", "amount": 500}}


def _tools(client: TestClient, token: str) -> dict[str, Any]:
    view = client.get("/api/metrics", headers=bearer(token)).json()
    return {t["tool"]: t for t in view["tools"]} | {"$runs": view["runs"]}


def test_metrics_count_only_the_runs_of_the_readers_tenant() -> None:
    with served(tokens=TENANTS) as (client, _rt, _world, _sig, app):
        leak = {"name": "exfil_acct_12345", "arguments": {}}
        client.post("/api/runs", json={"calls": [leak], "run_id": "t2run"}, headers=bearer("t2-agent"))
        mine = {"name": "lookup", "arguments": {"city": "Oslo"}}
        client.post("/api/runs", json={"calls": [mine], "run_id": "t1run"}, headers=bearer("t1-agent"))
        assert app.state.runner.wait("t2run", timeout=10) == "error"
        assert app.state.runner.wait("t1run", timeout=10) == "ok"
        seen = _tools(client, "t1-metrics")
        assert "exfil_acct_12345" not in seen
        assert seen["$runs"] == 1 and seen["lookup"]["calls"] == 1
        everything = _tools(client, "admin-token")
        assert everything["$runs"] == 2 and "exfil_acct_12345" in everything


def test_an_approval_decided_twice_at_once_is_approved_once_and_pays_once() -> None:
    with served(tokens={**TOKENS, **TENANTS}) as (client, _rt, world, signalling, app):
        client.post("/api/runs", json={"calls": [PAY], "run_id": "twice"}, headers=bearer("agent-token"))
        request = signalling.wait_for_request()
        gate = threading.Barrier(4)
        codes: list[int] = []

        def decide(action: str) -> None:
            gate.wait(5)
            codes.append(
                client.post(
                    f"/api/approvals/{request.id}/{action}", headers=bearer("approver-token")
                ).status_code
            )

        threads = [
            threading.Thread(target=decide, args=(a,)) for a in ("approve", "approve", "deny", "approve")
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        assert sorted(codes) == [200, 409, 409, 409]
        status = app.state.runner.wait("twice", timeout=10)
        decided = client.get(f"/api/approvals/{request.id}", headers=bearer("approver-token")).json()
        assert (status, len(world.payments)) == (
            ("ok", 1) if decided["status"] == "consumed" else ("error", 0)
        )


def test_a_second_process_on_the_same_store_approves_a_run_the_first_waits_on_and_it_pays_once(
    tmp_path: Path,
) -> None:
    store = f"sqlite:///{tmp_path / 'shared.db'}"
    world = World()
    first, signalling = build_runtime(world, store)
    second, _ = build_runtime(world, store)
    apps = [
        create_app(rt, tokens=TOKENS, runner=RunnerConfig(approval_poll_s=0.02)) for rt in (first, second)
    ]
    try:
        with TestClient(apps[0]) as a, TestClient(apps[1]) as b:
            a.post("/api/runs", json={"calls": [PAY], "run_id": "shared"}, headers=bearer("agent-token"))
            request = signalling.wait_for_request()
            assert (
                b.post(f"/api/approvals/{request.id}/approve", headers=bearer("approver-token")).status_code
                == 200
            )
            assert apps[0].state.runner.wait("shared", timeout=10) == "ok"
            resumed = apps[1].state.runner.resumed(request.id, "shared")
            assert resumed is None or resumed.result(timeout=10) == "ok"
            assert world.payments == [{"id": "p1", "to": "acct-9", "amount": 500}]
            row = b.get("/api/runs/shared", headers=bearer("admin-token")).json()
            assert row["status"] == "ok"
    finally:
        for app in apps:
            app.state.runner.close()
        first.close()
        second.close()
