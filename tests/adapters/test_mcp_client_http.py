"""The MCP client adapter against a real SDK server: list changes, cancellation, lost answers.

The server (``mcp_test_server.py``) runs in a subprocess over streamable HTTP (both protocol
eras: ``auto`` negotiates 2026-07-28, ``legacy`` the 2025 handshake) or over stdio.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any, Literal

import pytest

from actionspace import Observation, Runtime
from actionspace.adapters.mcp_client import HttpServer, McpServer
from actionspace.catalog.spec import NO_RETRY, ToolSpec
from actionspace.plan.control import CancelScope
from actionspace.plan.model import PlanResult
from tests.adapters.mcp_fixtures import CONNECT_TIMEOUT_S, rt, sdk_server_stdio, start_http_server, stop

__all__ = ["rt"]

NO_RETRIES: dict[str, dict[str, Any]] = {
    "slow": {"retry": NO_RETRY, "timeout_s": 1.0},
    "slow_note": {"timeout_s": 1.0},
}
"""Only the deliberately slow tools get a short timeout; every other call has the default 30 s."""


def _serve(kind: str) -> Iterator[McpServer]:
    if kind == "stdio":
        yield sdk_server_stdio(allowlisted=True, tool_options=NO_RETRIES)
        return
    proc, url = start_http_server()
    mode: Literal["auto", "legacy"] = "legacy" if kind.endswith("legacy") else "auto"
    try:
        yield HttpServer(
            url,
            name="test",
            allowlisted=True,
            mode=mode,
            tool_options=NO_RETRIES,
            connect_timeout_s=CONNECT_TIMEOUT_S,
        )
    finally:
        stop(proc)


@pytest.fixture(params=["http-auto", "http-legacy", "stdio"])
def server(request: pytest.FixtureRequest) -> Iterator[McpServer]:
    """The test server over each transport and protocol era."""
    yield from _serve(request.param)


@pytest.fixture(params=["http-auto", "http-legacy"])
def http_server(request: pytest.FixtureRequest) -> Iterator[McpServer]:
    """The test server over streamable HTTP, in each protocol era."""
    yield from _serve(request.param)


@pytest.fixture
def modern_http_server() -> Iterator[McpServer]:
    yield from _serve("http-auto")


def test_a_changed_tool_list_retires_the_old_version_and_its_calls_get_version_mismatch(
    rt: Runtime, server: McpServer
) -> None:
    toolset = rt.add_mcp_server(server)
    changed = threading.Event()
    seen: list[tuple[list[ToolSpec], list[ToolSpec]]] = []

    def heard(added: list[ToolSpec], retired: list[ToolSpec]) -> None:
        seen.append((added, retired))
        changed.set()

    toolset.on_change(heard)
    run = rt.new_run()
    rt.offer(run_id=run)
    assert rt.call({"name": "echo", "arguments": {"text": "a"}}, run_id=run).data == {"result": "a"}
    assert rt.call({"name": "evolve", "arguments": {}}, run_id=run).status == "ok"
    assert changed.wait(15), "no tools/list_changed refresh arrived"
    added, retired = seen[0]
    assert [s.key for s in added] == ["echo@2"] and [s.key for s in retired] == ["echo@1"]
    old = rt.catalog.find("echo@1")
    assert old is not None and old.lifecycle == "retired"
    stale = rt.call({"name": "echo", "arguments": {"text": "a"}}, run_id=run)
    assert stale.error is not None and stale.error.category == "version_mismatch"
    assert stale.error.details["current"]["version"] == "2"
    fresh = rt.call({"name": "echo", "arguments": {"text": "a", "suffix": "!"}}, run_id=run)
    assert fresh.status == "ok", fresh.error
    assert (fresh.data, fresh.tool_version) == ({"result": "a!"}, "2")
    # Tools that did not change keep their version.
    assert rt.catalog.get("add").version == "1"


def _cancel_seen(rt: Runtime, run: str) -> Observation:
    return rt.call({"name": "cancel_seen", "arguments": {"timeout_s": 10}}, run_id=run)


def test_a_timeout_cancels_the_request_on_the_server(rt: Runtime, server: McpServer) -> None:
    rt.add_mcp_server(server)
    run = rt.new_run()
    obs = rt.call({"name": "slow", "arguments": {"seconds": 60}}, run_id=run)
    assert obs.error is not None and obs.error.category == "transient"
    assert obs.error.details["timeout_s"] == 1.0
    assert _cancel_seen(rt, run).data == {"result": True}


def test_an_async_callers_timeout_cancels_the_request_on_the_server(
    rt: Runtime, modern_http_server: McpServer
) -> None:
    async def scenario() -> Observation:
        await rt.aadd_mcp_server(modern_http_server)
        return await asyncio.wait_for(rt.acall({"name": "slow", "arguments": {"seconds": 60}}), 10)

    obs = asyncio.run(scenario())
    assert obs.error is not None and obs.error.category == "transient"
    assert _cancel_seen(rt, rt.new_run()).data == {"result": True}


def test_a_write_whose_answer_is_lost_is_unknown_commit_and_never_resent(
    rt: Runtime, http_server: McpServer
) -> None:
    toolset = rt.add_mcp_server(http_server)
    spec = toolset.specs()["slow_note"]
    assert (spec.effect, spec.risk, spec.idempotency) == ("write", "medium", "none")
    run = rt.new_run()
    obs = rt.call({"name": "slow_note", "arguments": {"text": "x", "seconds": 30}}, run_id=run, node_id="w")
    assert obs.error is not None and obs.error.category == "unknown_commit"
    entry = rt.ledger.get_node(run, "w")
    assert entry is not None and entry.state == "unknown_commit"
    again = rt.call({"name": "slow_note", "arguments": {"text": "x", "seconds": 30}}, run_id=run, node_id="w")
    assert again.error is not None and again.error.category == "unknown_commit"
    dispatched = [e for e in rt.trace.events(run) if e.kind == "dispatched"]
    assert len(dispatched) == 1


def test_a_server_that_went_away_answers_transient_for_reads(rt: Runtime) -> None:
    proc, url = start_http_server()
    try:
        toolset = rt.add_mcp_server(
            HttpServer(
                url,
                allowlisted=True,
                timeout_s=2,
                tool_options=NO_RETRIES,
                connect_timeout_s=CONNECT_TIMEOUT_S,
            )
        )
    finally:
        stop(proc)
    run = rt.new_run()
    obs = rt.call({"name": "echo", "arguments": {"text": "a"}}, run_id=run)
    assert obs.error is not None
    assert obs.error.category in ("transient", "unclassified"), obs.error
    toolset.close()
    assert not toolset.connection.connected
    closed = rt.call({"name": "echo", "arguments": {"text": "a"}}, run_id=run)
    assert closed.error is not None and closed.error.category == "transient"
    assert closed.error.vendor_code == "server_unavailable"


def test_cancelling_a_running_plan_node_cancels_its_request_on_the_server(rt: Runtime) -> None:
    proc, url = start_http_server()
    server = HttpServer(
        url,
        allowlisted=True,
        tool_options={"slow": {"retry": NO_RETRY, "timeout_s": 60}},
        connect_timeout_s=CONNECT_TIMEOUT_S,
    )
    plan = {"nodes": [{"id": "wait", "tool": "slow", "arguments": {"seconds": 60}}]}

    async def scenario() -> PlanResult:
        toolset = await rt.aadd_mcp_server(server)
        scope = CancelScope()
        running = asyncio.ensure_future(rt.arun_plan(plan, cancel=scope))
        started = await toolset.connection.call_tool("slow_started", {"timeout_s": 20})
        assert started.structured_content == {"result": True}
        scope.cancel(["wait"])
        return await asyncio.wait_for(running, 20)

    try:
        result = asyncio.run(scenario())
        node = result.nodes["wait"]
        assert node.error is not None and node.error.category == "cancelled", node.error
        assert _cancel_seen(rt, rt.new_run()).data == {"result": True}
    finally:
        stop(proc)
