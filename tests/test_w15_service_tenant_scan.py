"""A listing narrowed by tenant finds the tenant's rows however many rows of other tenants are newer.

Listings read a store a bounded number of rows at a time (:data:`actionspace.service.scoping.MAX_SCAN`,
lowered here so the test stays small): the tenant's own rows, older than every row of a busy
tenant, are still listed, for runs, approval requests and ledger entries, on every store.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from actionspace import Principal, Runtime
from actionspace.approval.requests import ApprovalRequest
from actionspace.ledger.entries import LedgerEntry
from actionspace.service import create_app
from actionspace.trace.events import TraceEvent
from tests.pg import STORES, store_url
from tests.service.apptools import bearer

SCAN = 40
"""The scan bound of this test: fewer than the busy tenant's rows."""
BUSY = 3 * SCAN
READ = ("runs:read", "approvals:read", "ledger:read")
TOKENS = {
    "quiet": Principal(id="q", scopes=READ, tenant="quiet"),
    "busy": Principal(id="b", scopes=READ, tenant="busy"),
    "none": Principal(id="n", scopes=READ),
}
QUIET = 3


@pytest.fixture(params=STORES)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from store_url(request, tmp_path)


def _seed(rt: Runtime, tenant: str | None, count: int, at: float, prefix: str) -> None:
    principal = {"id": f"{prefix}-p", "scopes": ["*"], "tenant": tenant}
    events = []
    for i in range(count):
        run_id = f"{prefix}-{i:04d}"
        started = {"principal": principal["id"]} | ({} if tenant is None else {"tenant": tenant})
        events.append(TraceEvent(run_id=run_id, seq=0, kind="run_started", ts=at + i, data=started))
        rt.approvals.store.create(
            ApprovalRequest(
                id=f"apr_{prefix}_{i:04d}",
                run_id=run_id,
                node_id="n1",
                tool="pay@1",
                args_digest=f"d-{prefix}-{i}",
                arguments={"n": i},
                provenance={"n": "user"},
                details={"proposed_by": principal},
                created_at=at + i,
            )
        )
        rt.ledger.begin(
            LedgerEntry(
                key=f"as1_{prefix}{i:04d}",
                run_id=run_id,
                node_id="n1",
                tool="pay@1",
                args_digest=f"d-{prefix}-{i}",
                arguments={"n": i},
                created_at=at + i,
                updated_at=at + i,
            )
        )
    rt.trace.append_many(events)


def test_a_quiet_tenants_rows_are_listed_under_a_flood_of_newer_rows_of_another(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("actionspace.service.scoping.MAX_SCAN", SCAN)
    rt = Runtime(url, recover_on_start=False)
    try:
        _seed(rt, "quiet", QUIET, 1_000_000.0, "qt")
        _seed(rt, None, QUIET, 1_000_100.0, "nt")
        _seed(rt, "busy", BUSY, 2_000_000.0, "bz")
        app = create_app(rt, tokens=TOKENS)
        with TestClient(app) as client:
            for token, prefix in (("quiet", "qt"), ("none", "nt")):
                runs = client.get("/api/runs", params={"limit": 10}, headers=bearer(token))
                assert runs.status_code == 200, runs.text
                assert [r["run_id"] for r in runs.json()] == [
                    f"{prefix}-{i:04d}" for i in reversed(range(QUIET))
                ]
                approvals = client.get("/api/approvals", params={"limit": 10}, headers=bearer(token))
                assert approvals.status_code == 200, approvals.text
                assert sorted(a["id"] for a in approvals.json()) == [
                    f"apr_{prefix}_{i:04d}" for i in range(QUIET)
                ]
                ledger = client.get("/api/ledger", params={"limit": 10}, headers=bearer(token))
                assert ledger.status_code == 200, ledger.text
                assert sorted(e["key"] for e in ledger.json()) == [
                    f"as1_{prefix}{i:04d}" for i in range(QUIET)
                ]
            # the busy tenant's own page is what it was: its newest rows, none of the others'
            busy = client.get("/api/runs", params={"limit": 5}, headers=bearer("busy")).json()
            assert [r["run_id"] for r in busy] == [f"bz-{i:04d}" for i in range(BUSY - 1, BUSY - 6, -1)]
    finally:
        rt.close()
