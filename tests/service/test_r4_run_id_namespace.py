"""Run ids are one namespace shared by every tenant: a taken id answers 409 whoever took it, and
the id the service makes up when none is given is a whole random uuid4, so no one guesses it."""

from __future__ import annotations

import re
import uuid
from typing import Any

from actionspace import Principal
from tests.service.apptools import TOOL_SCOPES, bearer, served

TOKENS = {
    "t1-agent": Principal(id="a1", scopes=("runs:write", "runs:read", *TOOL_SCOPES), tenant="t1"),
    "t2-agent": Principal(id="a2", scopes=("runs:write", "runs:read", *TOOL_SCOPES), tenant="t2"),
}
LOOKUP: dict[str, Any] = {"name": "lookup", "arguments": {"city": "Oslo"}}


def test_a_generated_run_id_is_a_whole_random_uuid4() -> None:
    with served(tokens=TOKENS) as (client, _rt, _world, _approvals, app):
        ids = []
        for _ in range(3):
            answer = client.post("/api/runs", json={"calls": [LOOKUP]}, headers=bearer("t1-agent"))
            assert answer.status_code == 202
            ids.append(answer.json()["run_id"])
        for run_id in ids:
            assert app.state.runner.wait(run_id, timeout=10) == "ok"
    assert len(set(ids)) == len(ids)
    for run_id in ids:
        found = re.fullmatch(r"run_([0-9a-f]{32})", run_id)
        assert found is not None, run_id
        assert uuid.UUID(hex=found.group(1)).version == 4  # 122 random bits, not a prefix of them


def test_another_tenants_taken_run_id_answers_exactly_like_ones_own_and_stays_unreadable() -> None:
    with served(tokens=TOKENS) as (client, _rt, _world, _approvals, app):
        body = {"calls": [LOOKUP], "run_id": "shared-id"}
        assert client.post("/api/runs", json=body, headers=bearer("t1-agent")).status_code == 202
        assert app.state.runner.wait("shared-id", timeout=10) == "ok"
        own = client.post("/api/runs", json=body, headers=bearer("t1-agent"))
        other = client.post("/api/runs", json=body, headers=bearer("t2-agent"))
        assert own.status_code == other.status_code == 409
        assert own.json() == other.json()  # nothing tells whose the run is
        assert client.get("/api/runs/shared-id", headers=bearer("t2-agent")).status_code == 404
        assert client.get("/api/runs/shared-id/events", headers=bearer("t2-agent")).status_code == 404
        listed = client.get("/api/runs", headers=bearer("t2-agent")).json()
        assert "shared-id" not in [row["run_id"] for row in listed]
