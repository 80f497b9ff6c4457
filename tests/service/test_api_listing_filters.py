"""A narrowed listing (by principal, or to a token's tenant) finds rows behind many it leaves out."""

from __future__ import annotations

from actionspace import Principal
from tests.service.apptools import TOOL_SCOPES, bearer, served

TOKENS = {
    "admin-token": Principal(id="admin", scopes=("*",)),
    "t2-reader": Principal(id="r2", scopes=("runs:read", "approvals:read", "ledger:read"), tenant="t2"),
}
BUSY = Principal(id="busy", scopes=TOOL_SCOPES, tenant="t1")
QUIET = Principal(id="quiet", scopes=TOOL_SCOPES, tenant="t2")


def _lookup(city: str) -> dict[str, object]:
    return {"name": "lookup", "arguments": {"city": city}}


def test_a_principal_filter_finds_its_run_behind_many_newer_runs_of_others() -> None:
    with served(tokens=TOKENS) as (client, rt, *_):
        rt.call(_lookup("Oslo"), run_id="quiet-run", principal=QUIET)
        for i in range(12):
            rt.call(_lookup("Rome"), run_id=f"busy-{i}", principal=BUSY)
        for limit in (1, 2, 50):
            rows = client.get(
                f"/api/runs?principal=quiet&limit={limit}", headers=bearer("admin-token")
            ).json()
            assert [r["run_id"] for r in rows] == ["quiet-run"], limit
        busy = client.get("/api/runs?principal=busy&limit=5", headers=bearer("admin-token")).json()
        assert [r["run_id"] for r in busy] == [f"busy-{i}" for i in range(11, 6, -1)]


def test_a_tenant_token_lists_its_runs_requests_and_entries_behind_other_tenants() -> None:
    with served(tokens=TOKENS) as (client, rt, *_):
        rt.call({"name": "send_payment", "arguments": {"to": "a", "amount": 1}}, run_id="q", principal=QUIET)
        rt.call({"name": "post_note", "arguments": {"text": "q"}}, run_id="q", principal=QUIET)
        for i in range(12):
            pay = {"name": "send_payment", "arguments": {"to": "b", "amount": i + 1}}
            rt.call(pay, run_id=f"b{i}", principal=BUSY)
            rt.call({"name": "post_note", "arguments": {"text": f"b{i}"}}, run_id=f"b{i}", principal=BUSY)
        reader = bearer("t2-reader")
        runs = client.get("/api/runs?limit=1", headers=reader).json()
        assert [r["run_id"] for r in runs] == ["q"]
        requests = client.get("/api/approvals?limit=1", headers=reader).json()
        assert [r["run_id"] for r in requests] == ["q"]
        entries = client.get("/api/ledger?limit=1", headers=reader).json()
        assert [(e["run_id"], e["state"]) for e in entries] == [("q", "unknown_commit")]
        assert len(client.get("/api/ledger?limit=100", headers=reader).json()) == 1
