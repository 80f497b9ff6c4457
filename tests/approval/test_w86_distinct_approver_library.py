"""The four-eyes rule in code: :class:`DistinctApprover` over ``rt.approvals`` refuses the
proposer's own approval with ``permission_denied`` (nothing recorded, the request still pending),
lets another principal approve, lets the proposer deny; the bare ``rt.approvals`` is unchanged."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Principal, Runtime
from actionspace.approval.four_eyes import ApprovalRefused, DistinctApprover, refused_approval
from actionspace.approval.requests import ApprovalRequest

ALICE = Principal(id="alice", scopes=("*",), tenant="acme")
CALL = {"name": "pay", "arguments": {"to": "bob", "cents": 500}}


def _runtime() -> tuple[Runtime, list[str]]:
    rt = Runtime("memory://")
    paid: list[str] = []

    @rt.tool(effect="external", idempotency="native", requires_approval=True)
    def pay(to: str, cents: int, idempotency_key: str) -> str:
        """Pay someone (the bank dedupes by key)."""
        paid.append(to)
        return "paid"

    return rt, paid


def _held(rt: Runtime, principal: Principal = ALICE) -> str:
    obs = rt.call(CALL, run_id="r1", node_id="n", principal=principal)
    assert obs.error is not None and obs.error.category == "needs_approval", obs
    return str(obs.error.details["request_id"])


def _decisions(rt: Runtime) -> list[dict[str, Any]]:
    return [dict(e.data) for e in rt.trace.events("r1") if e.kind == "approval_decided"]


def test_the_proposer_approving_its_own_call_raises_permission_denied_and_records_nothing() -> None:
    rt, paid = _runtime()
    request_id = _held(rt)
    with pytest.raises(ApprovalRefused) as refused:
        DistinctApprover(rt.approvals).approve(request_id, by="alice", reason="mine")
    error = refused.value.error
    assert error.category == "permission_denied" and error.recovery == ("request_authorization",)
    assert error.details["request_id"] == request_id and "'alice' proposed this call" in error.message
    stored = rt.approvals.get(request_id)
    assert stored is not None and (stored.status, stored.decided_by) == ("pending", None)
    assert _decisions(rt) == []
    again = rt.call(CALL, run_id="r1", node_id="n", principal=ALICE)
    assert again.error is not None and again.error.category == "needs_approval"
    assert paid == []
    rt.close()


def test_another_principal_approves_under_the_rule_and_the_call_runs_once() -> None:
    rt, paid = _runtime()
    request_id = _held(rt)
    decided = DistinctApprover(rt.approvals).approve(request_id, by="bob", reason="checked")
    assert (decided.status, decided.decided_by) == ("approved", "bob")
    assert [d["by"] for d in _decisions(rt)] == ["bob"]
    assert rt.call(CALL, run_id="r1", node_id="n", principal=ALICE).ok
    assert paid == ["bob"]
    rt.close()


def test_the_proposer_may_deny_its_own_call_under_the_rule() -> None:
    rt, paid = _runtime()
    request_id = _held(rt)
    denied = DistinctApprover(rt.approvals).deny(request_id, by="alice", reason="withdrawn")
    assert (denied.status, denied.decided_by) == ("denied", "alice")
    after = rt.call(CALL, run_id="r1", node_id="n", principal=ALICE)
    assert after.error is not None and after.error.category == "permission_denied"
    assert paid == []
    rt.close()


def test_an_unknown_request_is_a_key_error_under_the_rule_as_without_it() -> None:
    rt, _paid = _runtime()
    with pytest.raises(KeyError):
        DistinctApprover(rt.approvals).approve("apr_missing", by="bob")
    rt.close()


def test_without_the_rule_the_proposer_approves_its_own_call_as_before() -> None:
    rt, paid = _runtime()
    request_id = _held(rt)
    assert rt.approvals.approve(request_id, by="alice").status == "approved"
    assert rt.call(CALL, run_id="r1", node_id="n", principal=ALICE).ok
    assert paid == ["bob"]
    rt.close()


def _request(proposed_by: Any) -> ApprovalRequest:
    details = {} if proposed_by is None else {"proposed_by": proposed_by}
    return ApprovalRequest(
        id="apr_1",
        run_id="r",
        node_id="n",
        tool="pay@1",
        args_digest="d",
        arguments={},
        provenance={},
        details=details,
    )


def test_a_request_without_a_recorded_proposer_id_is_refused_under_the_rule() -> None:
    for recorded in (None, {"tenant": "acme"}, {"id": ""}, {"id": None}, "alice"):
        refused = refused_approval(_request(recorded), "bob")
        assert refused is not None and refused.category == "permission_denied", recorded
        assert "does not record who proposed" in refused.message


@settings(max_examples=200, deadline=None)
@given(proposer=st.text(min_size=1, max_size=20), approver=st.text(max_size=20), tenant=st.none() | st.text())
def test_only_an_approver_whose_id_differs_from_the_proposers_is_allowed(
    proposer: str, approver: str, tenant: str | None
) -> None:
    request = _request({"id": proposer, "scopes": ["*"], "tenant": tenant})
    refused = refused_approval(request, approver)
    assert (refused is None) == (approver != proposer)
    if refused is not None:
        assert refused.category == "permission_denied" and refused.details["principal"] == approver
