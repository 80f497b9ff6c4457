"""Approvals and the ledger through the API: decisions bound to the argument digest, runs that wait."""

from __future__ import annotations

import time
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.service.apptools import bearer, served

ADMIN = bearer("admin-token")
APPROVER = bearer("approver-token")
AGENT = bearer("agent-token")


def _pay(to: str = "acct-9", amount: int = 500) -> dict[str, Any]:
    return {"name": "send_payment", "arguments": {"to": to, "amount": amount}}


def test_a_pending_request_is_listed_with_its_preview() -> None:
    with served() as (client, rt, world, *_):
        held = rt.call(_pay(), run_id="r1", node_id="n1")
        assert held.error is not None and held.error.category == "needs_approval"
        listed = client.get("/api/approvals", headers=APPROVER).json()
        assert len(listed) == 1
        request = listed[0]
        assert request["request_id"] == request["id"] == held.error.details["request_id"]
        assert (request["run_id"], request["node_id"], request["tool"]) == ("r1", "n1", "send_payment@1")
        assert request["arguments"] == {"to": "acct-9", "amount": 500}
        assert request["preview"]["arguments"] == {"to": "acct-9", "amount": 500}
        assert request["preview"]["provenance"] == {"to": "model_inferred", "amount": "model_inferred"}
        assert request["preview"]["effects"] == ["account:acct-9"]
        assert world.payments == []
        one = client.get(f"/api/approvals/{request['id']}", headers=APPROVER).json()
        assert one["status"] == "pending"


def test_an_approval_covers_only_the_exact_arguments_it_was_given_for() -> None:
    with served() as (client, rt, world, _sig, app):
        held = rt.call(_pay(amount=500), run_id="r1", node_id="n1")
        assert held.error is not None
        request_id = held.error.details["request_id"]
        decided = client.post(f"/api/approvals/{request_id}/approve", json={"reason": "ok"}, headers=APPROVER)
        assert decided.status_code == 200
        body = decided.json()
        assert (body["status"], body["decided_by"], body["decision_reason"]) == ("approved", "alice", "ok")
        resumed = app.state.runner.resumed(request_id, "r1")  # no run here waited: the service sends it
        assert resumed is not None and resumed.result(timeout=10) == "ok"
        changed = rt.call(_pay(amount=50_000), run_id="r1", node_id="n2")
        assert changed.error is not None and changed.error.category == "needs_approval"
        assert changed.error.details["request_id"] != request_id
        assert world.payments == [{"id": "p1", "to": "acct-9", "amount": 500}]  # not the changed amount
        repeat = rt.call(_pay(amount=500), run_id="r1", node_id="n1")
        assert repeat.ok and len(world.payments) == 1  # the same node replays; nothing is sent again
        consumed = client.get(f"/api/approvals/{request_id}", headers=APPROVER).json()
        assert consumed["status"] == "consumed"


def test_a_denied_request_ends_the_call_permission_denied_and_cannot_be_decided_again() -> None:
    with served() as (client, rt, world, *_):
        held = rt.call(_pay(), run_id="r1", node_id="n1")
        assert held.error is not None
        request_id = held.error.details["request_id"]
        denied = client.post(
            f"/api/approvals/{request_id}/deny", json={"reason": "unknown payee"}, headers=APPROVER
        )
        assert denied.status_code == 200 and denied.json()["status"] == "denied"
        again = client.post(f"/api/approvals/{request_id}/approve", headers=APPROVER)
        assert again.status_code == 409 and again.json()["error"]["category"] == "conflict"
        after = rt.call(_pay(), run_id="r1", node_id="n1")
        assert after.error is not None and after.error.category == "permission_denied"
        assert world.payments == []
        assert client.post("/api/approvals/apr_missing/approve", headers=APPROVER).status_code == 404
        listed = client.get("/api/approvals", params={"status": "denied"}, headers=APPROVER).json()
        assert [r["id"] for r in listed] == [request_id]


def test_a_background_run_waits_for_approval_and_completes_after_it_with_one_payment() -> None:
    with served() as (client, _rt, world, signalling, app):
        started = client.post("/api/runs", json={"calls": [_pay()], "run_id": "wait1"}, headers=AGENT)
        assert started.status_code == 202
        request = signalling.wait_for_request()
        assert request.run_id == "wait1"
        row = client.get("/api/runs/wait1", headers=ADMIN).json()
        assert row["status"] == "waiting_approval" and world.payments == []
        client.post(f"/api/approvals/{request.id}/approve", headers=APPROVER)
        assert app.state.runner.wait("wait1", timeout=10) == "ok"
        assert world.payments == [{"id": "p1", "to": "acct-9", "amount": 500}]
        detail = client.get("/api/runs/wait1", headers=ADMIN).json()
        assert detail["status"] == "ok" and detail["errors"] == 1  # the held attempt, then the payment
        kinds = [e["kind"] for e in client.get("/api/runs/wait1/events", headers=ADMIN).json()]
        assert kinds.count("approval_requested") == 1 and kinds[-1] == "run_finished"


def test_a_background_plan_node_waits_and_its_successor_runs_after_approval() -> None:
    plan = {
        "nodes": [
            {"id": "look", "tool": "lookup", "arguments": {"city": "Oslo"}},
            {"id": "pay", "tool": "send_payment", "arguments": {"to": "acct-9", "amount": 500}},
            {"id": "after", "tool": "lookup", "arguments": {"city": "Rome"}, "depends_on": ["pay"]},
        ]
    }
    with served() as (client, _rt, world, signalling, app):
        client.post("/api/runs", json={"plan": plan, "run_id": "plan1"}, headers=AGENT)
        request = signalling.wait_for_request()
        # the request is filed while the node's call runs; its observation reaches the trace
        # when the plan flushes its records, a moment later
        deadline = time.monotonic() + 10
        while True:
            waiting = client.get("/api/runs/plan1", headers=ADMIN).json()
            statuses = {n["id"]: n["status"] for n in waiting["plan"]["nodes"]}
            if statuses["pay"] != "pending" or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        assert statuses["pay"] == "waiting_approval" and statuses["look"] == "ok"
        client.post(f"/api/approvals/{request.id}/approve", headers=APPROVER)
        assert app.state.runner.wait("plan1", timeout=10) == "ok"
        assert len(world.payments) == 1
        done = client.get("/api/runs/plan1", headers=ADMIN).json()
        assert {n["id"]: n["status"] for n in done["plan"]["nodes"]} == {
            "look": "ok",
            "pay": "ok",
            "after": "ok",
        }


def test_a_denied_background_node_ends_denied_and_the_run_finishes() -> None:
    with served() as (client, _rt, world, signalling, app):
        client.post("/api/runs", json={"calls": [_pay()], "run_id": "deny1"}, headers=AGENT)
        request = signalling.wait_for_request()
        client.post(f"/api/approvals/{request.id}/deny", headers=APPROVER)
        assert app.state.runner.wait("deny1", timeout=10) == "error"
        assert world.payments == []
        events = client.get("/api/runs/deny1/events", headers=ADMIN).json()
        last_obs = [e for e in events if e["kind"] == "observation"][-1]
        assert last_obs["data"]["category"] == "permission_denied"


def test_approving_a_call_no_run_here_waits_on_resumes_it_once() -> None:
    with served() as (client, rt, world, _sig, app):
        held = rt.call(_pay(), run_id="elsewhere", node_id="n7")  # left pending by another process
        assert held.error is not None
        request_id = held.error.details["request_id"]
        client.post(f"/api/approvals/{request_id}/approve", headers=APPROVER)
        future = app.state.runner.resumed(request_id, "elsewhere")
        assert future is not None and future.result(timeout=10) == "ok"
        assert world.payments == [{"id": "p1", "to": "acct-9", "amount": 500}]
        entry = rt.ledger.get_node("elsewhere", "n7")
        assert entry is not None and entry.state == "committed"


def test_the_ledger_lists_an_unknown_commit_and_a_person_resolves_it() -> None:
    with served() as (client, rt, world, *_):
        obs = rt.call({"name": "post_note", "arguments": {"text": "hi"}}, run_id="r1", node_id="n1")
        assert obs.error is not None and obs.error.category == "unknown_commit"
        assert world.notes == ["hi"]  # it took effect; the runtime honestly does not know
        operator = bearer("operator-token")
        entries = client.get("/api/ledger", params={"state": "unknown_commit"}, headers=operator).json()
        assert [(e["run_id"], e["node_id"], e["state"]) for e in entries] == [("r1", "n1", "unknown_commit")]
        key = entries[0]["key"]
        resolved = client.post(
            f"/api/ledger/{key}/resolve",
            json={"outcome": "committed", "note": "seen on the board"},
            headers=operator,
        )
        assert resolved.status_code == 200
        body = resolved.json()
        assert body["state"] == "committed"
        assert body["resolution"]["by"] == "olga" and body["resolution"]["reason"] == "seen on the board"
        twice = client.post(f"/api/ledger/{key}/resolve", json={"outcome": "not_committed"}, headers=operator)
        assert twice.status_code == 409
        assert (
            client.post(
                "/api/ledger/as1_x/resolve", json={"outcome": "committed"}, headers=operator
            ).status_code
            == 404
        )
        again = rt.call({"name": "post_note", "arguments": {"text": "hi"}}, run_id="r1", node_id="n1")
        assert again.ok and world.notes == ["hi"]  # the reconciled outcome is replayed, never re-sent


def test_resolving_as_not_committed_marks_the_entry_failed() -> None:
    with served() as (client, rt, *_):
        rt.call({"name": "post_note", "arguments": {"text": "x"}}, run_id="r1", node_id="n1")
        key = rt.ledger.list(state="unknown_commit")[0].key
        body = client.post(
            f"/api/ledger/{key}/resolve", json={"outcome": "not_committed"}, headers=bearer("operator-token")
        ).json()
        assert body["state"] == "failed" and body["resolution"]["outcome"] == "failed"
        bad = client.post(f"/api/ledger/{key}/resolve", json={"outcome": "maybe"}, headers=ADMIN)
        assert bad.status_code == 422


@pytest.mark.parametrize("driver", ["sqlite", "postgres"])
def test_a_decision_the_store_cannot_record_is_503_transient_and_can_be_made_again(driver: str) -> None:
    """An operator approving while the store does not answer (SQLite locked past its busy timeout,
    PostgreSQL's connection lost) is told to try again, not that the service failed; nothing was
    decided, and the same decision made again goes through."""
    import sqlite3

    import psycopg

    failure: Exception = (
        sqlite3.OperationalError("database is locked")
        if driver == "sqlite"
        else psycopg.OperationalError("server closed the connection unexpectedly")
    )
    with served() as (_, rt, world, _signalling, app):
        client = TestClient(app, raise_server_exceptions=False)  # answered as a server answers it
        held = rt.call(_pay(), run_id="r1", node_id="n1")
        assert held.error is not None
        request_id = held.error.details["request_id"]
        real = rt.approvals.store.update

        def down(*args: Any, **kwargs: Any) -> Any:
            raise failure

        rt.approvals.store.update = down  # type: ignore[method-assign]
        refused = client.post(f"/api/approvals/{request_id}/approve", headers=APPROVER)
        rt.approvals.store.update = real  # type: ignore[method-assign]
        assert refused.status_code == 503, refused.text
        assert refused.headers["Retry-After"] == "1"
        error = refused.json()["error"]
        assert error["category"] == "transient" and "did not answer" in error["message"]
        assert client.get(f"/api/approvals/{request_id}", headers=APPROVER).json()["status"] == "pending"
        again = client.post(f"/api/approvals/{request_id}/approve", headers=APPROVER)
        assert again.status_code == 200 and again.json()["status"] == "approved"
        resumed = app.state.runner.resumed(request_id, "r1")  # no run here waited: the service sends it
        assert resumed is not None and resumed.result(timeout=10) == "ok"
        assert world.payments == [{"id": "p1", "to": "acct-9", "amount": 500}]  # once


def test_a_failure_of_the_service_itself_is_still_500_internal() -> None:
    with served() as (_, rt, _world, _signalling, app):
        client = TestClient(app, raise_server_exceptions=False)
        held = rt.call(_pay(), run_id="r1", node_id="n1")
        assert held.error is not None

        def broken(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("a bug")

        rt.approvals.store.update = broken  # type: ignore[method-assign]
        answer = client.post(f"/api/approvals/{held.error.details['request_id']}/approve", headers=APPROVER)
        assert answer.status_code == 500 and answer.json()["error"]["category"] == "internal"


def test_two_approved_calls_of_one_orphaned_run_are_both_resumed_once() -> None:
    with served() as (client, rt, world, _sig, app):
        first = rt.call(_pay("acct-1", 100), run_id="elsewhere", node_id="n1")  # left by another process
        second = rt.call(_pay("acct-2", 200), run_id="elsewhere", node_id="n2")
        assert first.error is not None and second.error is not None
        ids = [first.error.details["request_id"], second.error.details["request_id"]]
        with world.lock:  # the first resumed payment is still being sent when the second is approved
            for request_id in ids:
                answer = client.post(f"/api/approvals/{request_id}/approve", headers=APPROVER)
                assert answer.status_code == 200, answer.text
        futures = [app.state.runner.resumed(request_id, "elsewhere") for request_id in ids]
        assert all(f is not None for f in futures)
        assert [f.result(timeout=10) for f in futures if f is not None] == ["ok", "ok"]
        assert sorted(p["to"] for p in world.payments) == ["acct-1", "acct-2"]
        decided = [rt.approvals.get(request_id) for request_id in ids]
        assert [r.status if r is not None else None for r in decided] == ["consumed", "consumed"]
