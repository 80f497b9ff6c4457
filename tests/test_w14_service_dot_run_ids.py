"""A run id that is a dot segment (``.`` or ``..``) names a run no URL can reach: clients (browsers,
httpx, curl) remove such a segment before sending, so ``/api/runs/..`` is asked as ``/api`` and the
console's link to the run opens another page. ``POST /api/runs`` refuses such an id with a typed
422, as it does every id outside its pattern; longer runs of dots are ordinary ids."""

from __future__ import annotations

import pytest

from tests.service.apptools import bearer, served

AGENT = bearer("agent-token")
ADMIN = bearer("admin-token")
CALL = {"name": "lookup", "arguments": {"city": "Oslo"}}


@pytest.mark.parametrize("run_id", [".", ".."])
@pytest.mark.parametrize("kind", ["calls", "plan"])
def test_a_dot_segment_run_id_is_refused_before_anything_runs(run_id: str, kind: str) -> None:
    body = (
        {"calls": [CALL], "run_id": run_id}
        if kind == "calls"
        else {
            "plan": {"nodes": [{"id": "n1", "tool": "lookup", "arguments": {"city": "Oslo"}}]},
            "run_id": run_id,
        }
    )
    with served() as (client, rt, *_):
        answer = client.post("/api/runs", json=body, headers=AGENT)
        assert answer.status_code == 422, answer.text
        error = answer.json()["error"]
        assert error["category"] == "invalid_arguments" and "dot" in error["message"]
        assert rt.trace.events(run_id) == []
        assert client.get("/api/runs", headers=ADMIN).json() == []


@pytest.mark.parametrize("run_id", ["...", ".a", "a..b", "run.1"])
def test_ids_with_dots_that_are_no_dot_segment_start_runs_that_can_be_read_back(run_id: str) -> None:
    with served() as (client, _rt, _world, _signalling, app):
        answer = client.post("/api/runs", json={"calls": [CALL], "run_id": run_id}, headers=AGENT)
        assert answer.status_code == 202, answer.text
        assert app.state.runner.wait(run_id, timeout=30) == "ok"
        detail = client.get(f"/api/runs/{run_id}", headers=ADMIN)
        assert detail.status_code == 200 and detail.json()["run_id"] == run_id
