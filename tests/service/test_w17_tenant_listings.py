"""Ledger and approval listings narrowed by tenant cost a page behind another tenant's flood, on
every store.

* A tenant's ledger page and approval page are asked of the stores for that tenant: the rows the
  service reads from the stores' listing methods are about those of an unfiltered page, however many
  rows another tenant has (counted as rows returned, not timed), for every approval status.
* A row is listed under its run's tenant even when its run's ``run_started`` is recorded after it
  (a ledger entry, a request without a recorded proposer), and a request under its proposer's
  tenant when recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from actionspace import Principal, Runtime
from actionspace.approval.requests import ApprovalRequest
from actionspace.ledger.entries import LedgerEntry
from actionspace.service import create_app
from actionspace.trace.events import TraceEvent
from tests.pg import STORES, store_url
from tests.service.apptools import bearer

READ = ("runs:read", "approvals:read", "ledger:read")
TOKENS = {
    "quiet": Principal(id="q", scopes=READ, tenant="quiet"),
    "busy": Principal(id="b", scopes=READ, tenant="busy"),
    "admin": Principal(id="a", scopes=(*READ, "admin:all")),
}
BUSY = 400
QUIET = 7
LIMIT = 5


@pytest.fixture(params=STORES)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from store_url(request, tmp_path)


def _started(run_id: str, tenant: str, at: float) -> TraceEvent:
    data = {"principal": f"{tenant}-p", "tenant": tenant}
    return TraceEvent(run_id=run_id, seq=0, kind="run_started", ts=at, data=data)


def _entry(run_id: str, n: int, at: float) -> LedgerEntry:
    return LedgerEntry(
        key=f"as1_{run_id}_{n:05d}",
        run_id=run_id,
        node_id=f"n{n}",
        tool="pay@1",
        args_digest=f"d{n}",
        arguments={"n": n},
        state="committed",
        created_at=at,
        updated_at=at,
    )


def _request(run_id: str, n: int, at: float, tenant: str | None, **changes: Any) -> ApprovalRequest:
    details = {} if tenant is None else {"proposed_by": {"id": f"{tenant}-p", "tenant": tenant}}
    return ApprovalRequest(
        id=f"apr_{run_id}_{n:05d}",
        run_id=run_id,
        node_id=f"n{n}",
        tool="pay@1",
        args_digest=f"d{n}",
        arguments={"n": n},
        provenance={"n": "user"},
        details=details,
        created_at=at,
        **changes,
    )


class _Counted:
    """Counts the rows the service reads from a store's listing methods."""

    def __init__(self, store: Any, names: tuple[str, ...], monkeypatch: pytest.MonkeyPatch) -> None:
        self.rows = 0
        for name in names:
            method = getattr(store, name, None)
            if method is not None:
                monkeypatch.setattr(store, name, self._counting(method))

    def _counting(self, method: Callable[..., list[Any] | None]) -> Callable[..., list[Any] | None]:
        def counted(*args: Any, **kwargs: Any) -> list[Any] | None:
            got = method(*args, **kwargs)
            self.rows += len(got or ())
            return got

        return counted

    def read(self, client: TestClient, path: str, token: str, **params: Any) -> tuple[list[str], int]:
        self.rows = 0
        got = client.get(path, params={"limit": LIMIT, **params}, headers=bearer(token))
        assert got.status_code == 200, got.text
        return [r.get("key") or r["id"] for r in got.json()], self.rows


def test_a_quiet_tenants_ledger_page_reads_about_what_an_unfiltered_page_reads(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = Runtime(url, recover_on_start=False)
    try:
        rt.trace.append_many([_started("qt", "quiet", 1_000.0), _started("bz", "busy", 1_000.0)])
        # the late run's entries are written before its run_started is recorded
        quiet = [_entry("qt", n, 1_000.0 + n) for n in range(QUIET - 2)]
        quiet += [_entry("late", n, 1_100.0 + n) for n in range(2)]
        for entry in quiet + [_entry("bz", n, 5_000.0 + n) for n in range(BUSY)]:
            rt.ledger.begin(entry)
        rt.trace.append_many([_started("late", "quiet", 1_200.0)])
        counted = _Counted(rt.ledger, ("list", "tenant_entries"), monkeypatch)
        with TestClient(create_app(rt, tokens=TOKENS)) as client:
            everyone, unfiltered = counted.read(client, "/api/ledger", "admin")
            assert everyone == [f"as1_bz_{n:05d}" for n in range(BUSY - 1, BUSY - 1 - LIMIT, -1)]
            mine, narrowed = counted.read(client, "/api/ledger", "quiet")
            newest = sorted(quiet, key=lambda e: -e.updated_at)
            assert mine == [e.key for e in newest[:LIMIT]]
            # a filter behind the flood reads every busy entry first (400 rows and more)
            assert narrowed <= 2 * unfiltered + LIMIT, (narrowed, unfiltered)
            every, _ = counted.read(client, "/api/ledger", "quiet", limit=100)
            assert every == [e.key for e in newest]
            theirs, busy_read = counted.read(client, "/api/ledger", "busy")
            assert theirs == everyone and busy_read <= 2 * unfiltered + LIMIT
            state, by_state = counted.read(client, "/api/ledger", "quiet", state="committed")
            assert state == mine and by_state <= 2 * unfiltered + LIMIT
    finally:
        rt.close()


@pytest.mark.parametrize("status", ["pending", "all", "approved", "expired", "denied"])
def test_a_quiet_tenants_approval_page_reads_about_what_an_unfiltered_page_reads(
    url: str, status: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = Runtime(url, recover_on_start=False)
    now = rt.approvals.clock.time()
    stored = {"expired": "approved", "all": "pending"}.get(status, status)
    expiry = {"expires_at": now - 10.0} if status == "expired" else {}
    if status == "approved":
        expiry = {"expires_at": now + 3_600.0}
    try:
        rt.trace.append_many([_started("qt", "quiet", 1_000.0), _started("bz", "busy", 1_000.0)])
        # proposed by the quiet tenant; and without a recorded proposer, of a quiet run started later
        quiet = [_request("qt", n, 1_000.0 + n, "quiet", status=stored, **expiry) for n in range(QUIET - 2)]
        quiet += [_request("late", n, 1_100.0 + n, None, status=stored, **expiry) for n in range(2)]
        busy = [_request("bz", n, 5_000.0 + n, "busy", status=stored, **expiry) for n in range(BUSY)]
        # a request proposed by the busy tenant on a quiet run is the busy tenant's
        busy.append(_request("qt", 9_999, 9_000.0, "busy", status=stored, **expiry))
        for request in quiet + busy:
            rt.approvals.store.create(request)
        rt.trace.append_many([_started("late", "quiet", 1_200.0)])
        counted = _Counted(rt.approvals.store, ("list", "list_approved", "tenant_requests"), monkeypatch)
        with TestClient(create_app(rt, tokens=TOKENS)) as client:
            path = "/api/approvals"
            everyone, unfiltered = counted.read(client, path, "admin", status=status)
            assert everyone[0] == "apr_qt_09999" and len(everyone) == LIMIT
            mine, narrowed = counted.read(client, path, "quiet", status=status)
            newest = sorted(quiet, key=lambda r: -r.created_at)
            assert mine == [r.id for r in newest[:LIMIT]]
            assert narrowed <= 2 * unfiltered + LIMIT, (narrowed, unfiltered)
            every, _ = counted.read(client, path, "quiet", status=status, limit=100)
            assert every == [r.id for r in newest]
            theirs, busy_read = counted.read(client, path, "busy", status=status)
            assert theirs == everyone and busy_read <= 2 * unfiltered + LIMIT
    finally:
        rt.close()
