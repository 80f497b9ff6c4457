"""``actionspace approvals approve --distinct-approver``: the four-eyes rule on the command line.

The approver named by ``--by`` may not be the principal that proposed the call (nor approve a call
whose proposer was not recorded): one line on stderr naming the rule, exit 2, nothing recorded and
the request still pending. Without the flag the proposer is still refused (a request without a
recorded proposer is not); ``--allow-own-approval`` lets it approve its own call."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner, Result

from actionspace import Principal, Runtime
from actionspace._canonical import args_digest
from actionspace.approval.requests import ApprovalRequest
from actionspace.cli import _mount, app
from actionspace.ledger.sqlite_approvals import SqliteApprovalStore

runner = CliRunner()
CALL = {"name": "pay", "arguments": {"to": "bob", "cents": 500}}


def _held(db: Path, proposer: str = "alice") -> str:
    """A request the runtime filed for ``proposer``'s call, in the store at ``db``."""
    with Runtime(f"sqlite:///{db}", recover_on_start=False) as rt:

        @rt.tool(effect="external", requires_approval=True)
        def pay(to: str, cents: int) -> str:
            """Pay someone."""
            return "paid"

        obs = rt.call(CALL, run_id="r1", node_id="n", principal=Principal(id=proposer, scopes=("*",)))
        assert obs.error is not None and obs.error.category == "needs_approval", obs
        return str(obs.error.details["request_id"])


def _approve(db: Path, request_id: str, by: str, *flags: str) -> Result:
    argv = ["approvals", "approve", request_id, f"--by={by}", "--store", f"sqlite:///{db}", *flags]
    return runner.invoke(app, argv)


def _shown(db: Path, request_id: str) -> dict[str, object]:
    shown = runner.invoke(app, ["approvals", "show", request_id, "--store", f"sqlite:///{db}"])
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.stdout)
    assert isinstance(data, dict)
    return data


def _decided_events(db: Path) -> list[object]:
    with Runtime(f"sqlite:///{db}", recover_on_start=False) as rt:
        return [e.data for e in rt.trace.events("r1") if e.kind == "approval_decided"]


def test_the_proposer_approving_under_the_flag_exits_2_with_one_line_and_records_nothing(
    tmp_path: Path,
) -> None:
    _mount()
    db = tmp_path / "as.db"
    request_id = _held(db)
    refused = _approve(db, request_id, "alice", "--distinct-approver")
    assert refused.exit_code == 2, refused.output
    assert refused.stdout == ""
    errors = [line for line in refused.stderr.splitlines() if not line.startswith("store: ")]
    assert len(errors) == 1, refused.stderr  # the store read is named first, as by every approvals command
    assert errors[0].startswith("error: approval of request ") and request_id in errors[0]
    assert "four-eyes rule" in errors[0] and "'alice' proposed this call" in errors[0]
    shown = _shown(db, request_id)
    assert (shown["status"], shown["decided_by"]) == ("pending", None)
    assert _decided_events(db) == []


def test_another_approver_under_the_flag_approves(tmp_path: Path) -> None:
    _mount()
    db = tmp_path / "as.db"
    request_id = _held(db)
    approved = _approve(db, request_id, "bob", "--distinct-approver", "--ttl", "600")
    assert approved.exit_code == 0, approved.output
    assert f"{request_id}: approved by bob" in approved.stdout
    shown = _shown(db, request_id)
    assert (shown["status"], shown["decided_by"]) == ("approved", "bob")


def test_the_proposer_approves_its_own_call_only_when_allowed_explicitly(tmp_path: Path) -> None:
    _mount()
    db = tmp_path / "as.db"
    request_id = _held(db)
    refused = _approve(db, request_id, "alice")
    assert refused.exit_code == 2, refused.output
    assert _shown(db, request_id)["status"] == "pending"
    approved = _approve(db, request_id, "alice", "--allow-own-approval")
    assert approved.exit_code == 0, approved.output
    assert _shown(db, request_id)["decided_by"] == "alice"


def test_a_request_without_a_recorded_proposer_is_refused_under_the_flag(tmp_path: Path) -> None:
    _mount()
    db = tmp_path / "as.db"
    Runtime(f"sqlite:///{db}", recover_on_start=False).close()
    arguments = {"to": "bob"}
    request = ApprovalRequest(
        id="apr_noproposer",
        run_id="r1",
        node_id="n1",
        tool="send@1",
        args_digest=args_digest(arguments),
        arguments=arguments,
        provenance={"to": "user"},
        reason="external effect",
    )
    with SqliteApprovalStore(db) as approvals:
        approvals.create(request)
    refused = _approve(db, "apr_noproposer", "bob", "--distinct-approver")
    assert refused.exit_code == 2, refused.output
    assert "does not record who proposed the call" in refused.stderr
    assert _shown(db, "apr_noproposer")["status"] == "pending"


NAMES = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=12)


@settings(max_examples=12, deadline=None)
@given(proposer=NAMES, same=st.booleans(), other=NAMES)
def test_only_an_approver_other_than_the_proposer_gets_through(proposer: str, same: bool, other: str) -> None:
    _mount()
    approver = proposer if same else other
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "as.db"
        request_id = _held(db, proposer)
        result = _approve(db, request_id, approver, "--distinct-approver")
        if approver == proposer:
            assert result.exit_code == 2, result.output
            assert _shown(db, request_id)["status"] == "pending"
        else:
            assert result.exit_code == 0, result.output
            assert _shown(db, request_id)["decided_by"] == approver
