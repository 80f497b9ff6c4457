"""The API through a real uvicorn server on a free port: a run waits for approval over HTTP."""

from __future__ import annotations

import httpx

from actionspace.service import RunnerConfig, create_app
from tests.service.apptools import TOKENS, World, bearer, build_runtime, uvicorn_server


def test_a_run_started_over_http_waits_for_an_approval_given_over_http_and_pays_once() -> None:
    world = World()
    rt, signalling = build_runtime(world)
    app = create_app(rt, tokens=TOKENS, runner=RunnerConfig(approval_poll_s=0.05))
    try:
        with uvicorn_server(app) as base, httpx.Client(base_url=base, timeout=10) as http:
            assert http.get("/api/health").json()["status"] == "ok"
            assert http.get("/api/runs").status_code == 401
            pay = {"name": "send_payment", "arguments": {"to": "acct-1", "amount": 42}}
            started = http.post("/api/runs", json={"calls": [pay]}, headers=bearer("agent-token"))
            assert started.status_code == 202
            run_id = started.json()["run_id"]
            request = signalling.wait_for_request()
            pending = http.get("/api/approvals", headers=bearer("approver-token")).json()
            assert [p["request_id"] for p in pending] == [request.id]
            approved = http.post(f"/api/approvals/{request.id}/approve", headers=bearer("approver-token"))
            assert approved.status_code == 200 and approved.json()["decided_by"] == "alice"
            assert app.state.runner.wait(run_id, timeout=10) == "ok"
            row = http.get(f"/api/runs/{run_id}", headers=bearer("reader-token")).json()
            assert row["status"] == "ok"
            assert world.payments == [{"id": "p1", "to": "acct-1", "amount": 42}]
    finally:
        app.state.runner.close()
        rt.close()
