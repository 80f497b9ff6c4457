"""Run listings stay right, and cost a page, behind another tenant's flood, on every store.

* A run's ``waiting_approval`` status is read from the pending requests of the listed runs, not
  from the newest pending requests overall: more than a thousand newer pending requests of another
  tenant do not turn a waiting run ``open``.
* A tenant's page is asked of the store for that tenant: the rows the service reads from the
  store's run listings are about those of an unfiltered page, however many runs another tenant has
  (counted as rows returned by the store's listing methods, not timed).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from actionspace import Principal, Runtime
from actionspace.approval.requests import ApprovalRequest
from actionspace.service import create_app
from actionspace.trace.events import TraceEvent
from tests.pg import STORES, store_url
from tests.service.apptools import bearer

READ = ("runs:read", "approvals:read")
TOKENS = {
    "quiet": Principal(id="q", scopes=READ, tenant="quiet"),
    "busy": Principal(id="b", scopes=READ, tenant="busy"),
    "admin": Principal(id="a", scopes=(*READ, "admin:all")),
}
FLOOD = 1_001
"""Pending requests of the busy tenant: more than the newest 1,000 a listing used to read."""


@pytest.fixture(params=STORES)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from store_url(request, tmp_path)


def _started(run_id: str, tenant: str, at: float) -> TraceEvent:
    data = {"principal": f"{tenant}-p", "tenant": tenant}
    return TraceEvent(run_id=run_id, seq=0, kind="run_started", ts=at, data=data)


def _request(run_id: str, tenant: str, n: int, at: float) -> ApprovalRequest:
    return ApprovalRequest(
        id=f"apr_{tenant}_{n:05d}",
        run_id=run_id,
        node_id="n1",
        tool="pay@1",
        args_digest=f"d-{n}",
        arguments={"n": n},
        provenance={"n": "user"},
        details={"proposed_by": {"id": f"{tenant}-p", "tenant": tenant}},
        created_at=at,
    )


def _flood_requests(rt: Runtime, count: int, at: float) -> None:
    """``count`` pending requests of the busy tenant, newer than everything else, on 10 runs."""
    for n in range(count):
        rt.approvals.store.create(_request(f"bz-{n % 10}", "busy", n, at + n))


def test_a_waiting_run_is_shown_waiting_behind_more_than_a_thousand_newer_pending_requests(url: str) -> None:
    rt = Runtime(url, recover_on_start=False)
    try:
        rt.trace.append_many(
            [_started("qt-run", "quiet", 1_000.0)]
            + [_started(f"bz-{i}", "busy", 2_000.0 + i) for i in range(10)]
        )
        rt.approvals.store.create(_request("qt-run", "quiet", 0, 1_000.0))
        _flood_requests(rt, FLOOD, 3_000.0)
        assert len(rt.approvals.list("pending", limit=FLOOD + 10)) == FLOOD + 1
        with TestClient(create_app(rt, tokens=TOKENS)) as client:
            for token in ("quiet", "admin"):
                rows = client.get("/api/runs", params={"limit": 50}, headers=bearer(token))
                assert rows.status_code == 200, rows.text
                status = {r["run_id"]: r["status"] for r in rows.json()}
                assert status["qt-run"] == "waiting_approval", (token, status)
            one = client.get("/api/runs/qt-run", headers=bearer("quiet"))
            assert one.status_code == 200, one.text
            assert one.json()["status"] == "waiting_approval"
            # the run's own requests, asked for by run, are found behind the flood too
            mine = client.get("/api/approvals", params={"run": "qt-run"}, headers=bearer("quiet"))
            assert mine.status_code == 200, mine.text
            assert [a["id"] for a in mine.json()] == ["apr_quiet_00000"]
            # a run whose request was decided is no longer shown waiting
            rt.approvals.deny("apr_quiet_00000", by="q")
            after = client.get("/api/runs", params={"limit": 50}, headers=bearer("quiet")).json()
            assert {r["run_id"]: r["status"] for r in after} == {"qt-run": "open"}
    finally:
        rt.close()


class _Counted:
    """Counts the rows the service reads from the trace store's run listings."""

    def __init__(self, store: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        self.rows = 0
        for name in ("runs", "runs_after", "tenant_runs"):
            method = getattr(store, name, None)
            if method is not None:
                monkeypatch.setattr(store, name, self._counting(method))

    def _counting(self, method: Callable[..., list[Any]]) -> Callable[..., list[Any]]:
        def counted(*args: Any, **kwargs: Any) -> list[Any]:
            got = method(*args, **kwargs)
            self.rows += len(got)
            return got

        return counted

    def read(self, client: TestClient, token: str, limit: int) -> tuple[list[str], int]:
        self.rows = 0
        got = client.get("/api/runs", params={"limit": limit}, headers=bearer(token))
        assert got.status_code == 200, got.text
        return [r["run_id"] for r in got.json()], self.rows


BUSY_RUNS = 600
QUIET_RUNS = 12


def test_a_quiet_tenants_page_reads_about_what_an_unfiltered_page_reads(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = Runtime(url, recover_on_start=False)
    try:
        quiet = [_started(f"qt-{i:03d}", "quiet", 1_000.0 + i) for i in range(QUIET_RUNS)]
        busy = [_started(f"bz-{i:04d}", "busy", 5_000.0 + i) for i in range(BUSY_RUNS)]
        rt.trace.append_many(quiet + busy)
        counted = _Counted(rt.trace, monkeypatch)
        with TestClient(create_app(rt, tokens=TOKENS)) as client:
            limit = 5
            everyone, unfiltered = counted.read(client, "admin", limit)
            assert everyone == [f"bz-{i:04d}" for i in range(BUSY_RUNS - 1, BUSY_RUNS - 1 - limit, -1)]
            mine, narrowed = counted.read(client, "quiet", limit)
            assert mine == [f"qt-{i:03d}" for i in range(QUIET_RUNS - 1, QUIET_RUNS - 1 - limit, -1)]
            # a Python filter behind the flood reads every busy run first (600 rows and more)
            assert narrowed <= 2 * unfiltered + limit, (narrowed, unfiltered)
            # the busy tenant's own page too, and every quiet run is listed once over pages
            theirs, busy_read = counted.read(client, "busy", limit)
            assert theirs == everyone and busy_read <= 2 * unfiltered + limit
            listed: list[str] = []
            params: dict[str, Any] = {"limit": 4}
            while True:
                page = client.get("/api/runs", params=params, headers=bearer("quiet")).json()
                listed += [r["run_id"] for r in page]
                if len(page) < 4:
                    break
                params = {"limit": 4, "before": page[-1]["last_at"], "before_id": page[-1]["run_id"]}
            assert listed == [f"qt-{i:03d}" for i in reversed(range(QUIET_RUNS))]
    finally:
        rt.close()
