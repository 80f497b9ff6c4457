"""A pending approval request is held for one proposer (id and tenant) under one approval rule: another
proposer of the same call in the same run files a request of its own, in every store."""

from __future__ import annotations

from typing import Any

from actionspace.approval.requests import ApprovalStore
from tests.ledger.factories import request

ALICE = {"id": "alice", "scopes": ["*"], "tenant": "acme"}
MALLORY = {"id": "mallory", "scopes": ["*"], "tenant": "acme"}
ALICE_ELSEWHERE = {"id": "alice", "scopes": ["*"], "tenant": "globex"}
ALICE_UNTENANTED = {"id": "alice", "scopes": ["*"], "tenant": None}


def _proposed(request_id: str, proposer: dict[str, Any] | None, rule: str | None = None) -> Any:
    details: dict[str, Any] = {"limit": 5}
    if proposer is not None:
        details["proposed_by"] = proposer
    if rule is not None:
        details["approval_rule"] = rule
    return request(request_id=request_id, details=details)


def test_another_proposer_of_the_same_call_files_its_own_request(approval_store: ApprovalStore) -> None:
    first = approval_store.create(_proposed("apr_alice", ALICE))
    second = approval_store.create(_proposed("apr_mallory", MALLORY))
    assert first.id == "apr_alice"
    assert second.id == "apr_mallory"
    assert second.details["proposed_by"] == MALLORY
    pending = {r.id for r in approval_store.list(status="pending")}
    assert pending == {"apr_alice", "apr_mallory"}


def test_the_same_proposer_shares_its_pending_request(approval_store: ApprovalStore) -> None:
    approval_store.create(_proposed("apr_1", ALICE))
    again = approval_store.create(_proposed("apr_2", {**ALICE, "scopes": ["read:*"]}))
    assert again.id == "apr_1"
    assert [r.id for r in approval_store.list(status="pending")] == ["apr_1"]


def test_the_same_id_in_another_tenant_is_another_proposer(approval_store: ApprovalStore) -> None:
    approval_store.create(_proposed("apr_acme", ALICE))
    assert approval_store.create(_proposed("apr_globex", ALICE_ELSEWHERE)).id == "apr_globex"
    assert approval_store.create(_proposed("apr_none", ALICE_UNTENANTED)).id == "apr_none"
    assert approval_store.create(_proposed("apr_unknown", None)).id == "apr_unknown"


def test_another_approval_rule_is_another_request(approval_store: ApprovalStore) -> None:
    approval_store.create(_proposed("apr_gate", ALICE))
    assert approval_store.create(_proposed("apr_flow", ALICE, rule="audited")).id == "apr_flow"
    assert approval_store.create(_proposed("apr_flow2", ALICE, rule="audited")).id == "apr_flow"
    assert approval_store.create(_proposed("apr_other", ALICE, rule="other")).id == "apr_other"


def test_a_decided_request_lets_its_proposer_file_a_new_one(approval_store: ApprovalStore) -> None:
    first = approval_store.create(_proposed("apr_1", ALICE))
    assert approval_store.update("apr_1", ("pending",), first.evolve(status="denied")) is not None
    assert approval_store.create(_proposed("apr_2", ALICE)).id == "apr_2"


def test_proposers_told_apart_by_any_text_of_their_ids(approval_store: ApprovalStore) -> None:
    odd = {"id": "al\x00ice\ud800", "scopes": [], "tenant": "ac:me\u202e"}
    first = approval_store.create(_proposed("apr_odd", odd))
    assert first.id == "apr_odd"
    assert approval_store.create(_proposed("apr_odd2", odd)).id == "apr_odd"
    assert approval_store.create(_proposed("apr_plain", {**odd, "id": "al\x00ice"})).id == "apr_plain"
