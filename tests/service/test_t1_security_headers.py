"""Every response of the service, API and console alike, carries the browser-hardening headers."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from actionspace import Principal, Runtime
from actionspace.service import create_app

TOKENS = {"t1-admin": Principal(id="admin", scopes=("*",))}
AUTH = {"Authorization": "Bearer t1-admin"}


@pytest.fixture
def client() -> Iterator[TestClient]:
    rt = Runtime("memory://", recover_on_start=False)
    app = create_app(rt, tokens=TOKENS, max_body_bytes=1024)
    try:
        with TestClient(app) as c:
            yield c
    finally:
        app.state.runner.close()
        rt.close()


def _directives(csp: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for part in csp.split(";"):
        words = part.split()
        if words:
            out[words[0]] = words[1:]
    return out


def _assert_hardened(headers: dict[str, str]) -> None:
    assert headers.get("x-content-type-options") == "nosniff"
    assert headers.get("x-frame-options") == "DENY"
    assert headers.get("referrer-policy") == "no-referrer"
    csp = _directives(headers.get("content-security-policy", ""))
    assert csp.get("frame-ancestors") == ["'none'"]
    assert csp.get("default-src") == ["'none'"]
    scripts = csp.get("script-src", csp["default-src"])
    assert "'unsafe-inline'" not in scripts and "'unsafe-eval'" not in scripts
    assert all(source.startswith("'") for source in scripts), "no script from another origin"


@pytest.mark.parametrize(
    ("method", "path", "headers"),
    [
        ("GET", "/api/runs", {}),  # 401: no token
        ("GET", "/api/runs", AUTH),
        ("GET", "/api/approvals?status=pending", AUTH),
        ("GET", "/api/approvals/no-such-request", AUTH),  # 404
        ("POST", "/api/approvals/no-such-request/approve", AUTH),
        ("GET", "/api/no-such-route", AUTH),
        ("GET", "/api/health", {}),
        ("GET", "/openapi.json", {}),
        ("GET", "/docs", {}),
        ("GET", "/static/vendor/swagger-ui-bundle.js", {}),
        ("GET", "/static/no-such-asset.js", {}),
        ("GET", "/", {}),
        ("GET", "/approvals", {}),
        ("GET", "/static/approvals.js", {}),
    ],
)
def test_every_response_forbids_framing_sniffing_referrers_and_foreign_scripts(
    client: TestClient, method: str, path: str, headers: dict[str, str]
) -> None:
    response = client.request(method, path, headers=headers)
    _assert_hardened(dict(response.headers))


def test_a_body_refused_as_too_large_still_carries_the_headers(client: TestClient) -> None:
    response = client.post(
        "/api/runs", content=b"x" * 4096, headers={**AUTH, "Content-Type": "application/json"}
    )
    assert response.status_code == 413
    _assert_hardened(dict(response.headers))


def test_the_console_keeps_its_own_stricter_policy(client: TestClient) -> None:
    csp = _directives(client.get("/approvals").headers["content-security-policy"])
    assert (
        csp["script-src"] == ["'self'"]
        and csp["style-src"] == ["'self'"]
        and csp["connect-src"] == ["'self'"]
    )
