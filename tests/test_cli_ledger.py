"""``actionspace approvals …`` and ``actionspace ledger …`` (``_cli_ledger``), mounted on the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from actionspace import Runtime
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
    Runtime(store, recover_on_start=False).close()  # a store with no entry
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
    assert last == "error: the store did not answer (OperationalError: database is locked); try again"
    _mount()
    shown = runner.invoke(app, ["approvals", "show", request_id, "--store", store])
    assert json.loads(shown.stdout)["status"] == "pending"
    approved = runner.invoke(app, argv)
    assert approved.exit_code == 0 and f"{request_id}: approved by alice" in approved.output


def _unknown_commit(db: Path) -> str:
    from actionspace.ledger.sqlite import SqliteLedgerStore
    from tests.ledger.factories import entry

    with SqliteLedgerStore(db) as ledger:
        return ledger.begin(entry(state="unknown_commit")).entry.key


def test_a_refused_outcome_names_both_allowed_outcomes_whole(tmp_path: Path) -> None:
    _mount()
    store = f"sqlite:///{tmp_path / 'as.db'}"
    key = _unknown_commit(tmp_path / "as.db")
    argv = ["ledger", "resolve", key, "--outcome", "maybe", "--by", "ann", "--reason", "r", "--store", store]
    refused = runner.invoke(app, argv)
    assert refused.exit_code == 1
    assert refused.stderr.splitlines()[-1] == "error: outcome must be 'committed' or 'failed'"
    shown = runner.invoke(app, ["ledger", "show", key, "--store", store])
    assert json.loads(shown.stdout)["state"] == "unknown_commit"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["ledger", "list", "--state", "unknown-commit"], "unknown_commit"),
        (["approvals", "list", "--status", "aproved"], "approved"),
    ],
)
def test_a_misspelt_state_is_refused_naming_the_states_not_listed_as_none(
    tmp_path: Path, argv: list[str], expected: str
) -> None:
    """``--state unknown-commit`` matches nothing: an operator reading "0 entries" would conclude
    that nothing waits for reconciliation."""
    _mount()
    store = f"sqlite:///{tmp_path / 'as.db'}"
    _unknown_commit(tmp_path / "as.db")
    _pending(tmp_path / "as.db")
    result = runner.invoke(app, [*argv, "--store", store, "--json"])
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert expected in result.stderr


@pytest.mark.parametrize("ttl", ["nan", "-5"])
def test_an_approval_lifetime_that_is_not_a_positive_number_is_refused_and_nothing_decided(
    tmp_path: Path, ttl: str
) -> None:
    _mount()
    store = f"sqlite:///{tmp_path / 'as.db'}"
    request_id = _pending(tmp_path / "as.db")
    refused = runner.invoke(
        app, ["approvals", "approve", request_id, "--by", "ann", "--ttl", ttl, "--store", store]
    )
    assert refused.exit_code == 2, refused.output
    assert "--ttl" in refused.stderr
    shown = runner.invoke(app, ["approvals", "show", request_id, "--store", store])
    assert json.loads(shown.stdout)["status"] == "pending"
