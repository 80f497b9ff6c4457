"""Runs a server takes over count against their principal's live runs, as the runs it starts do.

``max_live_runs`` was counted only for starts through ``POST /api/runs``: a server that took over
the runs of one that stopped or died (a scan, or an approval bringing a run over) drove them on
beyond the bound, and one surviving server then held every run its dead peers had held.
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


def _payment(amount: int) -> dict[str, Any]:
    return {"name": "send_payment", "arguments": {"to": "acct-1", "amount": amount}}


@contextmanager
def _server(
    store: str, world: World, max_live_runs: int | None
) -> Iterator[tuple[TestClient, Runtime, FastAPI]]:
    rt, _signalling = build_runtime(world, store)
    config = RunnerConfig(approval_poll_s=0.02, driver_lease_s=LEASE_S)
    app = create_app(rt, tokens=TOKENS, runner=config, max_live_runs=max_live_runs)
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


def _orphan(rt: Runtime, run_id: str, amount: int) -> None:
    """A run the agent started on a server that died before running anything: one payment."""
    rt.new_run(run_id, principal=TOKENS["agent-token"])
    data = submission_event("calls", [_payment(amount)], "dead-server", time.time() - 60)
    seq = rt.trace.next_seq(run_id)
    event = TraceEvent(run_id=run_id, seq=seq, kind=SUBMITTED_KIND, ts=time.time() - 60, data=data)
    rt.trace.append_many([event])


def _continued(rt: Runtime, run_id: str) -> bool:
    return any(e.kind == DRIVER_KIND and e.data.get("action") == "continued" for e in rt.trace.events(run_id))


def _pending(rt: Runtime) -> list[Any]:
    return list(rt.approvals.list("pending"))


def _start(client: TestClient, run_id: str, amount: int) -> int:
    body = {"run_id": run_id, "calls": [_payment(amount)]}
    return client.post("/api/runs", headers=bearer("agent-token"), json=body).status_code


def _deny(client: TestClient, request_id: str) -> None:
    answer = client.post(f"/api/approvals/{request_id}/deny", headers=bearer("admin-token"))
    assert answer.status_code == 200, answer.text


def test_a_scan_adopts_only_as_many_runs_as_the_principals_live_run_bound_leaves_room_for(
    tmp_path: Path,
) -> None:
    store = f"sqlite:///{tmp_path / 'store.db'}"
    writer, _ = build_runtime(World(), store)
    for n in range(3):  # three runs of the agent left by a server that died; two may be live here
        _orphan(writer, f"dead_{n}", n + 1)
    writer.close()
    with _server(store, World(), 2) as (client, rt, _app):
        _until(lambda: len(_pending(rt)) >= 2, "the dead server's runs were never adopted")
        threading.Event().wait(6 * LEASE_S)  # several scans more
        adopted = [n for n in range(3) if _continued(rt, f"dead_{n}")]
        assert len(adopted) == 2, adopted
        assert len(_pending(rt)) == 2
        # the adopted runs are the agent's live runs here: a start of a third is refused
        assert _start(client, "one_more", 9) == 429
        assert rt.trace.events("one_more") == []
        # one ends: the third run is adopted then, and the bound still holds
        _deny(client, _pending(rt)[0].id)
        _until(lambda: all(_continued(rt, f"dead_{n}") for n in range(3)), "the third run was never adopted")
        _until(lambda: len(_pending(rt)) == 2, "the third run's payment was never held")
        assert _start(client, "still_one_more", 9) == 429


def test_a_run_an_approval_brings_from_a_stopped_server_waits_while_its_principal_has_no_room(
    tmp_path: Path,
) -> None:
    store = f"sqlite:///{tmp_path / 'store.db'}"
    with _server(store, World(), None) as (client, rt, _app):  # the first server stops, a run waiting
        assert _start(client, "brought", 1) == 202
        _until(lambda: len(_pending(rt)) == 1, "the run's payment was never held")
    world = World()
    with _server(store, world, 1) as (client, rt, app):
        assert _start(client, "own", 2) == 202  # the agent's one live run here
        _until(lambda: len(_pending(rt)) == 2, "the second server's run never held its payment")
        asked = {r.run_id: r for r in _pending(rt)}
        approved = client.post(
            f"/api/approvals/{asked['brought'].id}/approve", headers=bearer("approver-token")
        )
        assert approved.status_code == 200
        resumed = app.state.runner.resumed(asked["brought"].id, "brought")
        assert resumed is not None and resumed.result(timeout=30) == "deferred"
        assert not _continued(rt, "brought")
        assert world.payments == []
        # the agent's run here ends: a scan continues the other, its approved payment sent once
        _deny(client, asked["own"].id)
        _until(lambda: len(world.payments) == 1, "the run brought over was never continued")
        _until(lambda: any(e.kind == "run_finished" for e in rt.trace.events("brought")), "it never ended")
        assert [p["amount"] for p in world.payments] == [1]
