"""A decision's texts (who decided, why, which request) are refused when a store cannot hold them
(U+0000, an unpaired surrogate): a ``ValueError`` before anything is decided, in every store, and
the request stays pending; never a driver's error from halfway through."""

from __future__ import annotations

import pytest

from actionspace.approval.gate import Approvals
from actionspace.approval.requests import ApprovalStore
from tests.ledger.factories import request

_BAD = ["a\x00b", "a\ud800b"]


@pytest.mark.parametrize("bad", _BAD, ids=["nul", "surrogate"])
@pytest.mark.parametrize("field", ["by", "reason"])
@pytest.mark.parametrize("decision", ["approve", "deny"])
def test_a_decision_text_no_store_can_hold_is_refused_and_the_request_stays_pending(
    approval_store: ApprovalStore, bad: str, field: str, decision: str
) -> None:
    approval_store.create(request())
    approvals = Approvals(approval_store, lambda run, kind, data: None)
    texts = {"by": "ops", "reason": "checked"} | {field: bad}
    with pytest.raises(ValueError, match=field):
        getattr(approvals, decision)("apr_1", **texts)
    stored = approval_store.get("apr_1")
    assert stored is not None and stored.status == "pending"


@pytest.mark.parametrize("bad", _BAD, ids=["nul", "surrogate"])
def test_a_request_id_no_store_can_hold_is_no_request(approval_store: ApprovalStore, bad: str) -> None:
    approval_store.create(request())
    approvals = Approvals(approval_store, lambda run, kind, data: None)
    with pytest.raises(KeyError):
        approvals.approve(bad, by="ops")
    assert approvals.get(bad) is None
