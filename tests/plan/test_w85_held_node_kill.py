"""A plan node held for approval has its evidence on disk before its request is filed.

A node's events wait in its plan's buffer behind those of the nodes before it. Before a request
for a node is filed, the plan hands its buffered events to the store (the earlier nodes' first,
in trace order), then the node's own, and the store commits them durably: a process killed
(SIGKILL) right after the request is saved leaves the node's ``proposed``, its
``approval_requested`` and every earlier event of the run on disk, and another process that
resumes the approved node judges it exactly as it was held.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from actionspace.approval.requests import ApprovalRequest
from actionspace.ledger.memory import MemoryApprovalStore
from actionspace.service.held_calls import proposer, send_held
from actionspace.trace.events import TraceEvent
from tests.approval.test_w73_held_call_kill import _runtime

ROOT = Path(__file__).resolve().parents[2]
LOOSE = {"to": "user | tool_result | model", "amount": "user | tool_result | model"}
STRICT = {"to": "user | tool_result"}
RULES = {"loose": LOOSE, "strict": STRICT}


def _plan(to: str) -> dict[str, Any]:
    reads = [{"id": f"m{i}", "tool": "read_mail", "arguments": {}} for i in range(3)]
    reads.append({"id": "k", "tool": "lookup_contact", "arguments": {"name": "Bob"}})
    pay = {"id": "p", "tool": "send_payment", "arguments": {"to": to, "amount": 7}}
    return {"nodes": [*reads, {**pay, "depends_on": [n["id"] for n in reads]}]}


def hold_node_and_die(store: str, rules: str, run_id: str) -> None:
    """Run the plan in ``run_id``; SIGKILL this process once the payment node's approval request is
    saved (inside the store's ``create``, after its commit)."""
    import os
    import signal

    rt = _runtime(store, RULES[rules], [])
    approvals = rt.approvals.store
    create = approvals.create

    def create_then_die(request: ApprovalRequest) -> ApprovalRequest:
        create(request)
        os.kill(os.getpid(), signal.SIGKILL)
        raise AssertionError("unreachable")

    approvals.create = create_then_die  # type: ignore[method-assign]
    rt.run_plan(_plan("acct-BOB-42"), run_id=run_id)
    raise AssertionError("the payment node was not held")


def _killed_while_holding(tmp_path: Path, rules: str) -> str:
    store = f"sqlite:///{tmp_path / 'store.db'}"
    code = (
        "import sys; from tests.plan.test_w85_held_node_kill import hold_node_and_die; "
        "hold_node_and_die(*sys.argv[1:4])"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, store, rules, "plan-run"], cwd=ROOT, capture_output=True, timeout=120
    )
    assert proc.returncode == -9, proc.stderr.decode()[-2000:]
    return store


def _on_disk(path: Path, run_id: str) -> list[tuple[int, str, str | None, dict[str, Any]]]:
    """(seq, kind, call id, data) of the run's rows as another process reads the file."""
    with sqlite3.connect(path) as db:
        rows = db.execute(
            "SELECT seq, kind, call_id, data FROM trace_events WHERE run_id = ? ORDER BY seq", (run_id,)
        ).fetchall()
    return [(seq, kind, call_id, json.loads(data)) for seq, kind, call_id, data in rows]


def _kinds(events: list[TraceEvent]) -> list[dict[str, list[str]]]:
    """Per ``proposed`` event of the payment, per argument, the provenance kinds it records."""
    return [
        {a: sorted({str(v["source"]).split("(")[0] for v in vs}) for a, vs in e.data["provenance"].items()}
        for e in events
        if e.kind == "proposed" and e.data.get("tool") == "send_payment"
    ]


EXPECTED = {"loose": ("ok", None, ["acct-BOB-42"]), "strict": ("error", "policy_violation", [])}


@pytest.mark.parametrize("rules", ["loose", "strict"])
def test_a_node_held_before_a_kill_has_its_plan_s_evidence_on_disk_and_resumes_as_held(
    tmp_path: Path, rules: str
) -> None:
    store = _killed_while_holding(tmp_path, rules)
    rows = _on_disk(tmp_path / "store.db", "plan-run")
    asked = [r for r in rows if r[1] == "approval_requested" and r[2] == "plan-run:p"]
    assert len(asked) == 1
    upto = [r for r in rows if r[0] <= asked[0][0]]
    assert [r[0] for r in upto] == list(range(len(upto)))  # every earlier event, in trace order
    held = [r for r in upto if r[1] == "proposed" and r[2] == "plan-run:p"]
    assert len(held) == 1 and held[0][3]["arguments"] == {"to": "acct-BOB-42", "amount": 7}
    observed = {r[2] for r in upto if r[1] == "observation"}
    assert observed == {"plan-run:m0", "plan-run:m1", "plan-run:m2", "plan-run:k"}

    paid: list[str] = []
    rt = _runtime(store, RULES[rules], paid)
    try:
        (request,) = [r for r in rt.approvals.list("pending") if r.run_id == "plan-run"]
        assert request.node_id == "p"
        rt.approvals.approve(request.id, by="approver")
        approved = rt.approvals.get(request.id)
        assert approved is not None
        obs = asyncio.run(send_held(rt, approved, proposer(approved)))
        after = rt.trace.events("plan-run")
    finally:
        rt.close()
    status, category, sent = EXPECTED[rules]
    assert (obs.status, obs.error.category if obs.error else None) == (status, category)
    if obs.error is not None:  # refused by its policy, as it would have been where it was held
        assert obs.error.details.get("rule") != "resume_provenance"
    kinds = _kinds(after)
    assert len(kinds) == 2 and kinds[0] == kinds[1] == {"to": ["model"], "amount": ["model"]}
    assert paid == sent


def test_a_node_s_request_in_memory_finds_its_plan_s_earlier_events_stored() -> None:
    rt = _runtime("memory://", LOOSE, [])
    seen: list[list[tuple[int, str, str | None]]] = []
    store = rt.approvals.store
    assert isinstance(store, MemoryApprovalStore)
    create = store.create

    def watched(request: ApprovalRequest) -> ApprovalRequest:
        seen.append([(e.seq, e.kind, e.call_id) for e in rt.trace.events("r")])
        return create(request)

    store.create = watched  # type: ignore[method-assign]
    try:
        result = rt.run_plan(_plan("acct-BOB-42"), run_id="r")
        events = rt.trace.events("r")
    finally:
        rt.close()
    # stored ahead of its request, the node's proposal is recorded once, with its provenance
    (held,) = [e for e in events if e.kind == "proposed" and e.call_id == "r:p"]
    assert held.data["provenance"] == {
        "to": [{"path": "", "source": "model"}],
        "amount": [{"path": "", "source": "model"}],
    }
    assert result.nodes["p"].error is not None and result.nodes["p"].error.category == "needs_approval"
    (at,) = seen
    assert [seq for seq, _k, _c in at] == list(range(len(at)))
    assert at[-1][1:] == ("approval_requested", "r:p")
    assert {c for _s, k, c in at if k == "observation"} == {"r:m0", "r:m1", "r:m2", "r:k"}
    assert ("proposed", "r:p") in {(k, c) for _s, k, c in at}


def test_a_node_whose_plan_s_records_cannot_be_stored_files_no_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import actionspace.plan.node as node_module

    monkeypatch.setattr(node_module, "FLUSH_S", 1e9)  # the plan's records wait until asked for
    rt = _runtime("memory://", LOOSE, [])
    engine, flush = rt.engine, rt.engine.flush
    failed: list[int] = []

    def failing_once(rec: Any) -> None:
        ids = {r[3] for r in rec.records} | {n[2] for n in rec.nodes or ()}
        if "r:m0" in ids and not failed:  # the plan's buffer, handed over before the request
            failed.append(len(rec.records) + len(rec.nodes or ()))
            raise OSError("disk full")
        flush(rec)

    engine.flush = failing_once  # type: ignore[method-assign]
    try:
        result = rt.run_plan(_plan("acct-BOB-42"), run_id="r")
        pending = rt.approvals.list("pending")
    finally:
        rt.close()
    held = result.nodes["p"]
    assert held.error is not None and held.error.category == "transient"
    assert pending == [] and failed
