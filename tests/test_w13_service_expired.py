"""``expired`` in the approvals listing: an approval whose ``expires_at`` has passed is shown, and
filtered, as ``expired`` (read from ``expires_at`` when listed; the store keeps ``approved``), on
every store, and it never authorizes the call it was given for."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actionspace.approval.requests import ApprovalRequest
from tests.pg import STORES, store_url
from tests.service.apptools import bearer, served

APPROVER = bearer("approver-token")


@pytest.fixture(params=STORES)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from store_url(request, tmp_path)


def _filed(store: Any, run_id: str, *, decided: bool, expires_at: float | None = None) -> str:
    """A request of ``run_id`` (a run no server drives), approved until ``expires_at`` if ``decided``."""
    now = time.time()
    request = ApprovalRequest(
        id=f"apr_{run_id}",
        run_id=run_id,
        node_id="n1",
        tool="send_payment@1",
        args_digest=f"d-{run_id}",
        arguments={"to": "acct-9", "amount": 5},
        provenance={"to": "user", "amount": "user"},
        created_at=now - 100,
    )
    store.create(request)
    if decided:
        approved = request.evolve(
            status="approved", decided_by="alice", decided_at=now - 90, expires_at=expires_at
        )
        assert store.update(request.id, ("pending",), approved) is not None
    return request.id


def _listed(client: Any, **params: str) -> dict[str, str]:
    answer = client.get("/api/approvals", params=params, headers=APPROVER)
    assert answer.status_code == 200, answer.text
    return {r["id"]: r["status"] for r in answer.json()}


def test_an_approval_past_its_expiry_is_listed_and_filtered_as_expired(url: str) -> None:
    with served(url) as (client, rt, *_):
        store = rt.approvals.store
        now = time.time()
        pending = _filed(store, "r-pending", decided=False)
        valid = _filed(store, "r-valid", decided=True, expires_at=now + 3600)
        forever = _filed(store, "r-forever", decided=True, expires_at=None)
        lapsed = _filed(store, "r-lapsed", decided=True, expires_at=now - 30)
        assert _listed(client, status="expired") == {lapsed: "expired"}
        assert _listed(client, status="approved") == {valid: "approved", forever: "approved"}
        assert _listed(client, status="pending") == {pending: "pending"}
        assert _listed(client, status="all") == {
            pending: "pending",
            valid: "approved",
            forever: "approved",
            lapsed: "expired",
        }
        assert _listed(client, status="expired", run="r-lapsed") == {lapsed: "expired"}
        assert _listed(client, status="approved", run="r-lapsed") == {}
        one = client.get(f"/api/approvals/{lapsed}", headers=APPROVER).json()
        assert one["status"] == "expired"
        assert client.get(f"/api/approvals/{valid}", headers=APPROVER).json()["status"] == "approved"
        again = client.post(f"/api/approvals/{lapsed}/approve", headers=APPROVER)
        assert again.status_code == 409  # decided already: not pending again
        stored = store.get(lapsed)
        assert stored is not None and stored.status == "approved" and not stored.honoured()


def test_an_expired_approval_never_authorizes_the_call() -> None:
    with served() as (_client, rt, world, *_):
        call = {"name": "send_payment", "arguments": {"to": "acct-9", "amount": 500}}
        held = rt.call(call, run_id="r1", node_id="n1")
        assert held.error is not None and held.error.category == "needs_approval"
        request_id = held.error.details["request_id"]
        request = rt.approvals.store.get(request_id)
        assert request is not None
        now = time.time()
        lapsed = request.evolve(
            status="approved", decided_by="alice", decided_at=now - 90, expires_at=now - 1
        )
        assert rt.approvals.store.update(request_id, ("pending",), lapsed) is not None
        again = rt.call(call, run_id="r1", node_id="n1")
        assert again.error is not None and again.error.category == "needs_approval"
        assert again.error.details["request_id"] != request_id
        assert world.payments == []
