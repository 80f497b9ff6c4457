"""``GET /api/approvals?run=`` lists one run's requests, however many newer requests other runs
filed: the console's ``/approvals?run=`` and a run's page ask for them so, and a person finds the
call a run waits on even when a flood of other held calls came after it. Another tenant's run
lists nothing; an id no store can hold is an empty list, never a 500."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from actionspace import Principal
from tests.service.apptools import bearer, served

TOKENS = {
    "t1-agent": Principal(id="a1", scopes=("runs:write", "runs:read", "external:*"), tenant="t1"),
    "t1-decider": Principal(id="d1", scopes=("approvals:read", "approvals:decide"), tenant="t1"),
    "t2-decider": Principal(id="d2", scopes=("approvals:read", "approvals:decide"), tenant="t2"),
}
NEWER = 130


def _pay(to: str) -> dict[str, Any]:
    return {"name": "send_payment", "arguments": {"to": to, "amount": 5}}


def _listed(client: TestClient, token: str, **params: Any) -> list[dict[str, Any]]:
    answer = client.get("/api/approvals", params=params, headers=bearer(token))
    assert answer.status_code == 200, answer.text
    rows: list[dict[str, Any]] = answer.json()
    return rows


def test_a_runs_held_call_is_listed_behind_a_flood_of_newer_requests_and_can_be_decided() -> None:
    with served(tokens=TOKENS) as (client, rt, world, signalling, app):
        started = client.post(
            "/api/runs", json={"calls": [_pay("acct-1")], "run_id": "waiting"}, headers=bearer("t1-agent")
        )
        assert started.status_code == 202, started.text
        held = signalling.wait_for_request()
        flood = rt.new_run(principal=TOKENS["t1-agent"])
        for i in range(NEWER):  # other held calls of the same tenant, filed after it
            assert rt.call(_pay(f"acct-x{i}"), run_id=flood, principal=TOKENS["t1-agent"]).error is not None
        for status in ("pending", "all"):
            rows = _listed(client, "t1-decider", status=status, run="waiting")
            assert [r["request_id"] for r in rows] == [held.id]
        assert _listed(client, "t1-decider", status="approved", run="waiting") == []
        assert len(_listed(client, "t1-decider", run=flood, limit=1000)) == NEWER
        assert len(_listed(client, "t1-decider", run=flood, limit=7)) == 7
        assert _listed(client, "t2-decider", status="all", run="waiting") == []  # another tenant's
        decided = client.post(f"/api/approvals/{held.id}/approve", headers=bearer("t1-decider"))
        assert decided.status_code == 200, decided.text
        assert app.state.runner.wait("waiting", timeout=30) == "ok"
        assert world.payments == [{"id": "p1", "to": "acct-1", "amount": 5}]
        assert [r["status"] for r in _listed(client, "t1-decider", status="all", run="waiting")] == [
            "consumed"
        ]


@pytest.mark.parametrize("odd", ["\x00", "a\x00b", "w\u0430iting", "", " ", "../waiting", "WAITING"])
def test_an_odd_run_filter_lists_nothing(odd: str) -> None:
    with served(tokens=TOKENS) as (client, _rt, _world, signalling, _app):
        client.post(
            "/api/runs", json={"calls": [_pay("acct-1")], "run_id": "waiting"}, headers=bearer("t1-agent")
        )
        signalling.wait_for_request()
        assert _listed(client, "t1-decider", status="all", run=odd) == []
