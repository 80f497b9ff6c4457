"""Bearer tokens and scopes: 401 without or with a bad token, 403 without the route's scope."""

from __future__ import annotations

from typing import Any

import pytest

from actionspace import Principal
from tests.service.apptools import bearer, served

ROUTES: list[tuple[str, str, str, dict[str, Any] | None]] = [
    ("GET", "/api/runs", "runs:read", None),
    ("GET", "/api/runs/r1", "runs:read", None),
    ("GET", "/api/runs/r1/events", "runs:read", None),
    ("POST", "/api/runs", "runs:write", {"calls": []}),
    ("GET", "/api/approvals", "approvals:read", None),
    ("GET", "/api/approvals/apr_x", "approvals:read", None),
    ("POST", "/api/approvals/apr_x/approve", "approvals:decide", {}),
    ("POST", "/api/approvals/apr_x/deny", "approvals:decide", {}),
    ("GET", "/api/ledger", "ledger:read", None),
    ("POST", "/api/ledger/as1_x/resolve", "ledger:resolve", {"outcome": "committed"}),
    ("GET", "/api/catalog", "catalog:read", None),
    ("GET", "/api/catalog/lookup", "catalog:read", None),
    ("GET", "/api/metrics", "metrics:read", None),
]

OTHER_SCOPES = (
    "runs:read",
    "runs:write",
    "approvals:read",
    "approvals:decide",
    "ledger:read",
    "ledger:resolve",
    "catalog:read",
    "metrics:read",
)


def _tokens(scope: str) -> dict[str, Principal]:
    return {
        "holder": Principal(id="holder", scopes=(scope,)),
        "others": Principal(id="others", scopes=tuple(s for s in OTHER_SCOPES if s != scope)),
    }


@pytest.mark.parametrize(
    ("method", "path", "scope", "body"), ROUTES, ids=[f"{m} {p}" for m, p, _, _ in ROUTES]
)
def test_each_route_is_401_without_a_good_token_403_without_its_scope_and_served_with_it(
    method: str, path: str, scope: str, body: dict[str, Any] | None
) -> None:
    with served(tokens=_tokens(scope)) as (client, *_):
        missing = client.request(method, path, json=body)
        assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
        assert "token" in missing.json()["error"]["message"]
        wrong = client.request(method, path, json=body, headers=bearer("not-a-token"))
        assert wrong.status_code == 401
        basic = client.request(method, path, json=body, headers={"Authorization": "Basic aG9sZGVyOng="})
        assert basic.status_code == 401
        forbidden = client.request(method, path, json=body, headers=bearer("others"))
        assert forbidden.status_code == 403
        assert scope in forbidden.json()["error"]["message"]
        allowed = client.request(method, path, json=body, headers=bearer("holder"))
        assert allowed.status_code not in (401, 403), allowed.text


def test_an_app_without_a_token_table_makes_one_admin_token() -> None:
    from actionspace import Runtime
    from actionspace.service import create_app

    rt = Runtime("memory://", recover_on_start=False)
    app = create_app(rt, tokens=None)
    try:
        from fastapi.testclient import TestClient

        client = TestClient(app)
        token = app.state.admin_token
        assert isinstance(token, str) and len(token) >= 32
        assert client.get("/api/runs", headers=bearer(token)).status_code == 200
        assert client.get("/api/runs").status_code == 401
    finally:
        app.state.runner.close()
        rt.close()


def test_a_glob_scope_grants_the_routes_it_matches() -> None:
    tokens = {"approvals": Principal(id="bob", scopes=("approvals:*",))}
    with served(tokens=tokens) as (client, *_):
        assert client.get("/api/approvals", headers=bearer("approvals")).status_code == 200
        assert client.post("/api/approvals/apr_x/deny", headers=bearer("approvals")).status_code == 404
        assert client.get("/api/ledger", headers=bearer("approvals")).status_code == 403
