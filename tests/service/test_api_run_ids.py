"""A run id names one run: ``POST /api/runs`` accepts an id once, however the requests interleave."""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from fastapi.testclient import TestClient

from tests.service.apptools import bearer, served

AGENT = bearer("agent-token")


def test_two_starts_racing_for_one_run_id_accept_one_and_answer_the_other_409() -> None:
    with served() as (_client, rt, _world, _approvals, app):
        client = TestClient(app, raise_server_exceptions=False)
        both_checked = threading.Barrier(2, timeout=2.0)
        original = rt.trace.next_seq

        def next_seq(run_id: str) -> int:
            seq = original(run_id)
            if run_id == "shared" and seq == 0:
                # hold each request after it found the id free, until the other did too
                with contextlib.suppress(threading.BrokenBarrierError):
                    both_checked.wait()
            return seq

        rt.trace.next_seq = next_seq  # type: ignore[method-assign]
        statuses: list[int] = []
        body = {"calls": [{"name": "lookup", "arguments": {"city": "Oslo"}}], "run_id": "shared"}

        def start() -> None:
            statuses.append(client.post("/api/runs", json=body, headers=AGENT).status_code)

        threads = [threading.Thread(target=start) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=20)
        assert app.state.runner.wait("shared", timeout=10) == "ok"
        kinds = [e.kind for e in rt.trace.events("shared")]
    assert sorted(statuses) == [202, 409]
    assert kinds.count("run_started") == 1 and kinds.count("run_finished") == 1
    assert kinds.count("observation") == 1


def test_a_run_id_is_taken_while_its_run_is_live_and_after_it_finished() -> None:
    with served() as (client, _rt, _world, approvals, app):
        pay: dict[str, Any] = {"name": "send_payment", "arguments": {"to": "acct-1", "amount": 5}}
        first = client.post("/api/runs", json={"calls": [pay], "run_id": "held"}, headers=AGENT)
        assert first.status_code == 202
        request = approvals.wait_for_request()
        again = client.post("/api/runs", json={"calls": [], "run_id": "held"}, headers=AGENT)
        assert again.status_code == 409 and again.json()["error"]["category"] == "conflict"
        decided = client.post(f"/api/approvals/{request.id}/deny", headers=bearer("approver-token"))
        assert decided.status_code == 200
        assert app.state.runner.wait("held", timeout=10) == "error"
        after = client.post("/api/runs", json={"calls": [], "run_id": "held"}, headers=AGENT)
        assert after.status_code == 409
