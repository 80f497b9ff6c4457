"""``actionspace approvals approve --by NAME`` applies the rules the HTTP API applies.

A request whose values are labelled (secret, or for named readers only) is approved only by a
``NAME`` the command is told may read them (``--scope labels:secret``, or ``NAME`` among the
readers); otherwise one line on stderr naming the clearance, exit 2, nothing recorded. ``NAME``
equal to the principal that proposed the call is refused too (the four-eyes rule for the one case
the command can tell), unless ``--allow-own-approval`` is given. Denying stays open to anyone.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner, Result

from actionspace import Runtime
from actionspace.approval.requests import LABEL, ApprovalRequest
from actionspace.cli import _mount, app
from actionspace.ledger.sqlite_approvals import SqliteApprovalStore

runner = CliRunner()


def _filed(db: Path, *, label: Mapping[str, object] | None, proposer: str | None = "alice") -> str:
    Runtime(f"sqlite:///{db}", recover_on_start=False).close()
    details: dict[str, object] = {}
    if label is not None:
        details[LABEL] = label
    if proposer is not None:
        details["proposed_by"] = {"id": proposer, "scopes": ["*"], "tenant": None}
    request = ApprovalRequest(
        id="apr_cli_w15",
        run_id="r1",
        node_id="n1",
        tool="wire_funds@1",
        args_digest="d-1",
        arguments={"account": "hunter2-acct"},
        provenance={"account": "tool_result:x"},
        details=details,
        created_at=time.time(),
    )
    with SqliteApprovalStore(db) as approvals:
        return approvals.create(request).id


def _run(db: Path, *argv: str) -> Result:
    return runner.invoke(app, [*argv, "--store", f"sqlite:///{db}"])


def _status(db: Path, request_id: str) -> tuple[object, object]:
    shown = _run(db, "approvals", "show", request_id)
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.stdout)
    return data["status"], data["decided_by"]


def _errors(result: Result) -> list[str]:
    return [line for line in result.stderr.splitlines() if not line.startswith("store: ")]


SECRET = {"confidentiality": "secret", "integrity": "trusted", "readers": None}


def test_an_approver_not_said_to_be_cleared_for_a_secret_call_is_refused(tmp_path: Path) -> None:
    _mount()
    db = tmp_path / "as.db"
    request_id = _filed(db, label=SECRET)
    refused = _run(db, "approvals", "approve", request_id, "--by", "bob")
    assert refused.exit_code == 2, refused.output
    errors = _errors(refused)
    assert len(errors) == 1, refused.stderr
    assert "'bob' may not see the values" in errors[0] and "labels:secret" in errors[0]
    assert "--scope" in errors[0]
    assert _status(db, request_id) == ("pending", None)


def test_a_cleared_approver_approves_and_anyone_may_deny(tmp_path: Path) -> None:
    _mount()
    db = tmp_path / "as.db"
    request_id = _filed(db, label=SECRET)
    approved = _run(db, "approvals", "approve", request_id, "--by", "ops", "--scope", "labels:secret")
    assert approved.exit_code == 0, approved.output
    assert _status(db, request_id) == ("approved", "ops")
    other = tmp_path / "other.db"
    request_id = _filed(other, label=SECRET)
    denied = _run(other, "approvals", "deny", request_id, "--by", "bob")
    assert denied.exit_code == 0, denied.output
    assert _status(other, request_id) == ("denied", "bob")


def test_a_reader_named_by_the_label_approves_without_a_scope(tmp_path: Path) -> None:
    _mount()
    db = tmp_path / "as.db"
    request_id = _filed(db, label={"confidentiality": "secret", "integrity": "trusted", "readers": ["carol"]})
    refused = _run(db, "approvals", "approve", request_id, "--by", "bob")
    assert refused.exit_code == 2, refused.output
    assert "'carol'" in _errors(refused)[0]
    approved = _run(db, "approvals", "approve", request_id, "--by", "carol")
    assert approved.exit_code == 0, approved.output
    assert _status(db, request_id) == ("approved", "carol")


def test_the_proposer_is_refused_unless_its_own_approval_is_allowed_explicitly(tmp_path: Path) -> None:
    _mount()
    db = tmp_path / "as.db"
    request_id = _filed(db, label=None, proposer="alice")
    refused = _run(db, "approvals", "approve", request_id, "--by", "alice")
    assert refused.exit_code == 2, refused.output
    assert "four-eyes rule" in _errors(refused)[0] and "--allow-own-approval" in _errors(refused)[0]
    assert _status(db, request_id) == ("pending", None)
    approved = _run(db, "approvals", "approve", request_id, "--by", "alice", "--allow-own-approval")
    assert approved.exit_code == 0, approved.output
    assert _status(db, request_id) == ("approved", "alice")


def test_the_two_four_eyes_flags_together_are_a_usage_error(tmp_path: Path) -> None:
    _mount()
    db = tmp_path / "as.db"
    request_id = _filed(db, label=None, proposer="alice")
    both = _run(
        db, "approvals", "approve", request_id, "--by", "bob", "--distinct-approver", "--allow-own-approval"
    )
    assert both.exit_code == 2, both.output
    assert _status(db, request_id) == ("pending", None)


def test_the_help_names_the_clearance_flag() -> None:
    _mount()
    shown = runner.invoke(app, ["approvals", "approve", "--help"], terminal_width=200)
    assert shown.exit_code == 0, shown.output
    assert "--scope" in shown.output and "labels:secret" in shown.output
    assert "--allow-own-approval" in shown.output


LEVELS = st.sampled_from(["public", "internal", "secret"])


@settings(max_examples=15, deadline=None)
@given(level=LEVELS, granted=st.lists(LEVELS, max_size=2, unique=True))
def test_an_approval_is_recorded_exactly_when_the_named_scopes_read_the_label(
    level: str, granted: list[str]
) -> None:
    import tempfile

    _mount()
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "as.db"
        request_id = _filed(db, label={"confidentiality": level, "integrity": "trusted", "readers": None})
        flags = [f for g in granted for f in ("--scope", f"labels:{g}")]
        result = _run(db, "approvals", "approve", request_id, "--by", "bob", *flags)
        from actionspace.policy.labels import Label, may_read
        from actionspace.policy.principal import Principal

        label = Label.from_dict({"confidentiality": level, "integrity": "trusted", "readers": None})
        cleared = may_read(label, Principal(id="bob", scopes=[f"labels:{g}" for g in granted]))
        assert (result.exit_code, _status(db, request_id)[0]) == (
            (0, "approved") if cleared else (2, "pending")
        ), result.output
