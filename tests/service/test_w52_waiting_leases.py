"""A run that waits for a person does not renew its lease for as long as it waits: its driver
releases it after one lease (one event, however long the wait), claims it back once the person
decided, and a server that takes the decision elsewhere takes it over at once; each call runs once."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient

from actionspace import Runtime
from actionspace.service import RunnerConfig, create_app
from tests.service.apptools import TOKENS, bearer
from tests.service.test_w27_run_continuation import ABC, Tally, _finished, _held, _runtime, _sent_once

LEASE_S = 0.3
WAITED_LEASES = 10


@contextmanager
def _server(store: str, tally: Tally) -> Iterator[tuple[TestClient, Runtime, FastAPI]]:
    rt = _runtime(store, tally)
    app = create_app(rt, tokens=TOKENS, runner=RunnerConfig(approval_poll_s=0.02, driver_lease_s=LEASE_S))
    try:
        with TestClient(app) as client:
            yield client, rt, app
    finally:
        app.state.runner.close()
        rt.close()


def _drivers(rt: Runtime, run_id: str) -> list[dict[str, Any]]:
    return [dict(e.data) for e in rt.trace.events(run_id) if e.kind == "service_run_driver"]


def _wait_long(rt: Runtime, run_id: str) -> list[dict[str, Any]]:
    """Let the run wait ``WAITED_LEASES`` leases; its driver events meanwhile."""
    before = len(_drivers(rt, run_id))
    threading.Event().wait(WAITED_LEASES * LEASE_S)
    return _drivers(rt, run_id)[before:]


def test_a_run_waiting_many_leases_for_a_person_writes_a_bounded_number_of_driver_events(
    tmp_path: Any,
) -> None:
    store, tally = f"sqlite:///{tmp_path / 'store.db'}", Tally()
    with _server(store, tally) as (client, rt, app):
        client.post("/api/runs", json={"plan": ABC, "run_id": "w1"}, headers=bearer("agent-token"))
        request_id = _held(rt, "w1", "b")
        written = _wait_long(rt, "w1")
        assert len(written) <= 6, written  # per-run renewals would write about 3 per lease: 30
        assert written[-1]["action"] == "released"
        assert _wait_long(rt, "w1") == []  # however much longer it waits
        decided = client.post(f"/api/approvals/{request_id}/approve", headers=bearer("approver-token"))
        assert decided.status_code == 200, decided.text
        assert app.state.runner.wait("w1", timeout=30) == "ok"
        assert tally.counts == {"a": 1, "b": 1, "c": 1}
        assert _sent_once(rt, "w1") == {"a": 1, "b": 1, "c": 1}
        assert [f["status"] for f in _finished(rt.trace.events("w1"))] == ["ok"]
        server = next(e.data["server"] for e in rt.trace.events("w1") if e.kind == "service_run_submitted")
        continued = [d for d in _drivers(rt, "w1") if d["action"] == "continued"]
        assert [(d["server"], d.get("from")) for d in continued] == [(server, None)]


def test_an_approval_taken_elsewhere_for_a_run_released_while_waiting_is_continued_there_once(
    tmp_path: Any,
) -> None:
    store, tally = f"sqlite:///{tmp_path / 'store.db'}", Tally()
    with ExitStack() as stack:
        client, rt, app = stack.enter_context(_server(store, tally))
        other, _rt2, other_app = stack.enter_context(_server(store, tally))
        client.post("/api/runs", json={"plan": ABC, "run_id": "w2"}, headers=bearer("agent-token"))
        request_id = _held(rt, "w2", "b")
        assert _wait_long(rt, "w2")[-1]["action"] == "released"
        assert tally.counts == {"a": 1}  # the other server left a run waiting for a person alone
        decided = other.post(f"/api/approvals/{request_id}/approve", headers=bearer("approver-token"))
        assert decided.status_code == 200, decided.text
        resumed = other_app.state.runner.resumed(request_id, "w2")
        assert resumed is not None and resumed.result(timeout=30) == "ok"
        assert app.state.runner.wait("w2", timeout=30) in ("ok", "released")
        assert tally.counts == {"a": 1, "b": 1, "c": 1}
        assert _sent_once(rt, "w2") == {"a": 1, "b": 1, "c": 1}
        assert [f["status"] for f in _finished(rt.trace.events("w2"))] == ["ok"]
        # one server drives it on: the one that took the decision, or the first, seeing it first
        assert len([d for d in _drivers(rt, "w2") if d["action"] == "continued"]) == 1
