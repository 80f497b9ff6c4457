"""``GET /api/approvals?status=approved|expired`` is exact however many approvals the other way
are newer: the store answers the filter (status and expiry at the listing's time) in its query,
so the scan limit of a listing narrowed by tenant never hides a match. On every store."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actionspace.approval.gate import Approvals
from actionspace.approval.requests import ApprovalRequest, ApprovalStore, ListsApproved
from actionspace.ledger.memory import MemoryApprovalStore
from actionspace.service import scoping
from tests.pg import STORES, store_url
from tests.service.apptools import SignallingApprovals, bearer, served

APPROVER = bearer("approver-token")
SCAN = 40
"""The scan limit the tests set, so that a few dozen rows are more than it (a page is at most that
long: pages are never longer than the scan limit)."""


@pytest.fixture(params=STORES)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from store_url(request, tmp_path)


def _approved(store: Any, n: int, *, created: float, expires_at: float | None, prefix: str) -> list[str]:
    """``n`` approved requests filed at ``created`` + i µs, valid until ``expires_at``."""
    ids = []
    for i in range(n):
        request = ApprovalRequest(
            id=f"apr_{prefix}{i:05d}",
            run_id=f"{prefix}-{i}",
            node_id="n1",
            tool="wire_funds@1",
            args_digest=f"d-{prefix}-{i}",
            arguments={"amount": i},
            provenance={"amount": "user"},
            created_at=created + i * 1e-3,
        )
        store.create(request)
        decided = request.evolve(
            status="approved", decided_by="alice", decided_at=created, expires_at=expires_at
        )
        assert store.update(request.id, ("pending",), decided) is not None
        ids.append(request.id)
    return ids


def _listed(client: Any, status: str, limit: int = 100) -> list[str]:
    answer = client.get("/api/approvals", params={"status": status, "limit": limit}, headers=APPROVER)
    assert answer.status_code == 200, answer.text
    assert {r["status"] for r in answer.json()} <= {status}
    return [r["id"] for r in answer.json()]


def test_a_valid_approval_older_than_the_scan_limit_of_expired_ones_is_listed(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scoping, "MAX_SCAN", SCAN)
    now = time.time()
    with served(url) as (client, rt, *_):
        store = rt.approvals.store
        valid = _approved(store, 2, created=now - 1000, expires_at=now + 3600, prefix="v")
        expired = _approved(store, SCAN + 10, created=now - 500, expires_at=now - 1, prefix="x")
        assert _listed(client, "approved") == valid[::-1]
        assert _listed(client, "expired", limit=SCAN) == expired[::-1][:SCAN]
        assert _listed(client, "expired", limit=3) == expired[::-1][:3]


def test_an_expired_approval_older_than_the_scan_limit_of_valid_ones_is_listed(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scoping, "MAX_SCAN", SCAN)
    now = time.time()
    with served(url) as (client, rt, *_):
        store = rt.approvals.store
        expired = _approved(store, 2, created=now - 1000, expires_at=now - 1, prefix="x")
        forever = _approved(store, SCAN // 2 + 5, created=now - 500, expires_at=None, prefix="f")
        valid = _approved(store, SCAN // 2 + 5, created=now - 400, expires_at=now + 3600, prefix="v")
        assert _listed(client, "expired") == expired[::-1]
        assert _listed(client, "approved", limit=SCAN) == (forever + valid)[::-1][:SCAN]


def test_more_expired_approvals_than_the_real_scan_limit_do_not_hide_a_valid_one() -> None:
    """The limit as shipped, over the memory store (the database stores run the same query above)."""
    now = time.time()
    with served() as (client, rt, *_):
        store = rt.approvals.store
        assert isinstance(rt.approvals.store, SignallingApprovals)
        assert isinstance(rt.approvals.store.inner, MemoryApprovalStore)
        valid = _approved(store, 1, created=now - 10_000, expires_at=None, prefix="v")
        _approved(store, scoping.MAX_SCAN + 1, created=now - 9_000, expires_at=now - 1, prefix="x")
        assert _listed(client, "approved") == valid


class _Plain:
    """An approval store with only the protocol's methods (no ``list_approved``)."""

    def __init__(self) -> None:
        self.inner = MemoryApprovalStore()
        self.create, self.get, self.find = self.inner.create, self.inner.get, self.inner.find
        self.list, self.update, self.close = self.inner.list, self.inner.update, self.inner.close


def test_a_store_without_the_query_is_filtered_from_its_newest_approvals() -> None:
    now = time.time()
    store = _Plain()
    assert not isinstance(store, ListsApproved) and isinstance(store, ApprovalStore)
    valid = _approved(store, 3, created=now - 100, expires_at=now + 60, prefix="v")
    expired = _approved(store, 3, created=now - 50, expires_at=now - 1, prefix="x")
    approvals = Approvals(store, lambda *_: None)
    assert [r.id for r in approvals.list_approved(expired=False)] == valid[::-1]
    assert [r.id for r in approvals.list_approved(expired=True, limit=2)] == expired[::-1][:2]
    assert [r.id for r in approvals.list_approved(expired=False, now=now + 3600)] == []
