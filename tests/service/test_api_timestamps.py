"""Every time in the API is an ISO-8601 UTC string (a deliberate change from Unix seconds)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from tests.service.apptools import bearer, served

ADMIN = bearer("admin-token")
APPROVER = bearer("approver-token")


def _iso(value: Any) -> datetime:
    assert isinstance(value, str), value
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    assert parsed.tzinfo is not None and parsed.utcoffset() == UTC.utcoffset(None)
    return parsed


def test_runs_and_events_carry_iso_times() -> None:
    with served() as (client, rt, *_):
        rt.call({"name": "lookup", "arguments": {"city": "Oslo"}}, run_id="r1")
        rt.finish("r1", status="ok")
        [row] = client.get("/api/runs", headers=ADMIN).json()
        assert _iso(row["started_at"]) <= _iso(row["finished_at"]) <= _iso(row["last_at"])
        events = client.get("/api/runs/r1/events", headers=ADMIN).json()
        assert all(_iso(e["at"]) for e in events)


def test_the_runs_list_pages_with_an_iso_before() -> None:
    with served() as (client, rt, *_):
        for n in range(3):
            rt.new_run(f"r{n}")
        first = client.get("/api/runs", params={"limit": 2}, headers=ADMIN).json()
        rest = client.get("/api/runs", params={"limit": 2, "before": first[-1]["last_at"]}, headers=ADMIN)
        assert [r["run_id"] for r in rest.json()] == ["r0"]


def test_approvals_and_ledger_entries_carry_iso_times() -> None:
    with served() as (client, rt, *_):
        rt.call(
            {"name": "send_payment", "arguments": {"to": "acct-9", "amount": 5}}, run_id="r1", node_id="n1"
        )
        [request] = client.get("/api/approvals", headers=APPROVER).json()
        _iso(request["created_at"])
        assert request["decided_at"] is None
        decided = client.post(f"/api/approvals/{request['id']}/approve", json={}, headers=APPROVER).json()
        assert _iso(decided["decided_at"]) >= _iso(decided["created_at"])
        _iso(decided["expires_at"])
        rt.call({"name": "post_note", "arguments": {"text": "hi"}}, run_id="r2", node_id="n1")
        [entry] = client.get(
            "/api/ledger", params={"state": "unknown_commit"}, headers=bearer("operator-token")
        ).json()
        assert _iso(entry["created_at"]) <= _iso(entry["updated_at"])
