"""A process killed (SIGKILL) right after a plan node, or a member of an atomic group, filed its
approval request leaves the request's evidence on disk: the node's ``proposed`` event and its
``approval_requested`` naming the request, with the plan's start. Another process then approves:

- a plan node is sent once, judged on that evidence, and a later run of the plan replays it;
- a member of an atomic group is never sent alone (its write would commit without its group's):
  the resume is refused with a typed reason (``resume_group``), the approval stays unused, and the
  plan run again (after recovery settles the group the dead process left in flight) runs the
  group once, the approved member in it.

The killed process is a real interpreter on a SQLite file; it dies inside the approval store's
``create``, right after the request is committed, before the plan goes on. Without a kill, a
group held for its member's approval is run again by the next proposal of its plan: once the
member is approved it commits, once; once it is denied it fails for good.
"""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from actionspace import Plan, Principal, Runtime
from actionspace.approval.requests import ApprovalRequest
from actionspace.plan.environments import SqliteEnvironment, SqliteTransaction
from actionspace.policy.provenance_stage import ProvenanceStage
from actionspace.trace.events import TraceEvent
from actionspace.types import Observation

ROOT = Path(__file__).resolve().parents[2]

PLANS: dict[str, dict[str, Any]] = {
    "node": {
        "nodes": [
            {"id": "k", "tool": "lookup", "arguments": {"name": "Bob"}},
            {"id": "p", "tool": "pay", "arguments": {"to": "acct-BOB-42", "amount": 7}},
        ]
    },
    "group": {
        "nodes": [
            {"id": "n1", "tool": "note", "arguments": {"text": "first"}},
            {"id": "p", "tool": "publish", "arguments": {"text": "second"}},
        ],
        "groups": [{"id": "g", "nodes": ["n1", "p"]}],
    },
}


def _runtime(store: str, notes: Path, sent: list[str]) -> Runtime:
    rt = Runtime(
        store,
        principal=Principal(id="service", scopes=("read:*", "write:*", "external:*")),
        recover_on_start=False,
        stages=[ProvenanceStage()],
    )

    def lookup(name: str) -> dict[str, Any]:
        return {"account": "acct-BOB-42"}

    def pay(to: str, amount: int) -> str:
        sent.append(to)
        return "paid"

    def note(text: str, transaction: SqliteTransaction | None = None) -> str:
        if transaction is not None:
            transaction.connection.execute("INSERT INTO notes VALUES (?)", (text,))
        return "noted"

    def publish(text: str, transaction: SqliteTransaction | None = None) -> str:
        sent.append(text)
        if transaction is not None:
            transaction.connection.execute("INSERT INTO notes VALUES (?)", (text,))
        return "published"

    rt.environment("notes", SqliteEnvironment(notes))
    rt.tool(effect="read")(lookup)
    rt.tool(effect="external", writes=["account:{to}"], requires_approval=True)(pay)
    rt.tool(effect="write", writes=["notes:"], transaction="notes")(note)
    rt.tool(effect="write", writes=["notes:"], transaction="notes", requires_approval=True)(publish)
    return rt


def file_and_die(store: str, notes: str, case: str) -> None:
    """Run the case's plan in run ``r``; SIGKILL this process once the approval request is saved
    (inside the store's ``create``, after its commit)."""
    import os
    import signal

    rt = _runtime(store, Path(notes), [])
    approvals = rt.approvals.store
    create = approvals.create

    def create_then_die(request: ApprovalRequest) -> ApprovalRequest:
        create(request)
        os.kill(os.getpid(), signal.SIGKILL)
        raise AssertionError("unreachable")

    approvals.create = create_then_die  # type: ignore[method-assign]
    rt.run_plan(Plan.from_dict(PLANS[case]), run_id="r")
    raise AssertionError("no node was held")


def _killed_while_filing(tmp_path: Path, case: str) -> tuple[str, Path]:
    store, notes = f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "notes.db"
    _new_notes(notes)
    code = (
        "import sys; from tests.approval.test_w9_plan_request_kill import file_and_die; "
        "file_and_die(*sys.argv[1:4])"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, store, str(notes), case], cwd=ROOT, capture_output=True, timeout=120
    )
    assert proc.returncode == -9, proc.stderr.decode()[-2000:]
    return store, notes


def _pending(rt: Runtime) -> ApprovalRequest:
    (request,) = [r for r in rt.approvals.list("pending") if r.run_id == "r"]
    assert request.node_id == "p"
    return request


def _assert_evidence(events: list[TraceEvent], request: ApprovalRequest) -> None:
    """The node's request, its proposal before it and the plan's start are in the trace."""
    asked = [e for e in events if e.kind == "approval_requested" and e.data.get("request_id") == request.id]
    assert [e.call_id for e in asked] == ["r:p"]
    proposed = [e for e in events if e.kind == "proposed" and e.call_id == "r:p" and e.seq < asked[0].seq]
    assert proposed and proposed[0].data["arguments"] == dict(request.arguments)
    assert any(e.kind == "plan_started" and e.seq < asked[0].seq for e in events)


def _send_alone(rt: Runtime, request: ApprovalRequest) -> Observation:
    from actionspace.service.held_calls import proposer, send_held

    rt.approvals.approve(request.id, by="approver")
    approved = rt.approvals.get(request.id)
    assert approved is not None
    return asyncio.run(send_held(rt, approved, proposer(approved)))


def _new_notes(path: Path) -> Path:
    """An empty notes table at ``path`` (the world's record of what the tools sent)."""
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE notes (text TEXT NOT NULL)")
    return path


def _notes(path: Path) -> list[str]:
    with sqlite3.connect(path) as db:
        return [text for (text,) in db.execute("SELECT text FROM notes ORDER BY rowid")]


def test_a_plan_node_killed_after_filing_is_resumed_once_on_its_evidence(tmp_path: Path) -> None:
    store, notes = _killed_while_filing(tmp_path, "node")
    sent: list[str] = []
    with _runtime(store, notes, sent) as rt:
        request = _pending(rt)
        _assert_evidence(rt.trace.events("r"), request)
        obs = _send_alone(rt, request)
        assert (obs.status, obs.error) == ("ok", None)
        assert sent == ["acct-BOB-42"]
        again = rt.run_plan(Plan.from_dict(PLANS["node"]), run_id="r")  # the plan itself, later
        assert again.status == "ok" and again.nodes["p"].ok
    assert sent == ["acct-BOB-42"]  # once: the run of the plan replayed it


def test_a_group_member_killed_after_filing_is_never_sent_alone_and_runs_once_with_its_group(
    tmp_path: Path,
) -> None:
    store, notes = _killed_while_filing(tmp_path, "group")
    sent: list[str] = []
    with _runtime(store, notes, sent) as rt:
        request = _pending(rt)
        _assert_evidence(rt.trace.events("r"), request)
        obs = _send_alone(rt, request)
        assert obs.error is not None and obs.error.category == "policy_violation"
        assert obs.error.details["rule"] == "resume_group" and obs.error.details["group"] == "g"
        assert sent == [] and _notes(notes) == []
        stored = rt.approvals.get(request.id)
        assert stored is not None and stored.status == "approved"  # not used up by the refusal
        rt.recover(min_age_s=0)  # the group the dead process left dispatched: found not committed
        done = rt.run_plan(Plan.from_dict(PLANS["group"]), run_id="r")
        assert done.status == "ok", {k: o.error for k, o in done.nodes.items()}
        again = rt.run_plan(Plan.from_dict(PLANS["group"]), run_id="r")
        assert again.status == "ok"
        used = rt.approvals.get(request.id)
        assert used is not None and used.status == "consumed"
    assert sent == ["second"] and _notes(notes) == ["first", "second"]


def test_a_group_member_held_in_a_finished_round_is_not_sent_alone_by_another_process(
    tmp_path: Path,
) -> None:
    store, notes = f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "notes.db"
    _new_notes(notes)
    sent: list[str] = []
    with _runtime(store, notes, sent) as rt:
        held = rt.run_plan(Plan.from_dict(PLANS["group"]), run_id="r")
        error = held.nodes["p"].error
        assert error is not None and error.category == "needs_approval"
        proposals = [e for e in rt.trace.events("r") if e.kind == "proposed" and e.call_id == "r:p"]
        assert len(proposals) == 1 and "provenance" in proposals[0].data  # written ahead, once
    with _runtime(store, notes, sent) as rt:  # another process takes the decision
        obs = _send_alone(rt, _pending(rt))
        assert obs.error is not None and obs.error.details["rule"] == "resume_group"
        assert sent == [] and _notes(notes) == []
        done = rt.run_plan(Plan.from_dict(PLANS["group"]), run_id="r")  # its group, again
        assert done.status == "ok"
    assert sent == ["second"] and _notes(notes) == ["first", "second"]


def test_a_group_held_for_a_member_runs_once_the_member_is_approved(tmp_path: Path) -> None:
    notes = _new_notes(tmp_path / "notes.db")
    sent: list[str] = []
    plan = Plan.from_dict(PLANS["group"])
    with _runtime("memory://", notes, sent) as rt:
        held = rt.run_plan(plan, run_id="r")
        again = rt.run_plan(plan, run_id="r", retry_of=held)  # still pending: held again, nothing sent
        error = again.nodes["g"].error
        assert error is not None and error.category == "needs_approval" and sent == []
        rt.approvals.approve(_pending(rt).id, by="approver")
        done = rt.run_plan(plan, run_id="r", retry_of=again)
        assert done.status == "ok" and done.nodes["p"].data == "published"
        replayed = rt.run_plan(plan, run_id="r", retry_of=done)
        assert replayed.status == "ok"
    assert sent == ["second"] and _notes(notes) == ["first", "second"]


def test_a_group_whose_member_is_denied_fails_for_good(tmp_path: Path) -> None:
    notes = _new_notes(tmp_path / "notes.db")
    sent: list[str] = []
    plan = Plan.from_dict(PLANS["group"])
    with _runtime("memory://", notes, sent) as rt:
        held = rt.run_plan(plan, run_id="r")
        rt.approvals.deny(_pending(rt).id, by="approver", reason="no")
        for _ in range(2):
            held = rt.run_plan(plan, run_id="r", retry_of=held)
            error = held.nodes["g"].error
            assert error is not None and error.category == "permission_denied"
    assert sent == [] and _notes(notes) == []
