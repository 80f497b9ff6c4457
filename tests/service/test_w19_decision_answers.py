"""A decision's answer shows what the deciding token's read of that record would show.

A token may hold ``approvals:decide`` without ``approvals:read`` (or ``ledger:resolve`` without
``ledger:read``): it may act on a record, not read its values. Its decision's answer is the record
with its values (and their digests) redacted; a token that also reads gets what its read gets.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from actionspace import Principal
from actionspace.ledger.keys import args_digest
from tests.service.apptools import TOKENS, bearer, served

ACCOUNT = "ACCT-7731-SECRET"
NOTE = "board-note-5521"
_TOKENS = {
    **TOKENS,
    "decider": Principal(id="dee", scopes=("approvals:decide",)),
    "decider-reader": Principal(id="dora", scopes=("approvals:read", "approvals:decide")),
    "resolver": Principal(id="rex", scopes=("ledger:resolve",)),
    "resolver-reader": Principal(id="rita", scopes=("ledger:read", "ledger:resolve")),
}


def _held(client: TestClient, signalling: Any, app: Any, run_id: str) -> str:
    calls = [{"name": "send_payment", "arguments": {"to": ACCOUNT, "amount": 4821}}]
    started = client.post("/api/runs", headers=bearer("agent-token"), json={"run_id": run_id, "calls": calls})
    assert started.status_code == 202
    return str(signalling.wait_for_request().id)


def _no_values(answer: dict[str, Any], *values: str) -> None:
    text = json.dumps(answer)
    for value in values:
        assert value not in text, (value, answer)


@pytest.mark.parametrize("action", ["approve", "deny"])
def test_a_decider_that_may_not_read_requests_is_answered_without_their_values(action: str) -> None:
    with served(tokens=_TOKENS) as (client, _rt, _world, signalling, app):
        request_id = _held(client, signalling, app, "r1")
        assert client.get(f"/api/approvals/{request_id}", headers=bearer("decider")).status_code == 403
        decided = client.post(f"/api/approvals/{request_id}/{action}", headers=bearer("decider"))
        assert decided.status_code == 200, decided.text
        body = decided.json()
        assert body["status"] == ("approved" if action == "approve" else "denied")
        assert body["decided_by"] == "dee" and body["request_id"] == request_id
        assert body["preview"]["redacted"] is True
        assert set(body["arguments"]) == {"to", "amount"}  # the names stay, as a redacted read shows
        _no_values(body, ACCOUNT, "4821", args_digest({"to": ACCOUNT, "amount": 4821}))


def test_a_decider_that_reads_is_answered_what_its_read_shows() -> None:
    with served(tokens=_TOKENS) as (client, _rt, _world, signalling, app):
        request_id = _held(client, signalling, app, "r2")
        decided = client.post(
            f"/api/approvals/{request_id}/deny", headers=bearer("decider-reader"), json={"reason": "no"}
        )
        read = client.get(f"/api/approvals/{request_id}", headers=bearer("decider-reader"))
        assert decided.status_code == read.status_code == 200
        assert decided.json() == read.json()
        assert decided.json()["arguments"] == {"to": ACCOUNT, "amount": 4821}


def _unknown_commits(client: TestClient, app: Any, rt: Any) -> list[str]:
    calls = [{"name": "post_note", "arguments": {"text": f"{NOTE}-{n}"}} for n in range(2)]
    started = client.post(
        "/api/runs", headers=bearer("agent-token"), json={"run_id": "notes", "calls": calls}
    )
    assert started.status_code == 202
    app.state.runner.wait("notes", timeout=30)
    keys = [e.key for e in rt.ledger.list(state="unknown_commit", limit=10)]
    assert len(keys) == 2
    return sorted(keys)


def test_a_resolver_that_may_not_read_the_ledger_is_answered_without_the_entrys_values() -> None:
    with served(tokens=_TOKENS) as (client, rt, _world, _signalling, app):
        key = _unknown_commits(client, app, rt)[0]
        text = next(e.arguments["text"] for e in rt.ledger.list(limit=10) if e.key == key)
        resolved = client.post(
            f"/api/ledger/{key}/resolve",
            headers=bearer("resolver"),
            json={"outcome": "committed", "note": "checked the board"},
        )
        assert resolved.status_code == 200, resolved.text
        body = resolved.json()
        assert body["key"] == key and body["state"] == "committed"
        assert body["arguments"] == {"text": "[redacted]"}
        _no_values(body, NOTE, args_digest({"text": text}))
        entry = rt.ledger.get(key)
        assert entry is not None and entry.state == "committed"  # the resolution itself went through


def test_a_resolver_that_reads_is_answered_what_its_read_shows() -> None:
    with served(tokens=_TOKENS) as (client, rt, _world, _signalling, app):
        key = _unknown_commits(client, app, rt)[1]
        resolved = client.post(
            f"/api/ledger/{key}/resolve", headers=bearer("resolver-reader"), json={"outcome": "not_committed"}
        )
        listed = client.get("/api/ledger", headers=bearer("resolver-reader"))
        assert resolved.status_code == listed.status_code == 200
        assert resolved.json() == next(e for e in listed.json() if e["key"] == key)
        assert NOTE in json.dumps(resolved.json())
