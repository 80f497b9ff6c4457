"""What a tenant may be, alike on every store (property, hypothesis).

A tenant is a string without U+0000 and without unpaired surrogates. A token's principal with any
other tenant is refused when the app is made (``ConfigurationError``); a tenant recorded as anything
else (a number, a bool, an object, an array, such a string) is no principal's. For any recorded
tenant and any principal the app takes, a run, its ledger entry and its approval request are
shown in the listings exactly when they are found by id, and that is when the recorded tenant is
the principal's (a tenant of an earlier version's listings could be found by id yet be missing
from its own tenant's listing: an object, an array, some floats, a string holding U+0000).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Principal, Runtime
from actionspace.approval.requests import ApprovalRequest
from actionspace.errors import ConfigurationError
from actionspace.ledger.entries import LedgerEntry
from actionspace.service import create_app
from actionspace.trace.events import TraceEvent
from tests.pg import STORES, store_url
from tests.service.apptools import bearer

READ = ("runs:read", "approvals:read", "ledger:read")
_numbers = itertools.count()

tenants = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.1 + 0.2, 1e16, 1e-7, -0.0, 2.5]),
    st.text(max_size=6),
    st.sampled_from(["a\x00b", "\x00", "x\ud800", "acme", "", "ünï"]),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@pytest.fixture(params=STORES)
def rt(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Runtime]:
    for url in store_url(request, tmp_path):
        runtime = Runtime(url, recover_on_start=False)
        try:
            yield runtime
        finally:
            runtime.close()


def _valid(tenant: object) -> bool:
    return (
        isinstance(tenant, str)
        and "\x00" not in tenant
        and not any(0xD800 <= ord(c) < 0xE000 for c in tenant)
    )


def _record(rt: Runtime, tenant: Any, proposed: bool) -> tuple[str, str, str]:
    n = next(_numbers)
    run_id, key, request_id = f"run-{n}", f"as1_k{n}", f"apr_{n}"
    data = {"principal": "p", "tenant": tenant}
    rt.trace.append_many([TraceEvent(run_id=run_id, seq=0, kind="run_started", ts=1_000.0 + n, data=data)])
    entry = LedgerEntry(
        key=key, run_id=run_id, node_id="n", tool="t@1", args_digest="d", arguments={},
        created_at=1_000.0 + n, updated_at=1_000.0 + n,
    )  # fmt: skip
    rt.ledger.begin(entry)
    details = {"proposed_by": {"id": "p", "tenant": tenant}} if proposed else {}
    request = ApprovalRequest(
        id=request_id, run_id=run_id, node_id="n", tool="t@1", args_digest="d", arguments={},
        provenance={}, details=details, created_at=1_000.0 + n,
    )  # fmt: skip
    rt.approvals.store.create(request)
    return run_id, key, request_id


def _ids(client: TestClient, path: str, field: str) -> list[str]:
    got = client.get(path, params={"limit": 500, **({"status": "all"} if "approvals" in path else {})},
                     headers=bearer("t"))  # fmt: skip
    assert got.status_code == 200, got.text
    return [row[field] for row in got.json()]


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)  # fmt: skip
@given(recorded=tenants, proposed=st.booleans(), pick=st.integers(0, 3))
def test_a_row_is_listed_exactly_when_it_is_found_and_its_tenant_is_the_principals(
    rt: Runtime, recorded: Any, proposed: bool, pick: int
) -> None:
    run_id, key, request_id = _record(rt, recorded, proposed)
    # the principal's tenant: the recorded one, or text of it as one store or another writes it
    candidates = [recorded, None if recorded is None else str(recorded), json.dumps(recorded), "other"]
    mine = candidates[pick]
    principal = Principal(id="viewer", scopes=READ, tenant=mine)
    if mine is not None and not _valid(mine):
        with pytest.raises(ConfigurationError, match="tenant"):
            create_app(rt, tokens={"t": principal})
        return
    client = TestClient(create_app(rt, tokens={"t": principal}))
    seen = recorded == mine and (recorded is None or _valid(recorded))
    found = client.get(f"/api/runs/{run_id}", headers=bearer("t")).status_code
    assert found == (200 if seen else 404)
    assert (run_id in _ids(client, "/api/runs", "run_id")) == seen
    assert (key in _ids(client, "/api/ledger", "key")) == seen
    assert (request_id in _ids(client, "/api/approvals", "id")) == seen
    got = client.get(f"/api/approvals/{request_id}", headers=bearer("t")).status_code
    assert got == (200 if seen else 404)
