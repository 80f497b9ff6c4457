"""A tool server that dies is reconnected: a stdio server is started again, an HTTP server given a new
session (``_mcp_reconnect``), against real servers (``test_w19_mcp_restarts_program.py``).

* later calls answer again, without the app adding the server again;
* the tools are listed again: one that came back changed under its name is a new version, and a call
  made (and approved) for the old one is refused unsent (``version_mismatch``);
* calls while no session is up are ``transient``, unsent, with ``retry_after``;
* a write whose answer was lost when the server died stays ``unknown_commit``, sent once, never again;
* a server that dies again at every start is started a bounded number of times, then left down.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.adapters.mcp_client import HttpServer, McpToolset, Reconnect, StdioServer
from actionspace.catalog.spec import NO_RETRY
from actionspace.errors import ConfigurationError

PROGRAM = str(Path(__file__).with_name("test_w19_mcp_restarts_program.py"))
CONNECT_S = 120.0
"""Starting a Python server on a loaded two-core machine can take tens of seconds."""
WAIT_S = 180.0
"""The most a test waits for a reconnection: never reached unless it does not come."""
QUICK = Reconnect(attempts=3, initial_backoff_s=0.05, max_backoff_s=0.2)
_OPTIONS = {name: {"retry": NO_RETRY} for name in ("echo", "note", "note_then_die", "crash")}


@dataclass
class Server:
    """The program's notes and plan, and how to start it over HTTP (stdio: the client starts it)."""

    notes: Path
    plan: Path
    sock: socket.socket | None = None
    proc: subprocess.Popen[bytes] | None = None

    def env(self) -> dict[str, str]:
        return {"W19_NOTES": str(self.notes), "W19_PLAN": str(self.plan)}

    def lines(self, prefix: str) -> list[str]:
        text = self.notes.read_text() if self.notes.exists() else ""
        return [line for line in text.splitlines() if line.startswith(prefix)]

    def next_start(self, plan: str) -> None:
        self.plan.write_text(plan)

    def kill_stdio(self) -> None:
        pid = int(self.lines("start ")[-1].split()[2])
        os.kill(pid, signal.SIGKILL)

    def serve_http(self) -> None:
        assert self.sock is not None
        fd = self.sock.fileno()
        env = {**os.environ, **self.env()}
        self.proc = subprocess.Popen([sys.executable, PROGRAM, "http", str(fd)], pass_fds=[fd], env=env)

    def stop_http(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=30)

    @property
    def url(self) -> str:
        assert self.sock is not None
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/mcp"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    served = Server(tmp_path / "notes.txt", tmp_path / "plan.txt")
    try:
        yield served
    finally:
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


def stdio(server: Server, **options: Any) -> StdioServer:
    options.setdefault("allowlisted", True)
    options.setdefault("reconnect", QUICK)
    options.setdefault("tool_options", _OPTIONS)
    args = (PROGRAM, "stdio")
    return StdioServer(
        sys.executable, args=args, env=server.env(), name="w19", connect_timeout_s=CONNECT_S, **options
    )


def http(server: Server, **options: Any) -> HttpServer:
    server.sock = socket.socket()
    server.sock.bind(("127.0.0.1", 0))
    server.sock.listen(64)
    server.serve_http()
    options.setdefault("reconnect", QUICK)
    return HttpServer(
        server.url,
        name="w19",
        allowlisted=True,
        tool_options=_OPTIONS,
        connect_timeout_s=CONNECT_S,
        **options,
    )


def wait_for(what: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not what():
        assert time.monotonic() < deadline, "not within the bound"
        time.sleep(0.05)


def echo(rt: Runtime, text: str = "hi", run: str | None = None) -> Any:
    return rt.call({"name": "echo", "arguments": {"text": text}}, run_id=run or rt.new_run())


def reconnected(toolset: McpToolset, times: int = 1) -> Callable[[], bool]:
    return lambda: toolset.connection.reconnects >= times and toolset.connection.connected


def test_a_stdio_server_that_died_is_started_again_and_answers(rt: Runtime, server: Server) -> None:
    toolset = rt.add_mcp_server(stdio(server))
    crashed = rt.call({"name": "crash", "arguments": {}}, run_id=rt.new_run())
    assert crashed.error is not None and crashed.error.category == "transient", crashed.error
    wait_for(reconnected(toolset))
    obs = echo(rt)
    assert obs.status == "ok" and obs.data == {"result": "hi"}, obs.error
    assert len(server.lines("start a")) == 2


def test_a_stdio_server_killed_while_idle_is_started_again(rt: Runtime, server: Server) -> None:
    toolset = rt.add_mcp_server(stdio(server))
    server.kill_stdio()
    wait_for(reconnected(toolset))
    assert echo(rt).status == "ok"


def test_a_write_whose_answer_died_with_the_server_stays_unknown_and_is_never_sent_again(
    rt: Runtime, server: Server
) -> None:
    toolset = rt.add_mcp_server(stdio(server))
    run = rt.new_run()
    lost = rt.call({"name": "note_then_die", "arguments": {"text": "once"}}, run_id=run)
    assert lost.error is not None and lost.error.category == "unknown_commit", lost.error
    wait_for(reconnected(toolset))
    wrote = rt.call({"name": "note", "arguments": {"text": "after"}}, run_id=rt.new_run())
    assert wrote.status == "ok", wrote.error
    assert server.lines("got ") == ["got once"]  # the reconnection sent nothing of it again
    assert server.lines("note ") == ["note after"]
    assert [e.state for e in rt.ledger.list() if e.run_id == run] == ["unknown_commit"]


def test_a_tool_that_came_back_changed_under_its_name_is_a_new_version(rt: Runtime, server: Server) -> None:
    toolset = rt.add_mcp_server(stdio(server, allowlisted=False))  # every call needs a person
    run = rt.new_run()
    held = echo(rt, run=run)
    assert held.error is not None and held.error.category == "needs_approval", held.error
    rt.approvals.approve(str(held.error.details["request_id"]), by="alice")
    server.next_start("b")  # echo comes back as another tool under the same name
    server.kill_stdio()
    wait_for(reconnected(toolset))
    assert toolset.specs()["echo"].version == "2"
    obs = echo(rt, run=run)  # approved for echo@1, which is retired
    assert obs.error is not None and obs.error.category == "version_mismatch", obs.error


def test_calls_while_reconnecting_are_refused_unsent_with_a_retry_hint_and_the_attempts_are_bounded(
    rt: Runtime, server: Server
) -> None:
    slow = Reconnect(attempts=3, initial_backoff_s=2.0, max_backoff_s=2.0)
    toolset = rt.add_mcp_server(stdio(server, reconnect=slow))
    server.next_start("die")  # every later start dies before the handshake is answered
    server.kill_stdio()
    wait_for(lambda: not toolset.connection.connected and len(server.lines("start die")) >= 1)
    refused = rt.call({"name": "note", "arguments": {"text": "meanwhile"}}, run_id=rt.new_run())
    assert refused.error is not None and refused.error.category == "transient", refused.error
    assert refused.error.retry_after is not None and 0 < refused.error.retry_after <= 3.0 + 1.0
    assert refused.error.details.get("reconnecting") is True
    wait_for(lambda: echo(rt).error.retry_after is None)  # attempts spent: down, no hint any more
    down = echo(rt)
    assert down.error is not None and down.error.category == "transient"
    assert down.error.vendor_code == "server_unavailable"
    assert len(server.lines("start die")) == slow.attempts  # bounded, not a loop that spins
    assert server.lines("note ") == []
    time.sleep(0.5)
    assert len(server.lines("start die")) == slow.attempts


def test_reconnect_none_leaves_a_dead_server_down(rt: Runtime, server: Server) -> None:
    toolset = rt.add_mcp_server(stdio(server, reconnect=None))
    server.kill_stdio()
    obs = echo(rt)
    assert obs.error is not None and obs.error.category == "transient" and obs.error.retry_after is None
    assert toolset.connection.reconnects == 0 and len(server.lines("start ")) == 1


@pytest.mark.parametrize(
    "bad",
    [
        {"attempts": 0},
        {"attempts": 1.5},
        {"initial_backoff_s": -1},
        {"backoff_multiplier": 0.5},
        {"max_backoff_s": float("nan")},
    ],
)
def test_a_bad_reconnect_setting_is_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        Reconnect(**bad)


def test_the_backoff_grows_to_its_cap() -> None:
    policy = Reconnect(attempts=9, initial_backoff_s=0.5, backoff_multiplier=2.0, max_backoff_s=3.0)
    assert [policy.delay(n) for n in range(6)] == [0.0, 0.5, 1.0, 2.0, 3.0, 3.0]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_an_http_server_that_restarted_is_connected_to_in_a_new_session(
    rt: Runtime, server: Server, mode: str
) -> None:
    toolset = rt.add_mcp_server(http(server, mode=mode))
    assert echo(rt).status == "ok"
    server.stop_http()
    server.serve_http()  # the same address; it knows no session of before
    first = echo(rt)  # the old session id is refused (legacy), or the server was away for a moment
    if first.error is not None:
        assert first.error.category == "transient", first.error
    wait_for(lambda: echo(rt).status == "ok")
    assert toolset.connection.connected
    if mode == "legacy":
        assert toolset.connection.reconnects >= 1


def test_an_http_server_that_went_away_is_connected_to_once_it_is_back(rt: Runtime, server: Server) -> None:
    slow = Reconnect(attempts=5, initial_backoff_s=0.5, max_backoff_s=2.0)
    toolset = rt.add_mcp_server(http(server, mode="legacy", reconnect=slow))
    server.stop_http()
    gone = echo(rt)
    assert gone.error is not None and gone.error.category == "transient", gone.error
    server.serve_http()
    wait_for(lambda: echo(rt).status == "ok")
    assert toolset.connection.reconnects >= 1


def test_a_write_to_an_http_server_that_refuses_connections_is_refused_unsent(
    rt: Runtime, server: Server
) -> None:
    rt.add_mcp_server(http(server, mode="legacy", reconnect=Reconnect(attempts=1)))
    server.stop_http()
    assert server.sock is not None
    server.sock.close()  # the port refuses connections: nothing can reach the server
    server.sock = None
    run = rt.new_run()
    obs = rt.call({"name": "note", "arguments": {"text": "never"}}, run_id=run)
    assert obs.error is not None and obs.error.category == "transient", obs.error  # was unknown_commit
    assert [e.state for e in rt.ledger.list() if e.run_id == run] == ["failed"]
    assert server.lines("note ") == []
