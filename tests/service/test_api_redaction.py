"""The runs API shows a run's events as the token's principal may see them (labels decide)."""

from __future__ import annotations

import json
from typing import Any

from fastapi.testclient import TestClient

from actionspace import Labels, Principal, Runtime
from actionspace.service import create_app
from tests.service.apptools import bearer

PASSWORD = "hunter2-correct-horse"
TOKENS = {
    "admin-token": Principal(id="admin", scopes=("*",)),
    "reader-token": Principal(id="reader", scopes=("runs:read",)),
    "cleared-token": Principal(id="cleared", scopes=("runs:read", "labels:secret")),
}


def _served_run() -> tuple[Runtime, str]:
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="read", labels=Labels(confidentiality="secret"))
    def read_password() -> str:
        """Read the stored password."""
        return PASSWORD

    @rt.tool(effect="none")
    def shout(text: str) -> str:
        """Upper-case a text."""
        return text.upper()

    run = rt.new_run()
    assert rt.call({"name": "read_password", "arguments": {}}, run_id=run).data == PASSWORD
    assert rt.call({"name": "shout", "arguments": {"text": PASSWORD}}, run_id=run).error is None
    return rt, run


def _read(client: TestClient, token: str, path: str) -> Any:
    answer = client.get(path, headers=bearer(token))
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_secret_values_in_a_runs_events_reach_only_principals_cleared_for_them() -> None:
    rt, run = _served_run()
    app = create_app(rt, tokens=TOKENS)
    try:
        with TestClient(app) as client:
            seen = {
                token: json.dumps(_read(client, token, f"/api/runs/{run}/events"))
                for token in ("admin-token", "reader-token", "cleared-token")
            }
            detail = json.dumps(_read(client, "reader-token", f"/api/runs/{run}"))
            listed = json.dumps(_read(client, "reader-token", "/api/runs"))
    finally:
        app.state.runner.close()
        rt.close()
    assert PASSWORD in seen["admin-token"]  # shout's arguments, as the model wrote them
    assert PASSWORD in seen["cleared-token"]
    assert PASSWORD not in seen["reader-token"] and PASSWORD.upper() not in seen["reader-token"]
    assert "[redacted]" in seen["reader-token"]
    assert '"read_password"' in seen["reader-token"]  # the timeline still names what happened
    assert PASSWORD not in detail and PASSWORD.upper() not in detail
    assert PASSWORD not in listed
