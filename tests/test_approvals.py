"""Approvals bind the exact call: its argument digest, once, before expiry."""

from __future__ import annotations

from typing import Any

import pytest

from actionspace import Runtime, ToolCall
from actionspace.types import SYSTEM_CLOCK, Clock, ManualClock

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "to": {"type": "string"},
        "amount": {"type": "integer"},
        "memo": {"type": "string", "default": ""},
    },
    "required": ["to", "amount"],
}


def _runtime(clock: Clock = SYSTEM_CLOCK) -> tuple[Runtime, list[dict[str, Any]]]:
    rt = Runtime("memory://", clock=clock)
    sent: list[dict[str, Any]] = []

    def transfer(to: str, amount: int, memo: str) -> dict[str, Any]:
        sent.append({"to": to, "amount": amount, "memo": memo})
        return {"ok": True}

    rt.add_tool(
        name="transfer",
        input_schema=SCHEMA,
        fn=transfer,
        effect="external",
        requires_approval=True,
        writes=["account:{to}"],
    )
    return rt, sent


def _call(rt: Runtime, amount: int = 10, node: str = "n1", to: str = "bob") -> Any:
    call = ToolCall(name="transfer", arguments={"to": to, "amount": amount}, provenance={"to": "user"})
    return rt.call(call, run_id="r1", node_id=node)


def _held(rt: Runtime) -> str:
    held = _call(rt)
    assert held.error is not None
    return str(held.error.details["request_id"])


def test_a_held_call_files_a_request_with_a_full_preview() -> None:
    rt, sent = _runtime()
    held = _call(rt)
    assert held.error is not None and held.error.category == "needs_approval"
    [request] = rt.approvals.list()
    assert held.error.details["request_id"] == request.id
    assert request.arguments == {"to": "bob", "amount": 10, "memo": ""}  # defaults filled in
    assert request.provenance == {"to": "user", "amount": "model_inferred", "memo": "default"}
    assert list(request.effects) == ["account:bob"]
    assert sent == []
    assert _call(rt).error is not None and len(rt.approvals.list()) == 1  # asking again files no duplicate


def test_approving_runs_exactly_the_approved_call_once() -> None:
    rt, sent = _runtime()
    request_id = _held(rt)
    rt.approvals.approve(request_id, by="alice", reason="expected rent")
    done = _call(rt)
    assert done.ok, done.error
    assert sent == [{"to": "bob", "amount": 10, "memo": ""}]
    stored = rt.approvals.get(request_id)
    assert stored is not None and stored.status == "consumed"
    again = _call(rt, node="n2")
    assert again.error is not None and again.error.category == "needs_approval"
    assert len(sent) == 1


def test_changing_one_argument_after_approval_voids_it() -> None:
    rt, sent = _runtime()
    request_id = _held(rt)
    rt.approvals.approve(request_id, by="alice")
    changed = _call(rt, amount=10_000)
    assert changed.error is not None and changed.error.category == "needs_approval"
    assert changed.error.details["request_id"] != request_id
    assert sent == []


def test_an_expired_approval_is_not_honoured() -> None:
    clock = ManualClock(start=1_000_000.0)
    rt, sent = _runtime(clock)
    request_id = _held(rt)
    approved = rt.approvals.approve(request_id, by="alice", ttl_s=60)
    assert approved.decided_at == 1_000_000.0 and approved.expires_at == 1_000_060.0
    clock.advance(60)
    late = _call(rt)
    assert late.error is not None and late.error.category == "needs_approval"
    assert sent == []


def test_an_approval_is_honoured_until_the_last_moment_of_its_ttl() -> None:
    clock = ManualClock(start=1_000_000.0)
    rt, sent = _runtime(clock)
    rt.approvals.approve(_held(rt), by="alice", ttl_s=60)
    clock.advance(59.999)
    assert _call(rt).error is None
    assert len(sent) == 1


def test_a_denial_is_permission_denied_naming_who_and_why() -> None:
    rt, sent = _runtime()
    request_id = _held(rt)
    rt.approvals.deny(request_id, by="alice", reason="not our vendor")
    denied = _call(rt)
    assert denied.error is not None and denied.error.category == "permission_denied"
    assert "alice" in denied.error.message and "not our vendor" in denied.error.message
    assert sent == []


def test_a_decision_is_made_once() -> None:
    rt, _ = _runtime()
    request_id = _held(rt)
    rt.approvals.approve(request_id, by="alice")
    with pytest.raises(ValueError, match="not pending"):
        rt.approvals.deny(request_id, by="bob")


def test_decisions_are_traced() -> None:
    rt, _ = _runtime()
    request_id = _held(rt)
    rt.approvals.approve(request_id, by="alice")
    _call(rt)
    kinds = [e.kind for e in rt.trace.events("r1")]
    assert "approval_requested" in kinds and kinds.count("approval_decided") == 2
