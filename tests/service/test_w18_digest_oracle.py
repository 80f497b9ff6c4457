"""A digest of a secret value is withheld with the value: a reader without the clearance could
hash its guesses and confirm one (a PIN has 10,000; a yes/no answer two).

Redacted events, approval requests and ledger entries keep the names that make them readable
(tool, node, ids, states); the digests of the values (``content_hash``, ``args_digest``) are
redacted with the values, to the HTTP API's readers.
"""

from __future__ import annotations

import json
import re
from typing import Any

from fastapi.testclient import TestClient

from actionspace import Labels, Principal, Runtime
from actionspace._canonical import content_hash
from actionspace.ledger.keys import args_digest
from actionspace.service import create_app
from tests.service.apptools import bearer

PIN = "4821"
_SCOPES = ("runs:read", "approvals:read", "ledger:read")
TOKENS = {
    "reader-token": Principal(id="reader", scopes=_SCOPES),
    "cleared-token": Principal(id="cleared", scopes=(*_SCOPES, "labels:secret")),
}


def _guesses(run: str) -> dict[str, str]:
    """What a reader hashing the PIN it guesses would look for."""
    return {
        "result": content_hash(PIN),
        "note arguments": args_digest({"text": PIN}),
        "held arguments": args_digest({"pin": PIN}),
    }


def _runtime() -> tuple[Runtime, str]:
    rt = Runtime("memory://", recover_on_start=False, principal=Principal(id="svc", scopes=("*",)))

    @rt.tool(effect="read", labels=Labels(confidentiality="secret"))
    def read_pin() -> str:
        """Read the card's PIN."""
        return PIN

    @rt.tool(effect="write", writes=["notes"])
    def keep_note(text: str) -> str:
        """Keep a note."""
        return "kept"

    @rt.tool(effect="external", requires_approval=True)
    def send_pin(pin: str) -> str:
        """Send a PIN to the bank."""
        return "sent"

    run = rt.new_run()
    assert rt.call({"name": "read_pin", "arguments": {}}, run_id=run).data == PIN
    assert rt.call({"name": "keep_note", "arguments": {"text": PIN}}, run_id=run).error is None
    held = rt.call({"name": "send_pin", "arguments": {"pin": PIN}}, run_id=run)
    assert held.error is not None and held.error.category == "needs_approval"
    return rt, run


def _everything(client: TestClient, token: str, run: str) -> str:
    seen: list[Any] = []
    for path in (f"/api/runs/{run}/events", "/api/approvals?status=all", "/api/ledger", f"/api/runs/{run}"):
        answer = client.get(path, headers=bearer(token))
        assert answer.status_code == 200, answer.text
        seen.append(answer.json())
    (request,) = seen[1]
    answer = client.get(f"/api/approvals/{request['request_id']}", headers=bearer(token))
    seen.append(answer.json())
    return json.dumps(seen)


def test_digests_of_secret_values_reach_only_principals_cleared_for_the_values() -> None:
    rt, run = _runtime()
    app = create_app(rt, tokens=TOKENS)
    try:
        with TestClient(app) as client:
            reader = _everything(client, "reader-token", run)
            cleared = _everything(client, "cleared-token", run)
    finally:
        app.state.runner.close()
        rt.close()
    guesses = _guesses(run)
    # the PIN on its own: a timestamp's fraction or a hex id may hold its four digits
    shown = re.compile(rf"(?<![0-9a-f.]){PIN}(?![0-9a-f])")
    assert not shown.search(reader) and "[redacted]" in reader
    confirmed = {what for what, digest in guesses.items() if digest in reader}
    assert confirmed == set(), f"a reader without labels:secret can confirm a guess by {confirmed}"
    # the cleared principal is shown what the reader was refused: the guesses are the real digests
    assert shown.search(cleared)
    assert {what for what, digest in guesses.items() if digest in cleared} == set(guesses)
