"""A token of another tenant, holding every scope but ``admin:all``, reaches nothing of a tenant's
run through any route that takes an id: approval ids (read, approve, deny), run ids (detail,
events, ``?run=`` of the approvals, ``?principal=`` of the runs), ledger keys (resolve). Each
answers as if the thing did not exist, and nothing is decided or resolved. On every store."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from actionspace import Principal
from tests.pg import STORES, store_url
from tests.service.apptools import TOOL_SCOPES, bearer, served

ALL = (
    "runs:read",
    "runs:write",
    "approvals:read",
    "approvals:decide",
    "ledger:read",
    "ledger:resolve",
    "catalog:read",
    "metrics:read",
    "labels:secret",
    *TOOL_SCOPES,
)
TOKENS = {
    "t1": Principal(id="p1", scopes=ALL, tenant="t1"),
    "t2": Principal(id="p1", scopes=ALL, tenant="t2"),  # the same id, another tenant
    "none": Principal(id="p0", scopes=ALL),
}
PAY = {"name": "send_payment", "arguments": {"to": "acct-t1-secret", "amount": 7}}
NOTE = {"name": "post_note", "arguments": {"text": "t1-note-secret"}}


@pytest.fixture(params=STORES)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from store_url(request, tmp_path)


def test_another_tenants_token_reaches_nothing_through_any_id_taking_route(url: str) -> None:
    with served(url, TOKENS) as (client, rt, world, signalling, app):
        t1 = bearer("t1")
        started = client.post("/api/runs", json={"calls": [NOTE, PAY], "run_id": "t1-run"}, headers=t1)
        assert started.status_code == 202, started.text
        request = signalling.wait_for_request()
        (entry,) = rt.ledger.list(state="unknown_commit")
        for token in ("t2", "none"):
            other = bearer(token)
            for method, path, body in (
                ("GET", f"/api/approvals/{request.id}", None),
                ("POST", f"/api/approvals/{request.id}/approve", {}),
                ("POST", f"/api/approvals/{request.id}/deny", {"reason": "not mine"}),
                ("GET", "/api/runs/t1-run", None),
                ("GET", "/api/runs/t1-run/events", None),
                ("POST", f"/api/ledger/{entry.key}/resolve", {"outcome": "not_committed"}),
            ):
                answer = client.request(method, path, headers=other, json=body)
                assert answer.status_code == 404, (token, method, path, answer.text)
            for path, params in (
                ("/api/approvals", {"status": "all", "run": "t1-run"}),
                ("/api/approvals", {"status": "all"}),
                ("/api/runs", {"principal": "p1"}),
                ("/api/ledger", {}),
            ):
                answer = client.get(path, params=params, headers=other)
                assert answer.status_code == 200 and answer.json() == [], (token, path, answer.text)
                assert "secret" not in answer.text
        stored = rt.approvals.get(request.id)
        assert stored is not None and stored.status == "pending"
        assert rt.ledger.get(entry.key).state == "unknown_commit"  # type: ignore[union-attr]
        assert world.payments == []
        mine = client.get("/api/approvals", params={"run": "t1-run", "status": "all"}, headers=t1).json()
        assert [r["id"] for r in mine] == [request.id]
        approved = client.post(f"/api/approvals/{request.id}/approve", headers=t1, json={})
        assert approved.status_code == 200, approved.text
        assert app.state.runner.wait("t1-run", timeout=30) == "partial"  # the note is an unknown commit
        assert [p["to"] for p in world.payments] == ["acct-t1-secret"]
        assert "acct-t1-secret" in json.dumps(client.get("/api/runs/t1-run/events", headers=t1).json())
