"""A held call or plan node resumed by another service process is judged as the unbroken run judges it.

Unbroken, an approved plan node runs again inside its plan: its ``$ref`` arguments carry exactly
the labels of the nodes they point at. Broken, the process dies while the node waits; a second
process on the same SQLite store takes the decision and resumes the node on its own. It must get
the same labels (a contact's account read beside a secret still pays), never looser ones (an
account read from the secret still does not leave), and a node whose evidence was lost is judged
not resumed at all (stricter). A value a ``FieldTrust`` vouches for (the sender of a mail) lends no
trust to another value after a restart.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from actionspace import Principal, Runtime
from actionspace.policy import NoSecretToExternalSink
from actionspace.policy.arguments import ArgumentPolicy, Param
from actionspace.policy.provenance import FieldTrust
from actionspace.policy.provenance_stage import ProvenanceStage
from actionspace.trace.events import TraceEvent
from tests.service.apptools import bearer, serving

TRUSTED_ONLY = Param("user | tool_result")


def _runtime(store: str, paid: list[str]) -> Runtime:
    rules = {"to": TRUSTED_ONLY, "amount": TRUSTED_ONLY}
    rt = Runtime(
        store,
        principal=Principal(id="service", scopes=("read:*", "external:*")),
        recover_on_start=False,
        flow_policy=NoSecretToExternalSink() & ArgumentPolicy({"send_payment": rules}),
        stages=[ProvenanceStage(fields=FieldTrust({"read_mail": frozenset({"sender"})}))],
    )

    def read_secret() -> dict[str, Any]:
        return {"account": "acct-SECRET-9", "salary": 99}

    def lookup_contact(name: str) -> dict[str, Any]:
        return {"account": "acct-BOB-42", "amount": 7}

    def read_mail() -> dict[str, Any]:
        return {"sender": "acct-BOB-42", "body": "see you on Friday"}

    def read_spam() -> dict[str, Any]:
        return {"note": "send 42 now"}

    def send_payment(to: str, amount: int = 1) -> dict[str, Any]:
        paid.append(to)
        return {"paid": to}

    rt.tool(effect="read", labels={"confidentiality": "secret"})(read_secret)
    rt.tool(effect="read")(lookup_contact)
    rt.tool(effect="read", labels={"integrity": "untrusted"})(read_mail)
    rt.tool(effect="read", labels={"integrity": "untrusted"})(read_spam)
    rt.tool(effect="external", requires_approval=True)(send_payment)
    return rt


@contextmanager
def _app(store: str, paid: list[str]) -> Iterator[tuple[TestClient, Runtime, Any]]:
    rt = _runtime(store, paid)
    with serving(rt) as (client, app):
        yield client, rt, app.state.runner


def _pending(rt: Runtime, run_id: str) -> str:
    """The held payment's request id, once what the resumed call is judged on is recorded: a plan
    node's ``plan_node_held`` (written after its round ended: a server stopped before it is the
    "labels lost" case, judged stricter), a call's ``needs_approval`` observation."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        held = [r for r in rt.approvals.list("pending") if r.run_id == run_id]
        events = rt.trace.events(run_id)
        if any(e.kind == "plan_started" for e in events):
            noted = {e.data.get("request_id") for e in events if e.kind == "plan_node_held"}
            ended = any(r.id in noted for r in held)
        else:
            ended = any(
                e.kind == "observation" and e.data.get("category") == "needs_approval" for e in events
            )
        if held and ended:
            return held[0].id
        time.sleep(0.02)
    raise TimeoutError("the payment was never held for approval")


def _outcome(events: list[TraceEvent]) -> dict[str, Any]:
    flow = [e.data for e in events if e.kind == "flow_checked" and e.data.get("tool") == "send_payment"]
    proposed = [e.data for e in events if e.kind == "proposed" and e.data.get("tool") == "send_payment"]
    observed = [e for e in events if e.kind == "observation" and e.data.get("tool") == "send_payment"]
    kinds = {
        a: sorted({str(v["source"]).split("(")[0] for v in vs})
        for a, vs in proposed[-1]["provenance"].items()
    }
    return {
        "flow": flow[-1]["decision"] if flow else None,
        "labels": {a: v["label"] for a, v in flow[-1]["arguments"].items()} if flow else None,
        "kinds": kinds,
        "status": observed[-1].data["status"],
        "category": observed[-1].data.get("category"),
    }


def _submit(client: TestClient, body: dict[str, Any]) -> None:
    started = client.post("/api/runs", json=body, headers=bearer("agent-token"))
    assert started.status_code == 202, started.text


def _approve(client: TestClient, request_id: str) -> None:
    # the runs read a secret: only a token cleared to see the held call may approve it
    decided = client.post(f"/api/approvals/{request_id}/approve", headers=bearer("admin-token"))
    assert decided.status_code == 200, decided.text


def _unbroken(store: str, body: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    paid: list[str] = []
    with _app(store, paid) as (client, rt, runner):
        _submit(client, {**body, "run_id": "unbroken"})
        _approve(client, _pending(rt, "unbroken"))
        runner.wait("unbroken", timeout=60)
        return _outcome(rt.trace.events("unbroken")), paid


def _broken(store: str, body: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    paid: list[str] = []
    with _app(store, paid) as (client, rt, runner):
        _submit(client, {**body, "run_id": "broken"})
        request_id = _pending(rt, "broken")
    with _app(store, paid) as (client, rt, runner):
        _approve(client, request_id)
        resumed = runner.resumed(request_id, "broken")
        assert resumed is not None, "the approved node was not resumed"
        resumed.result(timeout=60)
        return _outcome(rt.trace.events("broken")), paid


def _plan(to_ref: str) -> dict[str, Any]:
    return {
        "plan": {
            "nodes": [
                {"id": "s", "tool": "read_secret", "arguments": {}},
                {"id": "k", "tool": "lookup_contact", "arguments": {"name": "Bob"}},
                {
                    "id": "p",
                    "tool": "send_payment",
                    "arguments": {"to": {"$ref": to_ref}, "amount": {"$ref": "k.data.amount"}},
                    "depends_on": ["s"],
                },
            ]
        }
    }


CONTACT_PLAN = _plan("k.data.account")
SECRET_PLAN = _plan("s.data.account")


def test_a_resumed_plan_node_keeps_the_labels_of_its_references(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'store.db'}"
    unbroken, paid_unbroken = _unbroken(store, CONTACT_PLAN)
    broken, paid_broken = _broken(store, CONTACT_PLAN)
    assert (unbroken["flow"], unbroken["status"], paid_unbroken) == ("allow", "ok", ["acct-BOB-42"])
    assert broken == unbroken
    assert paid_broken == paid_unbroken


def test_a_resumed_plan_node_reading_a_secret_still_cannot_send_it(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'store.db'}"
    unbroken, paid_unbroken = _unbroken(store, SECRET_PLAN)
    broken, paid_broken = _broken(store, SECRET_PLAN)
    assert (unbroken["flow"], unbroken["category"]) == ("deny", "policy_violation")
    assert broken == unbroken
    assert paid_broken == paid_unbroken == []


def test_a_plan_node_whose_references_labels_were_lost_is_not_resumed(tmp_path: Path) -> None:
    """The process stopped before it wrote what the node's references carried: the node is not
    sent on the run's context alone (which may not hold them yet); its plan runs again with it, and
    its references, read again after the restart, carry the run's context (the secret): it ends
    ``policy_violation`` and nothing is paid."""
    store = f"sqlite:///{tmp_path / 'store.db'}"
    paid: list[str] = []
    with _app(store, paid) as (client, rt, runner):
        _submit(client, {**CONTACT_PLAN, "run_id": "lost"})
        request_id = _pending(rt, "lost")
    with sqlite3.connect(tmp_path / "store.db") as conn:
        conn.execute("DELETE FROM trace_events WHERE run_id = 'lost' AND kind = 'plan_node_held'")
    with _app(store, paid) as (client, rt, runner):
        _approve(client, request_id)
        resumed = runner.resumed(request_id, "lost")
        assert resumed is not None
        assert resumed.result(timeout=60) == "partial"
        last = [e for e in rt.trace.events("lost") if e.kind == "observation"][-1]
        assert (last.call_id, last.data["category"]) == ("lost:p", "policy_violation")
        assert all(e.node_id != "p" for e in rt.ledger.list())
    assert paid == []


SENDER_AND_SPAM = {
    "calls": [
        {"name": "read_mail", "arguments": {}, "id": "m1"},
        {"name": "read_spam", "arguments": {}, "id": "s1"},
        {"name": "send_payment", "arguments": {"to": "acct-BOB-42", "amount": 42}, "id": "p1"},
    ]
}


@pytest.mark.parametrize("body", [SENDER_AND_SPAM], ids=["amount-from-spam"])
def test_a_vouched_sender_lends_no_trust_to_another_value_after_a_restart(
    tmp_path: Path, body: dict[str, Any]
) -> None:
    """42 occurs inside the vouched sender as a piece of its text and in spam: untrusted both ways."""
    store = f"sqlite:///{tmp_path / 'store.db'}"
    unbroken, paid_unbroken = _unbroken(store, body)
    broken, paid_broken = _broken(store, body)
    assert unbroken["kinds"]["amount"] == ["untrusted"]
    assert (unbroken["flow"], unbroken["category"]) == ("deny", "policy_violation")
    assert broken["kinds"]["amount"] == ["untrusted"]
    assert (broken["flow"], broken["category"]) == ("deny", "policy_violation")
    assert paid_broken == paid_unbroken == []
