"""The four-eyes rule through the API: with ``distinct_approver`` on, the principal that proposed a
call may not approve it (403 ``permission_denied``, the request left pending, nothing recorded);
another principal may; off, a single principal decides its own calls as before."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient

from actionspace import Principal, Runtime
from actionspace.service import RunnerConfig, create_app
from tests.service.apptools import TOKENS, World, bearer, build_runtime

ADMIN = bearer("admin-token")
APPROVER = bearer("approver-token")
PROPOSER = TOKENS["admin-token"]
PAY = {"name": "send_payment", "arguments": {"to": "acct-9", "amount": 500}}


@contextmanager
def _served(**options: Any) -> Iterator[tuple[TestClient, Runtime, World, FastAPI]]:
    world = World()
    rt, signalling = build_runtime(world)
    app = create_app(rt, tokens=TOKENS, runner=RunnerConfig(approval_poll_s=0.05), **options)
    app.state.filed = signalling
    try:
        with TestClient(app) as client:
            yield client, rt, world, app
    finally:
        app.state.runner.close()
        rt.close()


def _held_by(rt: Runtime, principal: Principal, run_id: str = "r1") -> str:
    held = rt.call(PAY, run_id=run_id, node_id="n1", principal=principal)
    assert held.error is not None and held.error.category == "needs_approval", held
    return str(held.error.details["request_id"])


def _decisions(rt: Runtime, run_id: str) -> list[dict[str, Any]]:
    return [dict(e.data) for e in rt.trace.events(run_id) if e.kind == "approval_decided"]


def test_the_proposer_approving_its_own_call_is_refused_and_the_request_stays_pending() -> None:
    with _served(distinct_approver=True) as (client, rt, world, _app):
        request_id = _held_by(rt, PROPOSER)
        answer = client.post(f"/api/approvals/{request_id}/approve", json={"reason": "mine"}, headers=ADMIN)
        assert answer.status_code == 403, answer.text
        error = answer.json()["error"]
        assert error["category"] == "permission_denied"
        assert "proposed this call" in error["message"] and "'admin'" in error["message"]
        stored = rt.approvals.get(request_id)
        assert stored is not None
        assert (stored.status, stored.decided_by, stored.decided_at) == ("pending", None, None)
        assert _decisions(rt, "r1") == []
        assert world.payments == []
        shown = client.get(f"/api/approvals/{request_id}", headers=ADMIN).json()
        assert shown["status"] == "pending"


def test_a_run_started_through_the_api_cannot_be_approved_by_the_token_that_started_it() -> None:
    with _served(distinct_approver=True) as (client, _rt, world, app):
        started = client.post("/api/runs", json={"calls": [PAY], "run_id": "own1"}, headers=ADMIN)
        assert started.status_code == 202, started.text
        request = app.state.filed.wait_for_request()
        assert request.details["proposed_by"]["id"] == "admin"
        refused = client.post(f"/api/approvals/{request.id}/approve", headers=ADMIN)
        assert refused.status_code == 403 and refused.json()["error"]["category"] == "permission_denied"
        assert client.get(f"/api/approvals/{request.id}", headers=ADMIN).json()["status"] == "pending"
        assert world.payments == []
        approved = client.post(f"/api/approvals/{request.id}/approve", headers=APPROVER)
        assert approved.status_code == 200, approved.text
        assert app.state.runner.wait("own1", timeout=10) == "ok"
        assert len(world.payments) == 1


def test_another_principal_approves_the_call_under_the_rule_and_it_runs_once() -> None:
    with _served(distinct_approver=True) as (client, rt, world, app):
        request_id = _held_by(rt, PROPOSER)
        refused = client.post(f"/api/approvals/{request_id}/approve", headers=ADMIN)
        assert refused.status_code == 403
        answer = client.post(f"/api/approvals/{request_id}/approve", json={"reason": "ok"}, headers=APPROVER)
        assert answer.status_code == 200, answer.text
        assert (answer.json()["status"], answer.json()["decided_by"]) == ("approved", "alice")
        resumed = app.state.runner.resumed(request_id, "r1")
        assert resumed is not None and resumed.result(timeout=10) == "ok"
        assert world.payments == [{"id": "p1", "to": "acct-9", "amount": 500}]
        decided = [(d["status"], d["by"]) for d in _decisions(rt, "r1") if d["status"] != "consumed"]
        assert decided == [("approved", "alice")]


def test_the_proposer_may_still_deny_its_own_call_under_the_rule() -> None:
    with _served(distinct_approver=True) as (client, rt, world, _app):
        request_id = _held_by(rt, PROPOSER)
        answer = client.post(f"/api/approvals/{request_id}/deny", json={"reason": "withdrawn"}, headers=ADMIN)
        assert answer.status_code == 200, answer.text
        assert (answer.json()["status"], answer.json()["decided_by"]) == ("denied", "admin")
        assert world.payments == []


def test_principals_are_told_apart_by_id_not_by_tenant_or_scopes() -> None:
    tokens = {**TOKENS, "twin-token": Principal(id="admin", scopes=("approvals:decide",), tenant=None)}
    world = World()
    rt, _signalling = build_runtime(world)
    app = create_app(rt, tokens=tokens, runner=RunnerConfig(approval_poll_s=0.05), distinct_approver=True)
    try:
        with TestClient(app) as client:
            request_id = _held_by(rt, PROPOSER)
            answer = client.post(f"/api/approvals/{request_id}/approve", headers=bearer("twin-token"))
            assert answer.status_code == 403 and answer.json()["error"]["category"] == "permission_denied"
    finally:
        app.state.runner.close()
        rt.close()


def test_without_the_rule_a_single_admin_token_approves_its_own_call_as_before() -> None:
    with _served() as (client, rt, world, app):
        assert app.state.distinct_approver is False
        request_id = _held_by(rt, PROPOSER)
        answer = client.post(f"/api/approvals/{request_id}/approve", headers=ADMIN)
        assert answer.status_code == 200, answer.text
        assert (answer.json()["status"], answer.json()["decided_by"]) == ("approved", "admin")
        resumed = app.state.runner.resumed(request_id, "r1")
        assert resumed is not None and resumed.result(timeout=10) == "ok"
        assert len(world.payments) == 1


def test_the_approve_route_documents_the_refusal_in_the_openapi_spec() -> None:
    with _served(distinct_approver=True) as (client, _rt, _world, _app):
        spec = client.get("/openapi.json").json()
        approve = spec["paths"]["/api/approvals/{request_id}/approve"]["post"]["responses"]
        assert "proposed the call" in approve["403"]["description"]


def test_serve_passes_the_distinct_approver_option_to_the_app(tmp_path: Any) -> None:
    from actionspace.service.cli import prepare

    served = prepare(
        store=f"sqlite:///{tmp_path / 's.db'}",
        host="127.0.0.1",
        port=0,
        token="t",
        demo=False,
        distinct_approver=True,
    )
    with served.stack:
        assert served.app.state.distinct_approver is True
    default = prepare(store=f"sqlite:///{tmp_path / 'd.db'}", host="127.0.0.1", port=0, token="t", demo=False)
    with default.stack:
        assert default.app.state.distinct_approver is False
