"""A hostile API client: what an error body may tell, and ids a router or a store may read oddly."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from tests.pg import STORES, store_url
from tests.service.apptools import bearer, served


@pytest.fixture(params=STORES)
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from store_url(request, tmp_path)


_DRIVER_TEXT = (
    'connection failed: connection to server at "10.20.30.40", port 6543 failed: FATAL:  password '
    'authentication failed for user "ledger_owner" (postgresql://ledger_owner:hunter2@db-internal/prod)'
)


def test_a_store_outage_answers_503_without_the_drivers_words_about_hosts_users_or_passwords() -> None:
    """A 503 tells the client to try again; the database's address, user and conninfo stay in the log."""
    with served() as (_client, rt, _world, _signalling, app):
        client = TestClient(app, raise_server_exceptions=False)
        real = rt.approvals.store.list

        def down(*args: Any, **kwargs: Any) -> Any:
            raise psycopg.OperationalError(_DRIVER_TEXT)

        rt.approvals.store.list = down  # type: ignore[method-assign]
        try:
            answer = client.get("/api/approvals", headers=bearer("admin-token"))
        finally:
            rt.approvals.store.list = real  # type: ignore[method-assign]
        assert answer.status_code == 503 and answer.headers["Retry-After"] == "1"
        error = answer.json()["error"]
        assert error["category"] == "transient" and "did not answer" in error["message"]
        for secret in ("10.20.30.40", "6543", "ledger_owner", "hunter2", "db-internal", "password"):
            assert secret not in answer.text


@pytest.mark.parametrize(
    "odd", ["..", "%2e%2e", "a%2Fb", "%00", "a%00b", "%ff", "%C0%AF", "%E2%80%AE", "x" * 5000, "%20"]
)
def test_odd_ids_in_paths_are_404_or_422_on_every_route_never_a_500(any_store: str, odd: str) -> None:
    with served(any_store) as (_client, _rt, _world, _signalling, app):
        client = TestClient(app, raise_server_exceptions=False)
        admin = bearer("admin-token")
        for method, path, body in (
            ("GET", f"/api/runs/{odd}", None),
            ("GET", f"/api/runs/{odd}/events", None),
            ("GET", f"/api/approvals/{odd}", None),
            ("POST", f"/api/approvals/{odd}/approve", None),
            ("POST", f"/api/approvals/{odd}/deny", {"reason": odd}),
            ("POST", f"/api/ledger/{odd}/resolve", {"outcome": "committed"}),
            ("GET", f"/api/catalog/{odd}", None),
        ):
            answer = client.request(method, path, headers=admin, json=body)
            assert answer.status_code in (404, 405, 422), (method, path, answer.status_code, answer.text)
            assert "error" in answer.json()


@pytest.mark.parametrize("action", ["approve", "deny"])
def test_a_decision_reason_holding_a_nul_is_a_typed_422_on_every_store_and_leaves_the_request_pending(
    any_store: str, action: str
) -> None:
    """PostgreSQL's text holds no NUL: such a reason was a 500 there, after the check that it is
    this token's request. It is refused before any store sees it, alike on every store."""
    with served(any_store) as (_client, rt, _world, _signalling, app):
        client = TestClient(app, raise_server_exceptions=False)
        held = rt.call(
            {"name": "send_payment", "arguments": {"to": "a", "amount": 1}}, run_id="r", node_id="n"
        )
        assert held.error is not None
        request_id = held.error.details["request_id"]
        answer = client.post(
            f"/api/approvals/{request_id}/{action}",
            content='{"reason": "looks fine\\u0000"}',
            headers={**bearer("admin-token"), "content-type": "application/json"},
        )
        assert answer.status_code == 422, answer.text
        assert answer.json()["error"]["category"] == "invalid_arguments"
        assert rt.approvals.get(request_id).status == "pending"  # type: ignore[union-attr]
        again = client.post(
            f"/api/approvals/{request_id}/{action}",
            json={"reason": "looks fine"},
            headers=bearer("admin-token"),
        )
        assert again.status_code == 200 and again.json()["decision_reason"] == "looks fine"
