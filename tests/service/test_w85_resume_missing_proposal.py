"""A held call whose ``proposed`` event is missing is resumed only where nothing judges provenance.

A runtime with a provenance stage judges a call's argument values on the ``proposed`` event its
call was held with. When the trace keeps the ``approval_requested`` but lost the ``proposed``, that
runtime would judge the values as the model's own (looser than held): it refuses the resume
instead (``policy_violation``, rule ``resume_provenance``) and sends nothing. A runtime without
such a stage judges no provenance at all, so it resumes the call as before.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Principal, Runtime
from actionspace.approval.requests import ApprovalRequest
from actionspace.errors import ActionError
from actionspace.service.held_calls import proposer, refusal, send_held
from actionspace.service.resume_evidence import held_proposal
from actionspace.trace.events import TraceEvent
from tests.approval.test_w73_held_call_kill import LAUNDER, TRUSTED, _runtime


def _event(seq: int, kind: str, call_id: str | None, data: dict[str, Any]) -> TraceEvent:
    return TraceEvent(run_id="r", seq=seq, kind=kind, ts=0.0, call_id=call_id, data=data)


def _request(arguments: dict[str, Any]) -> ApprovalRequest:
    return ApprovalRequest(
        id="apr_1",
        run_id="r",
        node_id="c2",
        tool="pay@1",
        args_digest="d",
        arguments=arguments,
        provenance={},
    )


def test_a_missing_proposal_refuses_the_resume_where_provenance_is_judged() -> None:
    events = [
        _event(1, "observation", "m1", {"status": "ok", "tool": "read_mail"}),
        _event(2, "approval_requested", "p1", {"request_id": "apr_1"}),
    ]
    found = held_proposal(events, _request({"to": "acct-EVIL-771"}), reads_provenance=True)
    assert isinstance(found, ActionError) and found.category == "policy_violation"
    assert found.details["rule"] == "resume_provenance" and found.details["call_id"] == "p1"
    assert held_proposal(events, _request({"to": "acct-EVIL-771"}), reads_provenance=False) is None


def test_a_proposal_recorded_only_after_the_request_is_missing_evidence() -> None:
    events = [
        _event(1, "approval_requested", "p1", {"request_id": "apr_1"}),
        _event(2, "proposed", "p1", {"tool": "pay", "arguments": {"to": "a"}, "provenance": {"to": []}}),
    ]
    found = held_proposal(events, _request({"to": "a"}), reads_provenance=True)
    assert isinstance(found, ActionError) and found.details["rule"] == "resume_provenance"


noise = st.lists(
    st.tuples(
        st.sampled_from(["observation", "proposed", "authorized", "validated", "dispatched"]),
        st.sampled_from(["m1", "k1", "p2", "p1, x"]),
    ),
    max_size=8,
)


@settings(max_examples=100, deadline=None)
@given(noise, noise)
def test_no_other_call_s_proposal_stands_in_for_the_held_one(
    before: list[tuple[str, str]], after: list[tuple[str, str]]
) -> None:
    events = [_event(i, kind, cid, {"arguments": {"to": "a"}}) for i, (kind, cid) in enumerate(before)]
    events.append(_event(len(events), "approval_requested", "p1", {"request_id": "apr_1"}))
    events += [_event(len(events) + i, k, c, {"arguments": {"to": "a"}}) for i, (k, c) in enumerate(after)]
    found = held_proposal(events, _request({"to": "a"}), reads_provenance=True)
    assert isinstance(found, ActionError) and found.details["rule"] == "resume_provenance"


def _without_proposal(tmp_path: Path, rules: dict[str, str], calls: list[dict[str, Any]]) -> str:
    """The store of a run whose payment is held, its ``proposed`` event then lost; the request id."""
    store = f"sqlite:///{tmp_path / 'store.db'}"
    with _runtime(store, rules, []) as rt:
        for call in calls:
            rt.call(call, run_id="r")
        (request,) = rt.approvals.list("pending")
    with sqlite3.connect(tmp_path / "store.db") as db:
        db.execute("DELETE FROM trace_events WHERE kind = 'proposed' AND call_id = 'p1'")
    return request.id


def _resume(rt: Runtime, request_id: str) -> Any:
    rt.approvals.approve(request_id, by="approver")
    request = rt.approvals.get(request_id)
    assert request is not None
    return asyncio.run(send_held(rt, request, proposer(request)))


def test_a_trusted_payment_without_its_proposal_is_refused_not_judged_again(tmp_path: Path) -> None:
    rules, calls = TRUSTED
    request_id = _without_proposal(tmp_path, rules, calls)
    paid: list[str] = []
    with _runtime(f"sqlite:///{tmp_path / 'store.db'}", rules, paid) as rt:
        obs = _resume(rt, request_id)
        events = rt.trace.events("r")
    assert obs.status == "error" and obs.error is not None and obs.error.category == "policy_violation"
    assert obs.error.details["rule"] == "resume_provenance" and paid == []
    assert refusal(obs) is obs.error  # the run it belongs to ends at once
    refused = [e for e in events if e.kind == "observation" and e.call_id == "p1"][-1]
    assert refused.data["category"] == "policy_violation"
    assert not [e for e in events if e.kind == "dispatched" and e.call_id == "p1"]


def test_a_runtime_without_a_provenance_stage_resumes_a_call_held_without_one(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'store.db'}"
    paid: list[str] = []

    def plain() -> Runtime:
        rt = Runtime(store, principal=Principal(id="service", scopes=("external:*",)), recover_on_start=False)

        def send_payment(to: str, amount: int) -> dict[str, Any]:
            paid.append(to)
            return {"paid": to}

        rt.tool(effect="external", requires_approval=True)(send_payment)
        return rt

    with plain() as rt:
        rt.call(LAUNDER[1][1], run_id="r")
        (request,) = rt.approvals.list("pending")
    with sqlite3.connect(tmp_path / "store.db") as db:
        db.execute("DELETE FROM trace_events WHERE kind = 'proposed' AND call_id = 'p1'")
    with plain() as rt:
        obs = _resume(rt, request.id)
    assert obs.status == "ok" and paid == ["acct-EVIL-771"] and refusal(obs) is obs
