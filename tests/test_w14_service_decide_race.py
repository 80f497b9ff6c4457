"""Two servers sharing one SQLite file or PostgreSQL database, asked at once to approve and to deny
(or both to approve) one request: exactly one decision wins (200), the other is 409 ``conflict``,
the store keeps the winner's decision and the trace records one ``approval_decided``. A decided
request asked again (replayed) is 409 and changes nothing."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from actionspace.approval.requests import ApprovalRequest, ApprovalStore
from tests.pg import store_url
from tests.service.apptools import World, bearer, build_runtime, serving

APPROVER = bearer("approver-token")
ADMIN = bearer("admin-token")
ROUNDS = 6


@pytest.fixture(params=["sqlite", "postgres"])
def shared(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from store_url(request, tmp_path)


def _file(store: ApprovalStore, run_id: str) -> str:
    request = ApprovalRequest(
        id=f"apr_{run_id}",
        run_id=run_id,
        node_id="n1",
        tool="wire_funds@1",  # no catalog here holds it: an approval resumes nothing
        args_digest=f"d-{run_id}",
        arguments={"amount": 1},
        provenance={"amount": "user"},
        created_at=time.time(),
    )
    return store.create(request).id


def _at_once(calls: list[tuple[TestClient, str]]) -> list[tuple[str, int, Any]]:
    """Make every ``(client, path)`` POST at once (threads past one barrier); their answers."""
    gate = threading.Barrier(len(calls))
    answers: list[tuple[str, int, Any]] = []
    lock = threading.Lock()

    def post(client: TestClient, path: str) -> None:
        gate.wait(30)
        answer = client.post(path, headers=APPROVER, json={})
        with lock:
            answers.append((path, answer.status_code, answer.json()))

    threads = [threading.Thread(target=post, args=call) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(t.is_alive() for t in threads)
    return answers


def test_two_servers_deciding_one_request_at_once_agree_on_one_decision(shared: str) -> None:
    with ExitStack() as stack:
        clients = []
        for _ in range(2):
            rt, _signalling = build_runtime(World(), shared)
            client, _app = stack.enter_context(serving(rt))
            clients.append((client, rt))
        (a, rt_a), (b, _rt_b) = clients
        for i in range(ROUNDS):
            run_id = f"race-{i}"
            request_id = _file(rt_a.approvals.store, run_id)
            verbs = ("approve", "deny") if i % 2 else ("approve", "approve")
            answers = _at_once(
                [
                    (a, f"/api/approvals/{request_id}/{verbs[0]}"),
                    (b, f"/api/approvals/{request_id}/{verbs[1]}"),
                ]
            )
            assert sorted(code for _, code, _ in answers) == [200, 409], answers
            won = next(body for _, code, body in answers if code == 200)
            lost = next(body for _, code, body in answers if code == 409)
            assert lost["error"]["category"] == "conflict"
            stored = rt_a.approvals.get(request_id)
            assert stored is not None and stored.status == won["status"]
            decided = [e for e in rt_a.trace.events(run_id) if e.kind == "approval_decided"]
            assert len(decided) == 1 and decided[0].data["status"] == won["status"]
            for client in (a, b):  # a replay of either decision changes nothing
                for verb in ("approve", "deny"):
                    again = client.post(f"/api/approvals/{request_id}/{verb}", headers=APPROVER, json={})
                    assert again.status_code == 409, again.text
            assert rt_a.approvals.get(request_id) == stored
            assert len([e for e in rt_a.trace.events(run_id) if e.kind == "approval_decided"]) == 1
