"""A client guessing API tokens: every route without a good token, and how many guesses it gets."""

from __future__ import annotations

import math

from fastapi.testclient import TestClient

from actionspace import Principal
from actionspace.service.auth import GUESSES_PER_MINUTE, Auth
from tests.service.apptools import TOKENS, bearer, served

ROUTES = [
    ("GET", "/api/runs"),
    ("GET", "/api/runs/r1"),
    ("GET", "/api/runs/r1/events"),
    ("POST", "/api/runs"),
    ("GET", "/api/approvals"),
    ("GET", "/api/approvals/apr_x"),
    ("POST", "/api/approvals/apr_x/approve"),
    ("POST", "/api/approvals/apr_x/deny"),
    ("GET", "/api/ledger"),
    ("POST", "/api/ledger/as1_x/resolve"),
    ("GET", "/api/catalog"),
    ("GET", "/api/catalog/lookup"),
    ("GET", "/api/metrics"),
]


def test_every_route_the_app_serves_under_api_is_listed_here_and_refuses_a_missing_token() -> None:
    with served() as (client, _rt, _world, _signalling, app):
        spec = app.openapi()["paths"]
        served_routes = {
            (method.upper(), path)
            for path, item in spec.items()
            for method in item
            if path.startswith("/api/")
        }
        generic = {(m, p.replace("r1", "{run_id}")) for m, p in ROUTES}
        generic = {
            (m, p.replace("apr_x", "{request_id}").replace("as1_x", "{key}").replace("lookup", "{name}"))
            for m, p in generic
        }
        assert served_routes - generic == {("GET", "/api/health")}
        for method, path in ROUTES:
            answer = client.request(method, path, json={})
            assert answer.status_code == 401, (method, path)
            assert answer.headers["www-authenticate"] == "Bearer"


def test_a_client_guessing_tokens_is_answered_429_for_every_token_once_its_guesses_run_out() -> None:
    with served() as (_client, _rt, _world, _signalling, app):
        app.state.auth = Auth(TOKENS, clock=lambda: 1000.0)  # no guess comes back while the test runs
        client = TestClient(app, raise_server_exceptions=False)
        answers = [
            client.get("/api/runs", headers=bearer(f"guess-{n}")).status_code
            for n in range(GUESSES_PER_MINUTE)
        ]
        assert answers == [401] * GUESSES_PER_MINUTE
        for token in ("guess-x", "admin-token"):  # the right token too: else a 200 among 429s gives it away
            refused = client.get("/api/runs", headers=bearer(token))
            assert refused.status_code == 429, refused.text
            assert refused.json()["error"]["category"] == "rate_limited"
            assert int(refused.headers["Retry-After"]) >= 1
        assert client.get("/api/health").status_code == 200


def test_guesses_come_back_with_time_and_never_run_out_for_another_address() -> None:
    now = [0.0]
    auth = Auth({"right-token-0000": Principal(id="p")}, clock=lambda: now[0])
    for n in range(GUESSES_PER_MINUTE):
        assert auth.retry_after("10.0.0.1") is None
        assert auth.principal(f"wrong-{n}", client="10.0.0.1") is None
    wait = auth.retry_after("10.0.0.1")
    assert wait is not None and 0 < wait <= 60
    assert auth.retry_after("10.0.0.2") is None
    assert auth.principal("right-token-0000", client="10.0.0.2") is not None
    now[0] += math.ceil(wait)
    assert auth.retry_after("10.0.0.1") is None


def test_a_good_token_spends_no_guess() -> None:
    with served() as (_client, _rt, _world, _signalling, app):
        client = TestClient(app, raise_server_exceptions=False)
        for _ in range(GUESSES_PER_MINUTE + 5):
            assert client.get("/api/catalog", headers=bearer("reader-token")).status_code == 200
        assert client.get("/api/catalog", headers=bearer("wrong")).status_code == 401
