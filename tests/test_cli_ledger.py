"""``actionspace approvals …`` and ``actionspace ledger …`` (``_cli_ledger``), mounted on the CLI."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from actionspace._canonical import args_digest
from actionspace.approval.requests import ApprovalRequest
from actionspace.cli import _mount, app
from actionspace.ledger.sqlite_approvals import SqliteApprovalStore

runner = CliRunner()


def _pending(db: Path) -> str:
    arguments = {"to": "bob@example.com"}
    request = ApprovalRequest(
        id="apr_cli",
        run_id="run_cli",
        node_id="n1",
        tool="send@1",
        args_digest=args_digest(arguments),
        arguments=arguments,
        provenance={"to": "user"},
        reason="external effect",
    )
    with SqliteApprovalStore(db) as approvals:
        return approvals.create(request).id


def test_a_pending_request_is_listed_then_approved_by_name_from_the_command_line(tmp_path: Path) -> None:
    _mount()
    store = f"sqlite:///{tmp_path / 'as.db'}"
    request_id = _pending(tmp_path / "as.db")
    listed = runner.invoke(app, ["approvals", "list", "--store", store, "--json"])
    assert listed.exit_code == 0, listed.output
    assert [r["id"] for r in json.loads(listed.stdout)] == [request_id]
    approved = runner.invoke(app, ["approvals", "approve", request_id, "--by", "alice", "--store", store])
    assert approved.exit_code == 0, approved.output
    assert f"{request_id}: approved by alice" in approved.output
    shown = runner.invoke(app, ["approvals", "show", request_id, "--store", store])
    assert json.loads(shown.stdout)["decided_by"] == "alice"
    again = runner.invoke(app, ["approvals", "deny", request_id, "--by", "bob", "--store", store])
    assert again.exit_code == 1 and "not pending" in again.output


def test_an_unknown_ledger_key_is_an_error_exit(tmp_path: Path) -> None:
    _mount()
    store = f"sqlite:///{tmp_path / 'as.db'}"
    shown = runner.invoke(app, ["ledger", "show", "as1_missing", "--store", store])
    assert shown.exit_code == 1 and "no ledger entry as1_missing" in shown.output
    listed = runner.invoke(app, ["ledger", "list", "--store", store, "--json"])
    assert listed.exit_code == 0 and json.loads(listed.stdout) == []


def test_a_decision_the_store_cannot_record_is_one_line_and_can_be_made_again(tmp_path: Path) -> None:
    """``actionspace approvals approve`` while the file is locked past its busy timeout: one line
    saying the store did not answer, exit 1, nothing decided; the same command again decides it."""
    import subprocess
    import sys

    store = f"sqlite:///{tmp_path / 'as.db'}"
    request_id = _pending(tmp_path / "as.db")
    argv = ["approvals", "approve", request_id, "--by", "alice", "--store", store]
    script = (
        "import sqlite3, sys\n"
        "from actionspace.ledger.sqlite_approvals import SqliteApprovalStore\n"
        "def locked(*args, **kwargs):\n"
        "    raise sqlite3.OperationalError('database is locked')\n"
        "SqliteApprovalStore.update = locked\n"
        f"sys.argv = ['actionspace', *{argv!r}]\n"
        "from actionspace.cli import main\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last == "actionspace: the store did not answer (OperationalError: database is locked); try again"
    _mount()
    shown = runner.invoke(app, ["approvals", "show", request_id, "--store", store])
    assert json.loads(shown.stdout)["status"] == "pending"
    approved = runner.invoke(app, argv)
    assert approved.exit_code == 0 and f"{request_id}: approved by alice" in approved.output
