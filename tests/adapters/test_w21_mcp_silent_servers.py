"""An HTTP server that stops answering costs no call sent into its silence while it is asked whether it is
there, and a cancelled request's notice cannot hold the session; against a real SDK server that keeps
its own record of what reached it (``test_w21_mcp_silent_program.py``):

* once the client asks a silent server (``SIGSTOP``) for its tools, a call proposed meanwhile waits for
  the verdict (at most half its timeout) or is refused unsent, ``transient`` with ``retry_after`` and
  ``details.reconnecting``: never sent, so a write is not ``unknown_commit`` and is never in the server's
  record, even once the server runs again;
* a call proposed while a live server is asked waits for the answer, then is sent once;
* a server that takes a ``notifications/cancelled`` and never answers its POST (the SDK POSTs a
  notification before it takes its next message) holds none of the calls after it: they are sent and
  answered at once, and every notice still reaches the server.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.adapters.mcp_client import HttpServer, McpToolset, Reconnect
from actionspace.catalog.spec import NO_RETRY

PROGRAM = str(Path(__file__).with_name("test_w21_mcp_silent_program.py"))
CONNECT_S = 120.0
"""Starting a Python server on a loaded two-core machine can take tens of seconds."""
WAIT_S = 180.0
"""The most a test waits for what must come: never reached unless it does not come."""
PATIENT = Reconnect(attempts=1000, initial_backoff_s=0.05, max_backoff_s=0.5)


@dataclass
class Server:
    notes: Path
    hold_cancels_s: float = 0.0
    sock: socket.socket | None = None
    proc: subprocess.Popen[bytes] | None = None
    stopped: list[int] = field(default_factory=list)

    def start(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        fd = self.sock.fileno()
        env = {**os.environ, "W21_NOTES": str(self.notes), "W21_HOLD_CANCELS_S": str(self.hold_cancels_s)}
        self.proc = subprocess.Popen([sys.executable, PROGRAM, str(fd)], pass_fds=[fd], env=env)

    def lines(self, prefix: str) -> list[str]:
        text = self.notes.read_text() if self.notes.exists() else ""
        return [line for line in text.splitlines() if line.startswith(prefix)]

    def pause(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)  # its socket still takes connections, into the backlog
        self.stopped.append(self.proc.pid)

    def resume(self) -> None:
        while self.stopped:
            os.kill(self.stopped.pop(), signal.SIGCONT)

    @property
    def url(self) -> str:
        assert self.sock is not None
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/mcp"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    served = Server(tmp_path / "notes.txt")
    try:
        yield served
    finally:
        served.resume()
        if served.proc is not None:
            served.proc.kill()
            served.proc.wait(timeout=30)
        if served.sock is not None:
            served.sock.close()


@pytest.fixture
def rt() -> Iterator[Runtime]:
    runtime = Runtime("memory://", recover_on_start=False)
    try:
        yield runtime
    finally:
        runtime.close()


def connect(
    rt: Runtime, server: Server, mode: str, timeout_s: float, reconnect: Reconnect, slow_s: float = 1.0
) -> McpToolset:
    server.start()
    options: dict[str, Any] = {name: {"retry": NO_RETRY, "timeout_s": timeout_s} for name in ("echo", "note")}
    options["slow"] = {"retry": NO_RETRY, "timeout_s": slow_s}
    toolset = rt.add_mcp_server(
        HttpServer(
            server.url,
            name="w21",
            allowlisted=True,
            tool_options=options,
            connect_timeout_s=CONNECT_S,
            mode=mode,  # type: ignore[arg-type]
            reconnect=reconnect,
            relist_writes_after_s=None,  # a write is sent under the first listing: no listing before it
        )
    )
    wait_for(lambda: toolset.connection.connected)
    return toolset


def wait_for(what: Callable[[], bool], bound_s: float = WAIT_S) -> bool:
    deadline = time.monotonic() + bound_s
    while not what():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def call(rt: Runtime, name: str, **arguments: Any) -> tuple[Any, str]:
    run = rt.new_run()
    return rt.call({"name": name, "arguments": arguments}, run_id=run), run


def states(rt: Runtime, run: str) -> list[str]:
    return [e.state for e in rt.ledger.list() if e.run_id == run]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_calls_while_a_silent_server_is_asked_are_not_sent_into_its_silence(
    rt: Runtime, server: Server, mode: str
) -> None:
    toolset = connect(rt, server, mode, 3.0, PATIENT)
    connection = toolset.connection
    assert call(rt, "echo", text="up")[0].status == "ok"
    server.pause()
    held, held_run = call(rt, "note", text="held")  # unanswered: 1 of Reconnect.unanswered (3)
    assert held.error is not None and held.error.category == "unknown_commit", held.error
    for n in range(2):
        lost = call(rt, "echo", text=f"lost-{n}")[0]
        assert lost.error is not None and lost.error.category == "transient", lost.error
    assert wait_for(lambda: connection._asking or not connection.connected, 30), "the server was not asked"
    during: list[tuple[Any, str]] = []
    while connection.connected and len(during) < 20:  # each waits at most half its timeout
        during.append(call(rt, "note", text=f"during-{len(during)}"))
    during.append(call(rt, "note", text="after-verdict"))
    read = call(rt, "echo", text="read-after-verdict")[0]
    for obs, run in [*during, (read, "")]:
        assert obs.error is not None and obs.error.category == "transient", obs.error
        assert obs.error.details.get("reconnecting") is True, obs.error
        assert obs.error.retry_after is not None and obs.error.retry_after > 0, obs.error
        if run:
            assert "unknown_commit" not in states(rt, run), states(rt, run)
    server.resume()
    assert wait_for(lambda: connection.reconnects >= 1 and connection.connected), "not reconnected"
    assert wait_for(lambda: call(rt, "echo", text="back")[0].status == "ok")
    wrote, _ = call(rt, "note", text="last")
    assert wrote.status == "ok", wrote.error
    assert server.lines("call note last") == ["call note last"]  # the record is read past the silence
    assert [line for line in server.lines("call note") if "during" in line or "verdict" in line] == []
    assert len(server.lines("call note held")) <= 1  # sent once, never again by the new session
    assert states(rt, held_run) == ["unknown_commit"]


def test_a_call_while_a_live_server_is_asked_waits_for_its_answer_and_is_sent_once(
    rt: Runtime, server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the answer comes well within the probe's bound, however busy the machine
    monkeypatch.setattr("actionspace.adapters._mcp_liveness.PROBE_TIMEOUT_S", 120.0)
    toolset = connect(rt, server, "legacy", 300.0, PATIENT)
    connection = toolset.connection
    assert call(rt, "echo", text="up")[0].status == "ok"
    server.pause()

    async def ask() -> None:
        client = connection._client
        assert client is not None
        connection._ask(client, "asked by the test")

    connection.submit(ask()).result(timeout=30)
    assert connection._asking
    got: list[Any] = []
    proposed = threading.Thread(target=lambda: got.append(call(rt, "note", text="waited")[0]))
    proposed.start()
    time.sleep(0.5)  # the call waits for the verdict (if it is not yet proposed, it will all the same)
    server.resume()
    proposed.join(WAIT_S)
    assert got and got[0].status == "ok", got and got[0].error
    assert wait_for(lambda: not connection._asking)
    assert connection.connected and connection.reconnects == 0
    assert server.lines("call note waited") == ["call note waited"]


def test_a_cancelled_requests_notice_that_the_server_never_acknowledges_holds_no_later_call(
    rt: Runtime, server: Server
) -> None:
    server.hold_cancels_s = 600.0  # it takes each notice, and never answers its POST
    toolset = connect(rt, server, "legacy", 6.0, PATIENT, slow_s=1.0)
    assert toolset.connection.connected
    for n in range(3):
        cut = call(rt, "slow", text=f"slow-{n}", seconds=600)[0]
        assert cut.error is not None and cut.error.category == "transient", cut.error
    began = time.monotonic()
    # its timeout is 6 s: before, it waited about 8 s behind the first notice (and the liveness check,
    # whose listing waited there too, took the server for gone after 5 s)
    wrote, run = call(rt, "note", text="after")
    took = time.monotonic() - began
    assert wrote.status == "ok", (wrote.error, took)
    assert states(rt, run) == ["committed"]
    assert server.lines("call note after") == ["call note after"]
    assert wait_for(lambda: len(server.lines("cancelled ")) == 3, 60), server.lines("")  # all were sent
    assert len(server.lines("call slow ")) == 3
    assert toolset.connection.connected and toolset.connection.reconnects == 0  # never taken for gone
