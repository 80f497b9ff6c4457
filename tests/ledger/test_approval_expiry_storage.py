"""An approval's expiry as the stores keep it: a time SQLite cannot hold is refused, never read
back as "never expires"."""

from __future__ import annotations

import contextlib
import math
from pathlib import Path

import pytest

from actionspace import Runtime, ToolCall
from actionspace.ledger.sqlite_approvals import SqliteApprovalStore
from tests.ledger.factories import NOW, request


def test_the_sqlite_store_refuses_a_nan_expiry_and_keeps_the_request_pending(tmp_path: Path) -> None:
    """SQLite binds a NaN as NULL, and a NULL expiry means "valid until consumed"."""
    with SqliteApprovalStore(tmp_path / "as.db") as store:
        store.create(request())
        approved = request(status="approved", decided_by="ann", decided_at=NOW, expires_at=math.nan)
        with pytest.raises(ValueError, match="expires_at"):
            store.update("apr_1", ["pending"], approved)
        kept = store.get("apr_1")
        assert kept is not None and kept.status == "pending" and kept.expires_at is None


@pytest.mark.parametrize("store", ["memory://", "sqlite"])
def test_an_approval_with_a_nan_lifetime_never_lets_the_call_through(tmp_path: Path, store: str) -> None:
    url = f"sqlite:///{tmp_path / 'as.db'}" if store == "sqlite" else store
    rt = Runtime(url)
    sent: list[int] = []

    @rt.tool(effect="external", idempotency="native", requires_approval=True)
    def pay(amount: int, idempotency_key: str = "") -> str:
        """Pay ``amount``."""
        sent.append(amount)
        return "paid"

    call = ToolCall(name="pay", arguments={"amount": 5})
    held = rt.call(call, run_id="r")
    assert held.error is not None and held.error.category == "needs_approval"
    with contextlib.suppress(ValueError):  # a store may refuse it; none may keep it as "never expires"
        rt.approvals.approve(held.error.details["request_id"], by="ann", ttl_s=math.nan)
    again = rt.call(call, run_id="r")
    rt.close()
    assert again.error is not None and again.error.category == "needs_approval"
    assert sent == []
