"""An approval's lifetime is a positive, finite number of seconds (or None: it never expires); any
other value is a developer's mistake, refused before the request is decided, in every store."""

from __future__ import annotations

import math

import pytest

from actionspace.approval.gate import Approvals
from actionspace.approval.requests import ApprovalStore
from tests.ledger.factories import request


@pytest.mark.parametrize("ttl_s", [math.nan, math.inf, -1.0, 0.0], ids=["nan", "inf", "negative", "zero"])
def test_an_approval_with_a_lifetime_that_is_not_a_positive_time_is_refused_and_stays_pending(
    approval_store: ApprovalStore, ttl_s: float
) -> None:
    approval_store.create(request())
    approvals = Approvals(approval_store, lambda run, kind, data: None)
    with pytest.raises(ValueError, match="ttl_s"):
        approvals.approve("apr_1", by="ops", ttl_s=ttl_s)
    stored = approval_store.get("apr_1")
    assert stored is not None and stored.status == "pending"


def test_an_approval_without_a_lifetime_never_expires(approval_store: ApprovalStore) -> None:
    approval_store.create(request())
    approved = Approvals(approval_store, lambda run, kind, data: None).approve("apr_1", by="ops", ttl_s=None)
    assert approved.expires_at is None and approved.honoured(now=1e12)
