"""The ledger view and ``ledger show`` redact by label (issue item 5)."""

from __future__ import annotations

import json
from pathlib import Path

from fastapi.testclient import TestClient
from typer.testing import CliRunner

from actionspace import Labels, Principal, Runtime
from actionspace.cli import _mount, app
from actionspace.service import create_app
from tests.service.apptools import bearer

PASSWORD = "hunter2-correct-horse"
TOKENS = {
    "admin-token": Principal(id="admin", scopes=("*",)),
    "ledger-token": Principal(id="auditor", scopes=("ledger:read",)),
    "cleared-token": Principal(id="cleared", scopes=("ledger:read", "labels:secret")),
}


def _secret_write(rt: Runtime) -> str:
    @rt.tool(effect="read", labels=Labels(confidentiality="secret"))
    def read_password() -> str:
        """Read the stored password."""
        return PASSWORD

    @rt.tool(effect="write", writes=["note:{title}"])
    def save_note(title: str, text: str) -> str:
        """Keep a note."""
        return "saved"

    run = rt.new_run()
    assert rt.call({"name": "read_password", "arguments": {}}, run_id=run).data == PASSWORD
    saved = rt.call({"name": "save_note", "arguments": {"title": "pw", "text": PASSWORD}}, run_id=run)
    assert saved.error is None, saved.error
    return run


def test_a_ledger_read_token_without_clearance_never_sees_secret_arguments() -> None:
    rt = Runtime("memory://", recover_on_start=False)
    _secret_write(rt)
    application = create_app(rt, tokens=TOKENS)
    try:
        with TestClient(application) as client:
            seen = {}
            for token in TOKENS:
                answer = client.get("/api/ledger", headers=bearer(token))
                assert answer.status_code == 200, answer.text
                seen[token] = answer.json()
    finally:
        application.state.runner.close()
        rt.close()
    assert PASSWORD in json.dumps(seen["admin-token"])
    assert PASSWORD in json.dumps(seen["cleared-token"])
    hidden = seen["ledger-token"]
    assert PASSWORD not in json.dumps(hidden)
    assert [e["arguments"] for e in hidden] == [{"title": "[redacted]", "text": "[redacted]"}]
    assert hidden[0]["state"] == "committed" and hidden[0]["tool"].startswith("save_note@")


def test_ledger_show_redacts_secret_arguments_unless_revealed(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'as.db'}"
    rt = Runtime(store, recover_on_start=False)
    try:
        _secret_write(rt)
        (entry,) = rt.ledger.list()
    finally:
        rt.close()
    _mount()
    runner = CliRunner()
    shown = runner.invoke(app, ["ledger", "show", entry.key, "--store", store])
    assert shown.exit_code == 0, shown.output
    assert PASSWORD not in shown.output and "[redacted]" in shown.output
    listed = runner.invoke(app, ["ledger", "list", "--store", store, "--json"])
    assert listed.exit_code == 0 and PASSWORD not in listed.output
    revealed = runner.invoke(app, ["ledger", "show", entry.key, "--store", store, "--reveal"])
    assert revealed.exit_code == 0 and PASSWORD in revealed.output
