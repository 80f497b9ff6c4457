"""An HTTP server that stops answering, or goes away while idle, is noticed and connected to again in a new
session, against a real SDK server (``test_w19_mcp_restarts_program.py``):

* a server that accepts connections and answers nothing (its process stopped with ``SIGSTOP``): calls end
  typed (a read ``transient``, a write in flight ``unknown_commit``); after ``Reconnect.unanswered``
  requests in a row went unanswered with nothing heard, and a listing went unanswered too, the session is
  taken for ended: later calls are refused unsent with ``retry_after``, and once the server answers again
  a new session is opened, in which nothing of before is sent again;
* a server that went away while no call ran is noticed as its notification stream fails (handshake era:
  the GET stream; 2026 revision: ``subscriptions/listen``), so the first call after it is back answers;
* ``Reconnect.idle_probe_s``: a server that stopped answering while idle is asked, and noticed.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.adapters.mcp_client import HttpServer, McpToolset, Reconnect
from actionspace.catalog.spec import NO_RETRY
from tests.adapters.test_w19_mcp_reconnects import CONNECT_S, Server, echo, reconnected, wait_for

CALL_S = 3.0
"""Each call's timeout: the time a call to the stopped server takes to end."""
NOTICED_S = 60.0
"""The most a test waits for a death to be noticed (it takes about a second, or the probe's 5 s)."""
PATIENT = Reconnect(attempts=1000, initial_backoff_s=0.05, max_backoff_s=0.5)
"""Attempts enough to outlast a server's start on a loaded machine."""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    served = Server(tmp_path / "notes.txt", tmp_path / "plan.txt")
    try:
        yield served
    finally:
        if served.proc is not None and served.proc.poll() is None:
            os.kill(served.proc.pid, signal.SIGCONT)
        served.stop_http()
        if served.sock is not None:
            served.sock.close()


@pytest.fixture
def rt() -> Iterator[Runtime]:
    runtime = Runtime("memory://", recover_on_start=False)
    try:
        yield runtime
    finally:
        runtime.close()


def listening(port: int = 0) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(64)
    return sock


def http(server: Server, mode: str, reconnect: Reconnect) -> HttpServer:
    server.sock = listening()
    server.serve_http()
    options = {name: {"retry": NO_RETRY, "timeout_s": CALL_S} for name in ("echo", "note")}
    return HttpServer(
        server.url,
        name="w20",
        allowlisted=True,
        tool_options=options,
        connect_timeout_s=CONNECT_S,
        mode=mode,  # type: ignore[arg-type]
        reconnect=reconnect,
    )


def within(what: Callable[[], bool], bound_s: float) -> bool:
    deadline = time.monotonic() + bound_s
    while not what():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def pause(server: Server) -> int:
    assert server.proc is not None
    os.kill(server.proc.pid, signal.SIGSTOP)  # its socket still takes connections, into the backlog
    return server.proc.pid


def up(rt: Runtime, toolset: McpToolset) -> None:
    wait_for(lambda: toolset.connection.connected)
    wait_for(lambda: echo(rt).status == "ok")


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_a_server_that_answers_nothing_is_taken_for_gone_and_connected_to_again_without_resending(
    rt: Runtime, server: Server, mode: str
) -> None:
    toolset = rt.add_mcp_server(http(server, mode, PATIENT))
    up(rt, toolset)
    pid = pause(server)
    try:
        run = rt.new_run()
        held = rt.call({"name": "note", "arguments": {"text": "held"}}, run_id=run)
        assert held.error is not None and held.error.category == "unknown_commit", held.error
        timed_out: list[Any] = []
        refused = None
        for _ in range(12):  # 2 end by their timeout; then the server is asked, and calls are refused unsent
            obs = echo(rt)
            assert obs.error is not None and obs.error.category == "transient", obs.error
            if obs.error.details.get("reconnecting"):
                refused = obs.error
                break
            timed_out.append(obs.error)
        assert refused is not None, f"still sent after {len(timed_out)} unanswered calls"
        assert refused.vendor_code == "server_unavailable" and refused.retry_after is not None
        # refused while the server is asked too: its verdict (unanswered within 5 s) ends the session
        assert within(lambda: not toolset.connection.connected, NOTICED_S), "the silence was not noticed"
        assert toolset.connection.reconnects == 0  # the stopped server cannot be connected to yet
    finally:
        os.kill(pid, signal.SIGCONT)
    wait_for(reconnected(toolset))
    up(rt, toolset)
    assert len(server.lines("note ")) <= 1  # the write was sent once: never again by the new session
    assert [e.state for e in rt.ledger.list() if e.run_id == run] == ["unknown_commit"]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_a_server_that_went_away_while_idle_is_noticed_and_the_first_call_after_it_is_back_answers(
    rt: Runtime, server: Server, mode: str
) -> None:
    toolset = rt.add_mcp_server(http(server, mode, PATIENT))
    up(rt, toolset)
    assert server.sock is not None
    port = server.sock.getsockname()[1]
    server.stop_http()
    server.sock.close()  # the port refuses connections, as a server that is gone
    server.sock = None
    assert within(lambda: not toolset.connection.connected, NOTICED_S), "the death was not noticed"
    server.sock = listening(port)
    server.serve_http()
    wait_for(reconnected(toolset))
    first = echo(rt)
    assert first.status == "ok", first.error
    assert toolset.connection.reconnects >= 1


def test_an_idle_probe_notices_a_server_that_stopped_answering_while_idle(
    rt: Runtime, server: Server
) -> None:
    probing = Reconnect(attempts=1000, initial_backoff_s=0.05, max_backoff_s=0.5, idle_probe_s=0.5)
    toolset = rt.add_mcp_server(http(server, "legacy", probing))
    up(rt, toolset)
    pid = pause(server)
    try:
        assert within(lambda: not toolset.connection.connected, NOTICED_S), "the silence was not noticed"
        refused = echo(rt)
        assert refused.error is not None and refused.error.details.get("reconnecting") is True, refused.error
    finally:
        os.kill(pid, signal.SIGCONT)
    wait_for(reconnected(toolset))
    up(rt, toolset)


def test_a_server_that_answers_is_not_taken_for_gone_however_many_calls_time_out(
    rt: Runtime, server: Server
) -> None:
    toolset = rt.add_mcp_server(http(server, "legacy", PATIENT))
    up(rt, toolset)
    connection = toolset.connection
    client = connection._client
    assert client is not None
    for _ in range(5):  # what a call that timed out tells the connection, while the server is there
        connection.submit(_unanswered(connection, client)).result(timeout=30)
    wait_for(lambda: not connection._asking)
    assert connection.connected and connection._client is client and connection.reconnects == 0
    assert echo(rt).status == "ok"


async def _unanswered(connection: Any, client: Any) -> None:
    connection._unanswered(client, connection._heard)
