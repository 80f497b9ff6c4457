"""Leases on service runs: a live driver, even a slow one, keeps its run; of two live servers that
race to take over a run whose driver vanished, exactly one drives it and no call is sent twice."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.service import RunnerConfig, create_app
from actionspace.service import runner as runner_module
from actionspace.service.continuation import DRIVER_KIND, SUBMITTED_KIND, lease_of, take_over
from actionspace.trace.events import TraceEvent
from tests.service.apptools import TOKENS, bearer
from tests.service.test_w27_run_continuation import ABC, Tally, _finished, _held, _node, _runtime, _sent_once

LEASE_S = 1.5


@contextmanager
def _server(store: str, rt: Runtime) -> Iterator[tuple[TestClient, FastAPI]]:
    app = create_app(rt, tokens=TOKENS, runner=RunnerConfig(approval_poll_s=0.02, driver_lease_s=LEASE_S))
    try:
        with TestClient(app) as client:
            yield client, app
    finally:
        app.state.runner.close()
        rt.close()


def _until(condition: Any, what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, what
        threading.Event().wait(0.02)


def _continued(rt: Runtime, run_id: str) -> list[dict[str, Any]]:
    events = rt.trace.events(run_id)
    return [
        dict(e.data) for e in events if e.kind == "service_run_driver" and e.data["action"] == "continued"
    ]


def test_two_live_servers_racing_for_a_vanished_drivers_run_drive_it_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, tally = f"sqlite:///{tmp_path / 'store.db'}", Tally()
    with monkeypatch.context() as patched:  # the first server vanishes: it releases nothing
        patched.setattr(runner_module, "release", lambda *args: None)
        with _server(store, _runtime(store, tally)) as (client, _app):
            client.post("/api/runs", json={"plan": ABC, "run_id": "race"}, headers=bearer("agent-token"))
            rt = _runtime(store, Tally())
            request_id = _held(rt, "race", "b")
            rt.close()
    assert tally.counts == {"a": 1}
    rt_b, rt_c = _runtime(store, tally), _runtime(store, tally)
    with _server(store, rt_b) as (_b, app_b), _server(store, rt_c) as (_c, app_c):
        rt_b.approvals.approve(request_id, by="alice")
        lease = lease_of(rt_b.trace.events("race"))
        assert lease is not None and lease.until is not None
        _until(lambda: time.time() > lease.until + 0.05, "the vanished server's lease never ended")
        request = rt_b.approvals.get(request_id)
        assert request is not None
        barrier = threading.Barrier(2)

        def resume(app: FastAPI) -> None:
            barrier.wait(timeout=10)
            assert app.state.runner.resume(request)

        threads = [threading.Thread(target=resume, args=(app,)) for app in (app_b, app_c)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        results = [app.state.runner.resumed(request_id, "race") for app in (app_b, app_c)]
        assert all(r is not None for r in results)
        assert sorted(str(r.result(timeout=30)) for r in results if r is not None)[-1] == "ok"
        _until(lambda: _finished(rt_b.trace.events("race")), "the run never finished")
        assert tally.counts == {"a": 1, "b": 1, "c": 1}
        assert _sent_once(rt_b, "race") == {"a": 1, "b": 1, "c": 1}
        assert len(_continued(rt_b, "race")) == 1
        assert [f["status"] for f in _finished(rt_b.trace.events("race"))] == ["ok"]


def test_a_slow_but_live_driver_keeps_its_run_past_its_first_lease(tmp_path: Path) -> None:
    store, tally = f"sqlite:///{tmp_path / 'store.db'}", Tally()
    started, go = threading.Event(), threading.Event()
    rt_a = _runtime(store, tally)

    def slow(step: str) -> dict[str, Any]:
        started.set()
        go.wait(30)
        return tally.ran(step)

    rt_a.tool(effect="write", writes=["box:{step}"])(slow)
    plan = {"nodes": [_node("b", "guarded"), _node("s", "slow"), _node("c", "stamp", "b")]}
    rt_b = _runtime(store, tally)
    with _server(store, rt_a) as (client_a, app_a), _server(store, rt_b) as (client_b, app_b):
        started_run = client_a.post(
            "/api/runs", json={"plan": plan, "run_id": "slow"}, headers=bearer("agent-token")
        )
        assert started_run.status_code == 202, started_run.text
        assert started.wait(30)
        _until(lambda: rt_b.approvals.list(status="pending"), "b was never held")
        (request,) = rt_b.approvals.list(status="pending")
        decided = client_b.post(f"/api/approvals/{request.id}/approve", headers=bearer("approver-token"))
        assert decided.status_code == 200, decided.text
        resumed = app_b.state.runner.resumed(request.id, "slow")
        assert resumed is not None
        # b alone, sent or refused while its driver had not yet recorded the round that held it
        assert resumed.result(timeout=30) in ("ok", "error")
        events = rt_b.trace.events("slow")
        first = next(float(e.data["until"]) for e in events if e.kind == "service_run_submitted")

        def renewed_past_first_lease() -> bool:
            lease = lease_of(rt_b.trace.events("slow"))
            return time.time() > first + LEASE_S and lease is not None and (lease.until or 0) > time.time()

        _until(renewed_past_first_lease, "the live driver never renewed its lease")
        assert take_over(rt_b, request, "another", lease_s=LEASE_S) is None
        go.set()
        assert app_a.state.runner.wait("slow", timeout=30) == "ok"
        assert tally.counts == {"b": 1, "s": 1, "c": 1}
        assert _continued(rt_b, "slow") == []
        assert [f["status"] for f in _finished(rt_b.trace.events("slow"))] == ["ok"]


_SERVERS = st.sampled_from(["s0", "s1", "s2"])
_UNTIL = st.one_of(
    st.floats(min_value=0, max_value=1000),
    st.just(float("nan")),
    st.text(max_size=3),
    st.none(),
    st.booleans(),
)
_DRIVER_EVENTS = st.lists(
    st.fixed_dictionaries(
        {
            "action": st.sampled_from(["renewed", "released", "continued", "other"]),
            "server": _SERVERS,
            "from": _SERVERS,
            "until": _UNTIL,
            "ts": st.floats(min_value=0, max_value=1000),
            "at_offset": st.sampled_from([0, 0, 0, 1, -1]),
        }
    ),
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(events=_DRIVER_EVENTS)
def test_a_driver_is_replaced_only_after_it_released_or_its_lease_ended(events: list[dict[str, Any]]) -> None:
    trace = [
        TraceEvent(run_id="p", seq=0, kind=SUBMITTED_KIND, ts=0.0, data={"server": "s0", "until": 100.0})
    ]
    for i, spec in enumerate(events, start=1):
        data = {k: spec[k] for k in ("action", "server", "from", "until")}
        data["at"] = i + spec["at_offset"]
        trace.append(TraceEvent(run_id="p", seq=i, kind=DRIVER_KIND, ts=spec["ts"], data=data))
    for i in range(1, len(trace)):
        before, after, event = lease_of(trace[:i]), lease_of(trace[: i + 1]), trace[i]
        if after is None or before == after:
            continue
        if before is None:  # no one drove it: only a claim at its own number takes it
            assert event.data["action"] == "continued" and event.data["at"] == event.seq
        elif event.data["action"] == "renewed":  # only the driver extends its own lease
            assert event.data["server"] == before.server == after.server
            assert before.until is not None and after.until is not None and after.until > before.until
        else:  # taken (by another server, or by the same one) once its lease had ended
            assert event.data["action"] == "continued" and event.data["at"] == event.seq
            assert before.until is not None and event.ts > before.until


def test_a_stalled_driver_robbed_of_its_run_sends_no_call_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The driver stops renewing (a frozen process) but its run goes on: another server takes the
    run over once the lease ended, both believe they drive it, and the ledger still sends each
    node once."""
    from actionspace.service import continuation

    monkeypatch.setattr(continuation, "renew", lambda *args: None)
    store, tally = f"sqlite:///{tmp_path / 'store.db'}", Tally()
    rt_a, rt_b = _runtime(store, tally), _runtime(store, tally)
    with _server(store, rt_a) as (client_a, app_a), _server(store, rt_b) as (client_b, app_b):
        client_a.post("/api/runs", json={"plan": ABC, "run_id": "stall"}, headers=bearer("agent-token"))
        request_id = _held(rt_b, "stall", "b")
        lease = lease_of(rt_b.trace.events("stall"))
        assert lease is not None and lease.until is not None
        _until(lambda: time.time() > lease.until + 0.05, "the stalled driver's lease never ended")
        decided = client_b.post(f"/api/approvals/{request_id}/approve", headers=bearer("approver-token"))
        assert decided.status_code == 200, decided.text
        resumed = app_b.state.runner.resumed(request_id, "stall")
        assert resumed is not None
        resumed.result(timeout=30)
        app_a.state.runner.wait("stall", timeout=30)
        assert tally.counts == {"a": 1, "b": 1, "c": 1}
        assert _sent_once(rt_b, "stall") == {"a": 1, "b": 1, "c": 1}
        assert {f["status"] for f in _finished(rt_b.trace.events("stall"))} == {"ok"}
