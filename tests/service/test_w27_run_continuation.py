"""A run whose server stopped while a call waited for approval is continued by the server that
takes the decision: the rest of its plan or outputs runs, once, and the run ends.

Each test stops a server (``serving`` closes its runner, then its runtime) and starts a new one
on the same SQLite file, as a restart does. The tools count what they really did.
"""

from __future__ import annotations

import importlib
import json
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from actionspace import Principal, Runtime
from actionspace.service import RunnerConfig, create_app
from actionspace.trace.events import TraceEvent
from tests.service.apptools import TOKENS, bearer


class Tally:
    """How many times each step really ran."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.lock = threading.Lock()

    def ran(self, step: str) -> dict[str, Any]:
        with self.lock:
            self.counts[step] += 1
        return {"step": step, "done": True}


def _runtime(store: str, tally: Tally) -> Runtime:
    rt = Runtime(
        store, principal=Principal(id="service", scopes=("write:*", "read:*")), recover_on_start=False
    )

    def stamp(step: str, note: str = "") -> dict[str, Any]:
        return tally.ran(step)

    def guarded(step: str, note: str = "") -> dict[str, Any]:
        return tally.ran(step)

    def peek(step: str) -> dict[str, Any]:
        return tally.ran(step)

    rt.tool(effect="write", writes=["box:{step}"])(stamp)
    rt.tool(effect="write", writes=["box:{step}"], requires_approval=True)(guarded)
    rt.tool(effect="read", requires_approval=True)(peek)
    return rt


@contextmanager
def _server(
    store: str, tally: Tally, config: RunnerConfig | None = None
) -> Iterator[tuple[TestClient, Runtime, FastAPI]]:
    rt = _runtime(store, tally)
    app = create_app(rt, tokens=TOKENS, runner=config or RunnerConfig(approval_poll_s=0.02))
    try:
        with TestClient(app) as client:
            yield client, rt, app
    finally:
        app.state.runner.close()
        rt.close()


def _node(node_id: str, tool: str, after: str | None = None, **arguments: Any) -> dict[str, Any]:
    node: dict[str, Any] = {"id": node_id, "tool": tool, "arguments": {"step": node_id, **arguments}}
    if after is not None:
        node["depends_on"] = [after]
    return node


ABC = {
    "nodes": [
        _node("a", "stamp"),
        _node("b", "guarded", "a", note={"$ref": "a.data.step"}),
        _node("c", "stamp", "b"),
    ]
}
ABCD = {
    "nodes": [
        _node("a", "stamp"),
        _node("b", "guarded", "a"),
        _node("c", "guarded", "b", note={"$ref": "b.data.step"}),
        _node("d", "stamp", "c"),
    ]
}


def _submit(client: TestClient, body: dict[str, Any]) -> None:
    started = client.post("/api/runs", json=body, headers=bearer("agent-token"))
    assert started.status_code == 202, started.text


def _held(rt: Runtime, run_id: str, node_id: str) -> str:
    """The pending request of ``node_id``, once the round or call that held it has been recorded."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        held = [r for r in rt.approvals.list("pending") if r.run_id == run_id and r.node_id == node_id]
        events = rt.trace.events(run_id)
        # a plan's round is noted by plan_node_held, written after the node's observation: a
        # server stopped in between leaves the node unresumable (see service/held_nodes.py)
        if any(e.kind == "plan_started" for e in events):
            noted = any(e.kind == "plan_node_held" and e.data.get("node") == node_id for e in events)
        else:
            noted = any(
                e.kind == "observation" and e.data.get("category") == "needs_approval" for e in events
            )
        if held and noted:
            return held[0].id
        time.sleep(0.02)
    raise TimeoutError(f"{node_id} was never held for approval")


def _approve(client: TestClient, app: FastAPI, run_id: str, request_id: str) -> str:
    decided = client.post(f"/api/approvals/{request_id}/approve", headers=bearer("approver-token"))
    assert decided.status_code == 200, decided.text
    resumed = app.state.runner.resumed(request_id, run_id)
    assert resumed is not None, "the approved call was not resumed"
    return str(resumed.result(timeout=30))


def _finished(events: list[TraceEvent]) -> list[dict[str, Any]]:
    return [dict(e.data) for e in events if e.kind == "run_finished"]


def _continuation() -> Any:
    """The module under test, imported when used (a test of the behaviour runs without it)."""
    return importlib.import_module("actionspace.service.continuation")


def _sent_once(rt: Runtime, run_id: str) -> dict[str, int]:
    """Per node, how many ledger entries the run has (one per node, whatever was replayed)."""
    return dict(Counter(e.node_id for e in rt.ledger.list() if e.run_id == run_id))


def test_a_plan_held_across_a_restart_runs_its_later_nodes_once_and_ends(tmp_path: Path) -> None:
    store, tally = f"sqlite:///{tmp_path / 'store.db'}", Tally()
    with _server(store, tally) as (client, rt, _app):
        _submit(client, {"plan": ABC, "run_id": "r1"})
        request_id = _held(rt, "r1", "b")
    assert tally.counts == {"a": 1}
    with _server(store, tally) as (client, rt, app):
        assert _approve(client, app, "r1", request_id) == "ok"
        events = rt.trace.events("r1")
        assert tally.counts == {"a": 1, "b": 1, "c": 1}
        assert [f["status"] for f in _finished(events)] == ["ok"]
        replayed = {e.call_id for e in events if e.kind == "observation" and e.data.get("replayed")}
        assert "r1:a" in replayed  # committed before the restart: answered from the ledger
        assert _sent_once(rt, "r1") == {"a": 1, "b": 1, "c": 1}
        row = client.get("/api/runs/r1", headers=bearer("agent-token")).json()
        assert row["status"] == "ok"
        assert {n["id"]: n["status"] for n in row["plan"]["nodes"]} == {"a": "ok", "b": "ok", "c": "ok"}


def test_a_continuation_stopped_again_is_continued_by_the_next_server(tmp_path: Path) -> None:
    store, tally = f"sqlite:///{tmp_path / 'store.db'}", Tally()
    with _server(store, tally) as (client, rt, _app):
        _submit(client, {"plan": ABCD, "run_id": "r2"})
        first = _held(rt, "r2", "b")
    with _server(store, tally) as (client, rt, app):
        decided = client.post(f"/api/approvals/{first}/approve", headers=bearer("approver-token"))
        assert decided.status_code == 200
        second = _held(rt, "r2", "c")  # the continuation now waits on c: this server stops
        # the runner marks the run waiting once the held round is noted: give it that moment
        deadline = time.monotonic() + 20
        while app.state.runner.live("r2") != "waiting_approval" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert app.state.runner.live("r2") == "waiting_approval"
    assert tally.counts == {"a": 1, "b": 1}
    with _server(store, tally) as (client, rt, app):
        assert _approve(client, app, "r2", second) == "ok"
        events = rt.trace.events("r2")
        assert tally.counts == {"a": 1, "b": 1, "c": 1, "d": 1}
        assert [f["status"] for f in _finished(events)] == ["ok"]
        assert _sent_once(rt, "r2") == {"a": 1, "b": 1, "c": 1, "d": 1}
        drivers = [e.data for e in events if e.kind == "service_run_driver"]
        assert [d["action"] for d in drivers] == ["released", "continued", "released", "continued"]


def test_a_run_without_a_recorded_submission_resumes_only_the_call(tmp_path: Path) -> None:
    store, tally = f"sqlite:///{tmp_path / 'store.db'}", Tally()
    with _server(store, tally) as (client, rt, _app):
        _submit(client, {"plan": ABC, "run_id": "old"})
        request_id = _held(rt, "old", "b")
    with sqlite3.connect(tmp_path / "store.db") as conn:
        conn.execute("DELETE FROM trace_events WHERE run_id = 'old' AND kind = 'service_run_submitted'")
    with _server(store, tally) as (client, rt, app):
        assert _approve(client, app, "old", request_id) == "ok"
        assert tally.counts == {"a": 1, "b": 1}
        assert _finished(rt.trace.events("old")) == []


def test_a_submission_the_store_did_not_keep_as_given_is_not_continued(tmp_path: Path) -> None:
    """The recorded plan no longer matches its digest: the run is not continued on another plan."""
    store, tally = f"sqlite:///{tmp_path / 'store.db'}", Tally()
    with _server(store, tally) as (client, rt, _app):
        _submit(client, {"plan": ABC, "run_id": "bent"})
        request_id = _held(rt, "bent", "b")
    with sqlite3.connect(tmp_path / "store.db") as conn:
        query = "SELECT seq, data FROM trace_events WHERE run_id = 'bent' AND kind = 'service_run_submitted'"
        ((seq, text),) = conn.execute(query).fetchall()
        data = json.loads(text)
        data["body"]["nodes"][2]["arguments"]["step"] = "z"
        update = "UPDATE trace_events SET data = ? WHERE run_id = 'bent' AND seq = ?"
        conn.execute(update, (json.dumps(data), seq))
    with _server(store, tally) as (client, rt, app):
        assert _approve(client, app, "bent", request_id) == "ok"
        assert tally.counts == {"a": 1, "b": 1}
        assert _finished(rt.trace.events("bent")) == []


def test_a_submission_over_the_limit_is_recorded_as_not_continuable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_continuation(), "MAX_SUBMISSION_CHARS", 200)
    store, tally = f"sqlite:///{tmp_path / 'store.db'}", Tally()
    with _server(store, tally) as (client, rt, _app):
        _submit(client, {"plan": ABC, "run_id": "big"})
        request_id = _held(rt, "big", "b")
        submitted = [e.data for e in rt.trace.events("big") if e.kind == "service_run_submitted"]
        assert submitted[0]["continuable"] is False and "body" not in submitted[0]
    with _server(store, tally) as (client, rt, app):
        assert _approve(client, app, "big", request_id) == "ok"
        assert tally.counts == {"a": 1, "b": 1}
        assert _finished(rt.trace.events("big")) == []


CALLS = {
    "calls": [
        {"name": "stamp", "arguments": {"step": "a"}, "id": "k1"},
        {"name": "guarded", "arguments": {"step": "b"}, "id": "k2"},
        {"name": "stamp", "arguments": {"step": "c"}, "id": "k3"},
    ]
}


def test_calls_held_across_a_restart_send_the_later_outputs_once(tmp_path: Path) -> None:
    store, tally = f"sqlite:///{tmp_path / 'store.db'}", Tally()
    with _server(store, tally) as (client, rt, _app):
        _submit(client, {**CALLS, "run_id": "k"})
        request_id = _held(rt, "k", "c2")
    with _server(store, tally) as (client, rt, app):
        assert _approve(client, app, "k", request_id) == "ok"
        assert tally.counts == {"a": 1, "b": 1, "c": 1}
        finished = _finished(rt.trace.events("k"))
        assert [(f["status"], f["calls"]) for f in finished] == [("ok", 3)]
        assert _sent_once(rt, "k") == {"c1": 1, "c2": 1, "c3": 1}


def test_calls_of_one_output_after_the_held_one_are_sent_after_a_restart(tmp_path: Path) -> None:
    two = {
        "tool_calls": [
            {"id": "t1", "type": "function", "function": {"name": "guarded", "arguments": '{"step": "b"}'}},
            {"id": "t2", "type": "function", "function": {"name": "stamp", "arguments": '{"step": "c"}'}},
        ]
    }
    store, tally = f"sqlite:///{tmp_path / 'store.db'}", Tally()
    with _server(store, tally) as (client, rt, _app):
        _submit(
            client, {"calls": [{"name": "stamp", "arguments": {"step": "a"}, "id": "k1"}, two], "run_id": "m"}
        )
        request_id = _held(rt, "m", "c2.1")
    with _server(store, tally) as (client, rt, app):
        assert _approve(client, app, "m", request_id) == "ok"
        assert tally.counts == {"a": 1, "b": 1, "c": 1}
        assert [f["status"] for f in _finished(rt.trace.events("m"))] == ["ok"]


def test_resume_orphans_off_continues_nothing(tmp_path: Path) -> None:
    store, tally = f"sqlite:///{tmp_path / 'store.db'}", Tally()
    with _server(store, tally) as (client, rt, _app):
        _submit(client, {"plan": ABC, "run_id": "off"})
        request_id = _held(rt, "off", "b")
    off = RunnerConfig(approval_poll_s=0.02, resume_orphans=False)
    with _server(store, tally, off) as (client, rt, app):
        decided = client.post(f"/api/approvals/{request_id}/approve", headers=bearer("approver-token"))
        assert decided.status_code == 200
        assert app.state.runner.resumed(request_id, "off") is None
        assert tally.counts == {"a": 1}
        assert not any(
            e.kind == "service_run_driver" and e.data["action"] == "continued" for e in rt.trace.events("off")
        )


def test_a_run_its_live_server_drives_is_not_continued_by_another(tmp_path: Path) -> None:
    """Two servers share the file; the one that did not start the run sends only the approved call
    (the ledger lets one of the two send it), and the live one finishes its own run."""
    store, tally = f"sqlite:///{tmp_path / 'store.db'}", Tally()
    with _server(store, tally) as (client, rt, app), _server(store, tally) as (other, _rt2, other_app):
        _submit(client, {"plan": ABC, "run_id": "live"})
        request_id = _held(rt, "live", "b")
        _approve(other, other_app, "live", request_id)
        assert app.state.runner.wait("live", timeout=30) == "ok"
        events = rt.trace.events("live")
        assert tally.counts == {"a": 1, "b": 1, "c": 1}
        assert [f["status"] for f in _finished(events)] == ["ok"]
        assert not any(e.kind == "service_run_driver" for e in events)


def test_two_servers_racing_to_continue_a_run_claim_it_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second reads the trace as it was before the first claimed the run: both choose the same
    number, the store keeps the first claim there, and the second, reading again, takes nothing."""
    store, tally = f"sqlite:///{tmp_path / 'store.db'}", Tally()
    with _server(store, tally) as (client, rt, _app):
        _submit(client, {"plan": ABC, "run_id": "race"})
        request_id = _held(rt, "race", "b")
    first, second = _runtime(store, Tally()), _runtime(store, Tally())
    continuation = _continuation()
    try:
        request = first.approvals.get(request_id)
        assert request is not None
        stale = second.trace.events("race")
        assert continuation.take_over(first, request, "s1") is not None
        real, reads = second.trace.events, iter([stale])
        monkeypatch.setattr(second.trace, "events", lambda run_id: next(reads, None) or real(run_id))
        assert continuation.take_over(second, request, "s2") is None
        events = real("race")
        assert continuation.driver_of(events) == "s1"
        assert [e.data["server"] for e in events if e.data.get("action") == "continued"] == ["s1"]
    finally:
        first.close()
        second.close()
