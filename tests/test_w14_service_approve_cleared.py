"""Only a principal that may see a request's values may approve it: a token for which the API
redacts the request (its own label, or a label its run's trace carries, is one the token may not
read) is refused with 403 ``permission_denied`` naming the clearance it lacks, the request left
pending and nothing decided; it may still deny it. On every store (the label is kept in the
request's details, written as JSON by SQLite and as jsonb by PostgreSQL)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actionspace import Labels, Plan, Principal, Runtime
from actionspace.approval.requests import LABEL, ApprovalRequest
from actionspace.trace.events import TraceEvent
from tests.pg import STORES, store_url
from tests.service.apptools import bearer, served, serving

DECIDE = ("approvals:read", "approvals:decide")
TOKENS = {
    "bob": Principal(id="bob", scopes=DECIDE),
    "carol": Principal(id="carol", scopes=DECIDE),
    "ops": Principal(id="ops", scopes=(*DECIDE, "labels:secret")),
    "admin": Principal(id="admin", scopes=("*",)),
}
SECRET = {"confidentiality": "secret", "integrity": "trusted", "readers": None}
CAROLS = {"confidentiality": "internal", "integrity": "trusted", "readers": ["carol"]}


@pytest.fixture(params=STORES)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from store_url(request, tmp_path)


def _filed(store: Any, run_id: str, label: dict[str, Any] | None) -> str:
    """A pending request of ``run_id`` (of a tool no catalog here holds, so approving it sends
    nothing), recording ``label`` as the label of the call it holds."""
    request = ApprovalRequest(
        id=f"apr_{run_id}",
        run_id=run_id,
        node_id="n1",
        tool="wire_funds@1",
        args_digest=f"d-{run_id}",
        arguments={"account": "hunter2-acct", "amount": 900},
        provenance={"account": "tool_result:x", "amount": "user"},
        details={} if label is None else {LABEL: label},
        created_at=time.time() - 10,
    )
    store.create(request)
    return request.id


def _decide(client: Any, token: str, request_id: str, verb: str = "approve") -> Any:
    return client.post(f"/api/approvals/{request_id}/{verb}", headers=bearer(token), json={})


def test_a_token_not_cleared_for_a_secret_request_may_not_approve_it(url: str) -> None:
    with served(url, TOKENS) as (client, rt, *_):
        request_id = _filed(rt.approvals.store, "r-secret", SECRET)
        shown = client.get(f"/api/approvals/{request_id}", headers=bearer("bob")).json()
        assert shown["preview"]["redacted"] is True  # bob is never shown the values
        refused = _decide(client, "bob", request_id)
        assert refused.status_code == 403, refused.text
        error = refused.json()["error"]
        assert error["category"] == "permission_denied"
        assert "labels:secret" in error["message"] and "'bob'" in error["message"]
        assert "hunter2" not in refused.text
        stored = rt.approvals.get(request_id)
        assert stored is not None and stored.status == "pending" and stored.decided_by is None
        assert not [e for e in rt.trace.events("r-secret") if e.kind == "approval_decided"]
        cleared = _decide(client, "ops", request_id)
        assert cleared.status_code == 200, cleared.text
        assert cleared.json()["status"] == "approved" and cleared.json()["decided_by"] == "ops"


def test_a_token_outside_the_reader_set_may_not_approve_but_a_reader_may(url: str) -> None:
    with served(url, TOKENS) as (client, rt, *_):
        request_id = _filed(rt.approvals.store, "r-carol", CAROLS)
        for token in ("bob", "ops"):  # labels:secret is not labels:internal, nor a reader
            refused = _decide(client, token, request_id)
            assert refused.status_code == 403, (token, refused.text)
            message = refused.json()["error"]["message"]
            assert "labels:internal" in message and "'carol'" in message
        assert _decide(client, "carol", request_id).status_code == 200


def test_a_label_of_the_run_withholds_the_approval_too(url: str) -> None:
    with served(url, TOKENS) as (client, rt, *_):
        mark = {"label": SECRET, "value": "hunter2"}
        rt.trace.append_many(
            [TraceEvent(run_id="r-run", seq=0, kind="observation", ts=time.time(), data=mark)]
        )
        request_id = _filed(rt.approvals.store, "r-run", None)  # filed before requests recorded labels
        refused = _decide(client, "bob", request_id)
        assert refused.status_code == 403 and "labels:secret" in refused.json()["error"]["message"]
        assert _decide(client, "admin", request_id).status_code == 200  # "*" holds labels:secret


def test_a_token_not_cleared_may_still_deny(url: str) -> None:
    with served(url, TOKENS) as (client, rt, *_):
        request_id = _filed(rt.approvals.store, "r-deny", SECRET)
        denied = _decide(client, "bob", request_id, "deny")
        assert denied.status_code == 200, denied.text
        assert denied.json()["status"] == "denied" and "hunter2" not in denied.text


def test_a_public_request_is_approved_by_any_decider(url: str) -> None:
    with served(url, TOKENS) as (client, rt, *_):
        public = {"confidentiality": "public", "integrity": "untrusted", "readers": None}
        request_id = _filed(rt.approvals.store, "r-public", public)
        assert _decide(client, "bob", request_id).status_code == 200


def test_a_held_plan_node_fed_a_secret_is_approved_only_by_a_cleared_token() -> None:
    """End to end: the runtime records the label of a node fed a secret tool's output."""
    rt = Runtime("memory://", recover_on_start=False)
    sent: list[str] = []

    @rt.tool(effect="read", labels=Labels(confidentiality="secret"))
    def vault(name: str) -> str:
        """Read a stored secret."""
        return "hunter2"

    @rt.tool(effect="write", requires_approval=True, writes=("note:{text}",))
    def store_note(text: str) -> str:
        """Write a note a person approves first."""
        sent.append(text)
        return "stored"

    plan = {
        "nodes": [
            {"id": "a", "tool": "vault", "arguments": {"name": "db"}},
            {"id": "b", "tool": "store_note", "arguments": {"text": {"$ref": "a.data"}}},
        ]
    }
    with serving(rt, TOKENS) as (client, _app):
        result = rt.run_plan(Plan.from_dict(plan), run_id=rt.new_run())
        held = result.nodes["b"].error
        assert held is not None and held.category == "needs_approval"
        request_id = held.details["request_id"]
        refused = _decide(client, "bob", request_id)
        assert refused.status_code == 403 and "labels:secret" in refused.json()["error"]["message"]
        stored = rt.approvals.get(request_id)
        assert stored is not None and stored.status == "pending" and sent == []
        assert _decide(client, "ops", request_id).status_code == 200
