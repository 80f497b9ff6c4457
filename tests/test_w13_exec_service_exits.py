"""A tool that raises ``SystemExit`` (a library calling ``sys.exit()``), ``KeyboardInterrupt`` or a
``BaseException`` of its own in a run the API started: the server neither dies nor hangs. The run
ends ``error``, each call of it with a typed outcome (a write whose tool stopped this way may have
acted: ``unknown_commit``), and the next run of the same principal (on the same lane, the thread
whose event loop runs that principal's runs) goes on. Driven through the HTTP API (TestClient).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from fastapi.testclient import TestClient

from actionspace import Runtime
from tests.close_tools import WAIT_S
from tests.service.apptools import World, bearer, build_runtime, serving


class _OwnStop(BaseException):
    """A ``BaseException`` of the tool's own (neither an ``Exception`` nor one Python stops on)."""


RAISED: dict[str, Callable[[], BaseException]] = {
    "exit": lambda: SystemExit(3),
    "interrupt": KeyboardInterrupt,
    "own": lambda: _OwnStop("stop"),
}
KINDS = ["plain", "blocking", "async"]


def _add_tool(rt: Runtime, kind: str, raised: Callable[[], BaseException], effect: str) -> list[int]:
    """Tool ``stop`` of ``kind`` (a write or a read) raising ``raised()``; the list counts its runs."""
    ran: list[int] = []
    declared: dict[str, Any] = {"effect": effect}
    if effect == "write":
        declared["writes"] = ["w:{x}"]
    if kind == "async":

        async def stop(x: int) -> int:
            """Stop, after a wait.

            Args:
                x: Anything.
            """
            ran.append(x)
            await asyncio.sleep(0)
            raise raised()

        rt.tool(**declared)(stop)
        return ran

    def stop_now(x: int) -> int:
        """Stop.

        Args:
            x: Anything.
        """
        ran.append(x)
        raise raised()

    stop_now.__name__ = "stop"
    rt.tool(blocking=kind == "blocking", **declared)(stop_now)
    return ran


@contextmanager
def _server(kind: str, raised: str, effect: str) -> Iterator[tuple[TestClient, Any, Runtime, list[int]]]:
    rt, _ = build_runtime(World())
    ran = _add_tool(rt, kind, RAISED[raised], effect)
    with serving(rt) as (client, app):
        yield client, app, rt, ran


def _start(client: TestClient, run_id: str, body: dict[str, Any]) -> None:
    started = client.post("/api/runs", json={**body, "run_id": run_id}, headers=bearer("agent-token"))
    assert started.status_code == 202, started.text


def _finished(client: TestClient, app: Any, run_id: str) -> dict[str, Any]:
    """The run as the API shows it once it ended (the runner answers within the deadline)."""
    assert app.state.runner.wait(run_id, timeout=WAIT_S) in ("error", "ok")
    shown = client.get(f"/api/runs/{run_id}", headers=bearer("agent-token"))
    assert shown.status_code == 200, shown.text
    detail: dict[str, Any] = shown.json()
    return detail


def _then_a_run_goes_on(client: TestClient, app: Any) -> None:
    lookup = {"calls": [{"name": "lookup", "arguments": {"city": "Oslo"}}]}
    _start(client, "after", lookup)
    assert _finished(client, app, "after")["status"] == "ok"
    lanes = [t for t in threading.enumerate() if t.name.startswith("actionspace-runs-")]
    assert lanes and all(t.is_alive() for t in lanes)


def _events(client: TestClient, run_id: str, kind: str) -> list[dict[str, Any]]:
    shown = client.get(f"/api/runs/{run_id}/events", headers=bearer("agent-token"))
    assert shown.status_code == 200, shown.text
    return [e["data"] for e in shown.json() if e["kind"] == kind]


@pytest.mark.parametrize("raised", list(RAISED))
@pytest.mark.parametrize("kind", KINDS)
def test_a_call_whose_tool_stops_ends_typed_and_the_server_goes_on(kind: str, raised: str) -> None:
    with _server(kind, raised, "write") as (client, app, rt, ran):
        _start(client, "stops", {"calls": [{"name": "stop", "arguments": {"x": 1}}]})
        run = _finished(client, app, "stops")
        assert run["status"] == "error" and run["finished_at"] is not None, run
        assert ran == [1]
        [finished] = _events(client, "stops", "run_finished")
        categories = set(finished["failed"].values())
        if raised == "own":  # the tool's own failure, typed as any exception of a tool
            assert categories and "internal" not in categories, finished
        else:  # it may have acted: never "failed", never sent again
            assert categories == {"unknown_commit"}, finished
            [entry] = rt.ledger.list()
            assert entry.state in ("dispatched", "unknown", "unknown_commit"), entry
        observed = [d for d in _events(client, "stops", "observation") if d.get("tool") == "stop"]
        assert observed and all(d.get("category") in categories for d in observed), observed
        _then_a_run_goes_on(client, app)
        assert ran == [1]


@pytest.mark.parametrize("raised", ["exit", "interrupt"])
@pytest.mark.parametrize("kind", KINDS)
def test_a_read_whose_tool_stops_ends_typed(kind: str, raised: str) -> None:
    with _server(kind, raised, "read") as (client, app, _rt, ran):
        _start(client, "reads", {"calls": [{"name": "stop", "arguments": {"x": 2}}]})
        run = _finished(client, app, "reads")
        assert run["status"] == "error", run
        [finished] = _events(client, "reads", "run_finished")
        assert set(finished["failed"].values()) == {"unclassified"}, finished
        assert ran == [2]
        _then_a_run_goes_on(client, app)


@pytest.mark.parametrize("raised", ["exit", "interrupt"])
@pytest.mark.parametrize("kind", KINDS)
def test_a_plan_whose_node_stops_ends_typed_and_the_server_goes_on(kind: str, raised: str) -> None:
    with _server(kind, raised, "write") as (client, app, _rt, ran):
        plan = {"nodes": [{"id": "n1", "tool": "stop", "arguments": {"x": 1}}]}
        _start(client, "plan", {"plan": plan})
        run = _finished(client, app, "plan")
        assert run["status"] == "error" and run["finished_at"] is not None, run
        [finished] = _events(client, "plan", "run_finished")
        assert finished["failed"] == {"n1": "unknown_commit"}, finished
        assert ran == [1]
        _then_a_run_goes_on(client, app)
