"""A hostile API client's bodies: notes a store cannot hold, numbers JSON cannot hold, bodies sent slowly."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.pg import STORES, store_url
from tests.service.apptools import bearer, served


@pytest.fixture(params=STORES)
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from store_url(request, tmp_path)


def test_a_resolve_note_holding_a_nul_is_a_typed_422_on_every_store_and_leaves_the_entry_unresolved(
    any_store: str,
) -> None:
    """PostgreSQL's text holds no NUL: such a note must be refused before any store sees it."""
    with served(any_store) as (_client, rt, _world, _signalling, app):
        client = TestClient(app, raise_server_exceptions=False)
        lost = rt.call({"name": "post_note", "arguments": {"text": "hi"}}, run_id="r", node_id="n")
        assert lost.error is not None and lost.error.category == "unknown_commit"
        (entry,) = rt.ledger.list(state="unknown_commit")
        answer = client.post(
            f"/api/ledger/{entry.key}/resolve",
            content='{"outcome": "committed", "note": "checked\\u0000"}',
            headers={**bearer("admin-token"), "content-type": "application/json"},
        )
        assert answer.status_code == 422, answer.text
        assert answer.json()["error"]["category"] == "invalid_arguments"
        assert rt.ledger.get(entry.key).state == "unknown_commit"  # type: ignore[union-attr]
        again = client.post(
            f"/api/ledger/{entry.key}/resolve",
            json={"outcome": "committed", "note": "checked"},
            headers=bearer("admin-token"),
        )
        assert again.status_code == 200, again.text
        assert again.json()["state"] == "committed"


@pytest.mark.parametrize(
    "number", ["1e999", "-1e400", "1E+309", "0.1e99999", "1" * 400 + ".0", "-" + "9" * 320 + ".5e0"]
)
def test_a_number_too_large_for_a_float_is_refused_at_the_edge_like_infinity(number: str) -> None:
    """Python reads such a literal as infinity: it is the Infinity the edge refuses, in disguise."""
    with served() as (_client, rt, _world, _signalling, app):
        client = TestClient(app, raise_server_exceptions=False)
        body = '{"calls": [{"name": "lookup", "arguments": {"city": NUMBER}}], "run_id": "r-inf"}'
        body = body.replace("NUMBER", number)
        answer = client.post(
            "/api/runs", content=body, headers={**bearer("admin-token"), "content-type": "application/json"}
        )
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"]["category"] == "invalid_arguments"
        assert rt.trace.events("r-inf") == []


@pytest.mark.parametrize("number", ["1e308", "-1.5e-400", "123456789012345678901234567890", "0.000001e5"])
def test_a_large_but_finite_number_still_reaches_the_route(number: str) -> None:
    with served() as (_client, _rt, _world, _signalling, app):
        client = TestClient(app, raise_server_exceptions=False)
        body = '{"calls": [{"name": "lookup", "arguments": {"city": NUMBER}}]}'.replace("NUMBER", number)
        answer = client.post(
            "/api/runs", content=body, headers={**bearer("admin-token"), "content-type": "application/json"}
        )
        assert answer.status_code == 202, answer.text
