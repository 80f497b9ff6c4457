"""Decisions raced on one approval, and another tenant's ids in every route that takes one.

Of decisions made at once on one request, exactly one is taken (``200``), the others answered
``409`` ``conflict``; the trace records one decision, and the call runs once or never, as the
decision taken says. A principal of another tenant naming the run, the request or the ledger entry,
spelled as it is or percent-encoded, is answered ``404`` with nothing written.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Principal, Runtime
from actionspace.service import RunnerConfig, create_app
from tests.service.apptools import TOOL_SCOPES, SignallingApprovals, World, bearer, build_runtime

_DECIDE = ("approvals:read", "approvals:decide")
_TOKENS = {
    "agent": Principal(id="agent", tenant="ta", scopes=("runs:write", "runs:read", *TOOL_SCOPES)),
    "alice": Principal(id="alice", tenant="ta", scopes=_DECIDE),
    "carol": Principal(id="carol", tenant="ta", scopes=_DECIDE),
    "dave": Principal(id="dave", tenant="ta", scopes=_DECIDE),
    "mallory": Principal(
        id="mallory",
        tenant="tb",
        scopes=("runs:read", "runs:write", *_DECIDE, "ledger:read", "ledger:resolve", "metrics:read"),
    ),
}
_PAY = {"name": "send_payment", "arguments": {"to": "acct-9", "amount": 5}}
_NOTE = {"name": "post_note", "arguments": {"text": "lost"}}


@contextmanager
def _served() -> Iterator[tuple[TestClient, FastAPI, Runtime, World, SignallingApprovals]]:
    world = World()
    rt, signalling = build_runtime(world)
    app = create_app(rt, tokens=_TOKENS, runner=RunnerConfig(approval_poll_s=0.02))
    try:
        with TestClient(app, raise_server_exceptions=False) as client:
            yield client, app, rt, world, signalling
    finally:
        app.state.runner.close()
        rt.close()


@settings(max_examples=6, deadline=None)
@given(
    deciders=st.lists(st.sampled_from(["alice", "carol", "dave"]), min_size=2, max_size=6),
    first=st.booleans(),
)
def test_decisions_raced_on_one_request_take_exactly_one_and_the_call_runs_as_it_says(
    deciders: list[str], first: bool
) -> None:
    with _served() as (client, app, rt, world, signalling):
        started = client.post("/api/runs", headers=bearer("agent"), json={"run_id": "raced", "calls": [_PAY]})
        assert started.status_code == 202, started.text
        request = signalling.wait_for_request()
        barrier = threading.Barrier(len(deciders))
        answers: list[tuple[str, Any]] = []
        lock = threading.Lock()

        def decide(n: int, who: str) -> None:
            action = "approve" if (n % 2 == 0) == first else "deny"
            barrier.wait()
            got = client.post(f"/api/approvals/{request.id}/{action}", headers=bearer(who), json={})
            with lock:
                answers.append((action, got))

        threads = [threading.Thread(target=decide, args=(n, who)) for n, who in enumerate(deciders)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        taken = [(action, got) for action, got in answers if got.status_code == 200]
        assert len(taken) == 1, [(a, g.status_code, g.text) for a, g in answers]
        refused = [got for _, got in answers if got.status_code != 200]
        assert all(got.status_code == 409 for got in refused), [g.text for g in refused]
        assert all(got.json()["error"]["category"] == "conflict" for got in refused)
        app.state.runner.wait("raced", timeout=30)
        decided = [e.data for e in rt.trace.events("raced") if e.kind == "approval_decided"]
        assert [d["status"] for d in decided if d["status"] != "consumed"] == [
            "approved" if taken[0][0] == "approve" else "denied"
        ]
        assert len(world.payments) == (1 if taken[0][0] == "approve" else 0)


def _encoded(text: str) -> str:
    return "".join(f"%{b:02X}" for b in text.encode())


def test_another_tenant_naming_a_run_its_request_or_its_ledger_entry_is_answered_404_and_writes_nothing() -> (
    None
):
    with _served() as (client, app, rt, world, signalling):
        body = {"run_id": "theirs", "calls": [_PAY, _NOTE]}
        assert client.post("/api/runs", headers=bearer("agent"), json=body).status_code == 202
        request = signalling.wait_for_request()
        before = len(rt.trace.events("theirs"))
        for spelled in ("theirs", _encoded("theirs")):
            for path in (f"/api/runs/{spelled}", f"/api/runs/{spelled}/events"):
                got = client.get(path, headers=bearer("mallory"))
                assert got.status_code == 404, (path, got.text)
                assert "acct-9" not in got.text
        for spelled in (request.id, _encoded(request.id)):
            got = client.get(f"/api/approvals/{spelled}", headers=bearer("mallory"))
            assert got.status_code == 404, got.text
            for action in ("approve", "deny"):
                got = client.post(f"/api/approvals/{spelled}/{action}", headers=bearer("mallory"), json={})
                assert got.status_code == 404, got.text
        listed = client.get("/api/approvals?status=all&run=theirs", headers=bearer("mallory"))
        assert listed.status_code == 200 and listed.json() == []
        # the request is still pending for its own tenant, nothing recorded of the refusals
        assert rt.approvals.get(request.id).status == "pending"  # type: ignore[union-attr]
        assert len(rt.trace.events("theirs")) == before
        approved = client.post(f"/api/approvals/{request.id}/approve", headers=bearer("alice"), json={})
        assert approved.status_code == 200, approved.text
        app.state.runner.wait("theirs", timeout=30)
        unknown = [e for e in rt.ledger.list(state="unknown_commit", limit=10) if e.run_id == "theirs"]
        assert unknown, "the lost note left no unknown commit"
        for entry in unknown:
            for spelled in (entry.key, _encoded(entry.key)):
                got = client.post(
                    f"/api/ledger/{spelled}/resolve", headers=bearer("mallory"), json={"outcome": "committed"}
                )
                assert got.status_code == 404, got.text
            assert rt.ledger.get(entry.key).state == "unknown_commit"  # type: ignore[union-attr]
        assert len(world.payments) == 1
