"""Runs a server takes over count against their tenant's held bytes, as the runs it starts do.

A run keeps its submission in memory until it ends. Counted only when started through
``POST /api/runs``, the bound was passed by runs a server took over: those a scan found after
their server died, and those an approval brought from a server that stopped. One surviving server
then held what every dead one had held, and a tenant at its bound started more.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient

from actionspace import Runtime
from actionspace.service import RunnerConfig, create_app
from actionspace.service.continuation import DRIVER_KIND, SUBMITTED_KIND, submission_event
from actionspace.trace.events import TraceEvent
from tests.service.apptools import TOKENS, World, bearer, build_runtime

LEASE_S = 0.4
_BOUND = 100_000


def _payment(amount: int) -> dict[str, Any]:
    return {"name": "send_payment", "arguments": {"to": "acct-1", "amount": amount}}


@contextmanager
def _server(
    store: str, world: World, bound: int | None = _BOUND
) -> Iterator[tuple[TestClient, Runtime, FastAPI]]:
    rt, _signalling = build_runtime(world, store)
    config = RunnerConfig(approval_poll_s=0.02, driver_lease_s=LEASE_S)
    app = create_app(rt, tokens=TOKENS, runner=config, max_held_bytes=bound)
    try:
        with TestClient(app) as client:
            yield client, rt, app
    finally:
        app.state.runner.close()
        rt.close()


def _until(condition: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, what
        threading.Event().wait(0.02)


def _orphan(rt: Runtime, run_id: str, padding: int) -> None:
    """A run the agent started on a server that died before running anything: a payment, then an
    output of ``padding`` bytes."""
    rt.new_run(run_id, principal=TOKENS["agent-token"])
    data = submission_event("calls", [_payment(1), "x" * padding], "dead-server", time.time() - 60)
    seq = rt.trace.next_seq(run_id)
    event = TraceEvent(run_id=run_id, seq=seq, kind=SUBMITTED_KIND, ts=time.time() - 60, data=data)
    rt.trace.append_many([event])


def _continued(rt: Runtime, run_id: str) -> list[dict[str, Any]]:
    return [
        dict(e.data)
        for e in rt.trace.events(run_id)
        if e.kind == DRIVER_KIND and e.data.get("action") == "continued"
    ]


def _pending(rt: Runtime) -> list[Any]:
    return list(rt.approvals.list("pending"))


def _start(client: TestClient, run_id: str, padding: int, *first: dict[str, Any]) -> int:
    calls = [*(first or [_payment(7)]), "x" * padding]
    body = {"run_id": run_id, "calls": calls}
    return client.post("/api/runs", headers=bearer("agent-token"), json=body).status_code


def test_a_scan_adopts_only_the_runs_its_tenants_bound_has_room_for_and_the_rest_once_one_ends(
    tmp_path: Path,
) -> None:
    store, world = f"sqlite:///{tmp_path / 'store.db'}", World()
    writer, _ = build_runtime(World(), store)
    for n in range(3):  # 3 x 40 KB left by a dead server; the bound here is 100 KB
        _orphan(writer, f"dead_{n}", 40_000)
    writer.close()
    with _server(store, world) as (client, rt, app):
        _until(lambda: len(_pending(rt)) >= 2, "the dead server's runs were never adopted")
        threading.Event().wait(6 * LEASE_S)  # several scans more
        adopted = [n for n in range(3) if _continued(rt, f"dead_{n}")]
        assert len(adopted) == 2, adopted
        assert len(_pending(rt)) == 2
        # what the adopted runs hold counts for their tenant: a start needing 30 KB more is refused
        assert _start(client, "one_more", 30_000) == 429
        assert rt.trace.events("one_more") == []
        # one ends: its bytes are given back, and the third run is adopted then
        first = _pending(rt)[0]
        assert (
            client.post(f"/api/approvals/{first.id}/deny", headers=bearer("admin-token")).status_code == 200
        )
        _until(lambda: all(_continued(rt, f"dead_{n}") for n in range(3)), "the third run was never adopted")
        _until(lambda: len(_pending(rt)) == 2, "the third run's payment was never held")
        assert app.state.held_bytes.held(None) <= _BOUND
        assert world.payments == []


def test_a_run_an_approval_brings_over_counts_and_one_without_room_waits_for_a_scan(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'store.db'}"
    with _server(store, World(), None) as (client, rt, _app):  # it stops with two runs waiting
        assert _start(client, "counted", 50_000, _payment(1), _payment(2)) == 202
        assert _start(client, "no_room", 50_000, _payment(3)) == 202
        _until(lambda: len(_pending(rt)) == 2, "the runs' payments were never held")
    world = World()
    with _server(store, world) as (client, rt, app):
        asked = {r.run_id: r for r in _pending(rt)}
        approved = client.post(
            f"/api/approvals/{asked['counted'].id}/approve", headers=bearer("approver-token")
        )
        assert approved.status_code == 200
        _until(lambda: world.payments and len(_pending(rt)) == 2, "the run was not continued")
        assert len(_continued(rt, "counted")) == 1
        # the run taken over holds 50 KB here: a start of 60 KB more passes the 100 KB bound
        assert _start(client, "past_bound", 60_000) == 429
        assert rt.trace.events("past_bound") == []
        # approved now, the other run finds no room here: it is not taken over and nothing is sent
        approved = client.post(
            f"/api/approvals/{asked['no_room'].id}/approve", headers=bearer("approver-token")
        )
        assert approved.status_code == 200
        resumed = app.state.runner.resumed(asked["no_room"].id, "no_room")
        assert resumed is not None and resumed.result(timeout=30) == "deferred"
        assert _continued(rt, "no_room") == []
        assert [p["amount"] for p in world.payments] == [1]
        # the first run ends: a scan continues the other, its approved payment sent once
        held = next(r for r in _pending(rt) if r.run_id == "counted")
        assert client.post(f"/api/approvals/{held.id}/deny", headers=bearer("admin-token")).status_code == 200
        _until(lambda: len(world.payments) == 2, "the run without room was never continued")
        _until(lambda: any(e.kind == "run_finished" for e in rt.trace.events("no_room")), "it never ended")
        assert sorted(p["amount"] for p in world.payments) == [1, 3]
