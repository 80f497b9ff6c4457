"""A run whose driver died is not taken over, nor its in-flight calls settled, while another live
server sends that run's approved call alone: the write is sent once."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from actionspace import Principal, Runtime
from actionspace.ledger.status import Committed, NotCommitted, StatusAnswer
from actionspace.service import RunnerConfig, create_app
from actionspace.service import continuation as cont
from actionspace.service.held_calls import proposer, send_held
from actionspace.service.leases import LapsedRuns, settle_in_flight
from actionspace.types import Observation
from tests.service.apptools import TOKENS, bearer
from tests.service.test_w27_run_continuation import _held

PLAN = {
    "nodes": [
        {"id": "a", "tool": "stamp", "arguments": {"step": "a"}},
        {"id": "b", "tool": "pay", "arguments": {"step": "b", "note": {"$ref": "a.data.step"}}},
    ]
}
LEASE_S = 60.0


class Bank:
    """A ``query`` write whose first send waits at ``gate`` until the test lets it finish."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.done: set[str] = set()
        self.inside, self.gate = threading.Event(), threading.Event()
        self.lock = threading.Lock()

    def pay(self, step: str, note: str = "") -> dict[str, Any]:
        with self.lock:
            self.sent.append(step)
            first = len(self.sent) == 1
        if first:
            self.inside.set()
            assert self.gate.wait(20), "the test never let the first send finish"
        with self.lock:
            self.done.add(step)
        return {"step": step}

    def status(self, *, key: str, arguments: Any) -> StatusAnswer:
        with self.lock:
            return Committed() if arguments.get("step") in self.done else NotCommitted()


def _runtime(store: str, bank: Bank) -> Runtime:
    rt = Runtime(
        store, principal=Principal(id="service", scopes=("write:*", "read:*")), recover_on_start=False
    )

    def stamp(step: str) -> dict[str, Any]:
        return {"step": step}

    rt.tool(effect="write", writes=["box:{step}"])(stamp)
    rt.add_tool(
        name="pay",
        fn=bank.pay,
        input_schema={
            "type": "object",
            "properties": {"step": {"type": "string"}, "note": {"type": "string"}},
            "required": ["step"],
        },
        effect="write",
        writes=["box:{step}"],
        requires_approval=True,
        idempotency="query",
        status_query=bank.status,
    )
    return rt


@contextmanager
def _runtimes(store: str, bank: Bank, n: int) -> Iterator[list[Runtime]]:
    rts = [_runtime(store, bank) for _ in range(n)]
    try:
        yield rts
    finally:
        for rt in rts:
            rt.close()


def _dead_driver(tmp_path: Path, bank: Bank) -> tuple[str, str]:
    """A run held on ``b`` whose server died (its lease is never released nor renewed)."""
    store = f"sqlite:///{tmp_path / 'store.db'}"
    rt = _runtime(store, bank)
    app = create_app(rt, tokens=TOKENS, runner=RunnerConfig(approval_poll_s=0.02, driver_lease_s=LEASE_S))
    try:
        with TestClient(app) as client:
            started = client.post(
                "/api/runs", json={"plan": PLAN, "run_id": "p"}, headers=bearer("agent-token")
            )
            assert started.status_code == 202, started.text
            request_id = _held(rt, "p", "b")
    finally:
        app.state.runner.close()
        rt.close()
    with sqlite3.connect(tmp_path / "store.db") as conn:
        # it died long ago: no release was written, and its lease ended
        conn.execute("DELETE FROM trace_events WHERE run_id = 'p' AND data LIKE '%\"released\"%'")
        query = "SELECT seq, data FROM trace_events WHERE run_id = 'p' AND kind = 'service_run_submitted'"
        ((seq, text),) = conn.execute(query).fetchall()
        data = {**json.loads(text), "until": time.time() - 10 * LEASE_S}
        update = "UPDATE trace_events SET data = ? WHERE run_id = 'p' AND seq = ?"
        conn.execute(update, (json.dumps(data), seq))
    return store, request_id


def _decided_long_ago(tmp_path: Path, request_id: str) -> None:
    """The approval was taken more than two leases ago (a scan no longer leaves its run to it)."""
    with sqlite3.connect(tmp_path / "store.db") as conn:
        update = "UPDATE approval_requests SET decided_at = ? WHERE id = ?"
        assert conn.execute(update, (time.time() - 10 * LEASE_S, request_id)).rowcount == 1


def _send_alone(rt: Runtime, request_id: str) -> Observation | Any:
    request = rt.approvals.get(request_id)
    assert request is not None and request.status == "approved"
    return asyncio.run(send_held(rt, request, proposer(request)))


def test_a_scan_never_settles_an_approved_call_another_server_is_sending_alone(tmp_path: Path) -> None:
    bank = Bank()
    store, request_id = _dead_driver(tmp_path, bank)
    with _runtimes(store, bank, 2) as (sender, scanner), ThreadPoolExecutor(1) as pool:
        sender.approvals.approve(request_id, by="alice")
        _decided_long_ago(tmp_path, request_id)
        sending: Future[Any] = pool.submit(_send_alone, sender, request_id)
        assert bank.inside.wait(20), "the approved call was not sent"
        quiet = time.time() + LEASE_S / 2 + 1  # the run is quiet; the send's mark still lasts
        try:
            assert LapsedRuns(scanner, LEASE_S)(lambda _run: False, quiet) == []
            assert cont.adopt(scanner, "p", "scanner", lease_s=LEASE_S, clock=lambda: quiet) is None
            settle_in_flight(scanner, "p")
            (entry,) = [e for e in scanner.ledger.list() if e.run_id == "p" and e.node_id == "b"]
            assert entry.state == "dispatched"  # still being sent: never asked, never re-sendable
        finally:
            bank.gate.set()
        obs = sending.result(timeout=20)
        assert isinstance(obs, Observation) and obs.status == "ok", obs
        assert bank.sent == ["b"]
        # the send ended: the run, still without a live driver, may be taken over now
        quiet = time.time() + LEASE_S / 2 + 1
        assert LapsedRuns(scanner, LEASE_S)(lambda _run: False, quiet) == ["p"]
        taken = cont.adopt(scanner, "p", "scanner", lease_s=LEASE_S, clock=lambda: quiet)
        assert taken is not None
        settle_in_flight(scanner, "p")
        request = scanner.approvals.get(request_id)
        assert request is not None
        result = scanner.run_plan(dict(taken.body), run_id="p", principal=proposer(request))
        assert result.status == "ok", result
        assert bank.sent == ["b"]
