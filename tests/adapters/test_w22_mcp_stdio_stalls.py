"""A stdio MCP server that stops reading its input, or stops answering, against a real child server
(``test_w22_mcp_stdio_stalls_program.py``), stopped with ``SIGSTOP`` or stuck in a busy loop:

* a request that was never handed to the server's pipe (it waited behind a write the full pipe holds)
  ends within its call's timeout as ``transient``, unsent, not ``unknown_commit``, and never reaches
  the server; a request whose bytes went into the pipe stays in doubt (a write ``unknown_commit``);
* a server that answers nothing is asked whether it is there (after ``Reconnect.unanswered`` requests
  unanswered in a row, or ``idle_probe_s`` of silence), and, unanswered, its process is stopped and
  started again; without a reconnect policy it is not;
* a server that only reads slowly is not restarted: a call sent once it reads again is answered.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import struct
import sys
import termios
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.adapters.mcp_client import McpToolset, Reconnect, StdioServer
from actionspace.catalog.spec import NO_RETRY

PROGRAM = str(Path(__file__).with_name("test_w22_mcp_stdio_stalls_program.py"))
CONNECT_S = 120.0
"""Starting a Python server on a loaded two-core machine can take tens of seconds."""
WAIT_S = 180.0
"""The most a test waits for what must come: never reached unless it does not come."""
PATIENT = Reconnect(attempts=1000, initial_backoff_s=0.05, max_backoff_s=0.5)
BIG = 1024 * 1024
"""A request this large (bytes) never fits a pipe (64 KiB) nor the transport's buffer."""


class Notes:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.stopped: list[int] = []

    def lines(self, prefix: str) -> list[str]:
        text = self.path.read_text() if self.path.exists() else ""
        return [line for line in text.splitlines() if line.startswith(prefix)]

    @property
    def pid(self) -> int:
        return int(self.lines("start ")[-1].split()[1])

    def pause(self) -> int:
        pid = self.pid
        os.kill(pid, signal.SIGSTOP)
        self.stopped.append(pid)
        return pid

    def resume(self) -> None:
        while self.stopped:
            with contextlib.suppress(ProcessLookupError):  # killed meanwhile
                os.kill(self.stopped.pop(), signal.SIGCONT)


@pytest.fixture
def notes(tmp_path: Path) -> Iterator[Notes]:
    held = Notes(tmp_path / "notes.txt")
    try:
        yield held
    finally:
        held.resume()


@pytest.fixture
def rt() -> Iterator[Runtime]:
    runtime = Runtime("memory://", recover_on_start=False)
    try:
        yield runtime
    finally:
        runtime.close()


def connect(rt: Runtime, notes: Notes, reconnect: Reconnect | None, timeout_s: float = 4.0) -> McpToolset:
    options: dict[str, Any] = {n: {"retry": NO_RETRY, "timeout_s": timeout_s} for n in ("echo", "note")}
    options["freeze"] = {"retry": NO_RETRY, "timeout_s": 2.0}
    server = StdioServer(
        sys.executable,
        args=(PROGRAM,),
        env={"W22_NOTES": str(notes.path)},
        name="w22",
        allowlisted=True,
        tool_options=options,
        connect_timeout_s=CONNECT_S,
        reconnect=reconnect,
        relist_writes_after_s=None,  # a write is sent under the first listing: no listing before it
    )
    toolset = rt.add_mcp_server(server)
    assert wait_for(lambda: toolset.connection.connected)
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


def piped(pid: int) -> int:
    """Bytes waiting in the server's input pipe, read through the server's own descriptors (the SDK's
    server moves its input off descriptor 0): the most any pipe it reads holds."""
    most = 0
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            if not os.readlink(f"/proc/{pid}/fd/{name}").startswith("pipe:"):
                continue
            flags = Path(f"/proc/{pid}/fdinfo/{name}").read_text().split("flags:")[1].split()[0]
            if int(flags, 8) & 3 != os.O_RDONLY:
                continue
            fd = os.open(f"/proc/{pid}/fd/{name}", os.O_RDONLY | os.O_NONBLOCK)
        except OSError:  # closed meanwhile
            continue
        try:
            got = fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0")
            most = max(most, int(struct.unpack("i", got)[0]))
        finally:
            os.close(fd)
    return most


def in_background(what: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    got: list[Any] = []
    thread = threading.Thread(target=lambda: got.append(what()), daemon=True)
    thread.start()
    return thread, got


def fill_the_pipe(rt: Runtime, notes: Notes, name: str) -> tuple[threading.Thread, list[Any]]:
    """Stop the server and start a call of ``name`` too large for its pipe: once the pipe is full, the
    call's request is partly written and every later one waits behind it."""
    pid = notes.pause()
    big = in_background(lambda: call(rt, name, text="x" * BIG))
    assert wait_for(lambda: piped(pid) >= 60 * 1024, 60), piped(pid)
    return big


@pytest.mark.parametrize("reconnect", [None, PATIENT], ids=["no-reconnect", "reconnect"])
def test_a_write_never_handed_to_the_pipe_ends_unsent_not_unknown_commit(
    rt: Runtime, notes: Notes, reconnect: Reconnect | None
) -> None:
    toolset = connect(rt, notes, reconnect)
    assert call(rt, "echo", text="up")[0].status == "ok"
    big, _ = fill_the_pipe(rt, notes, "echo")
    began = time.monotonic()
    held, run = call(rt, "note", text="held")  # waits behind the partly written request
    took = time.monotonic() - began
    assert held.error is not None, held
    assert held.error.category == "transient", (held.error, took)
    assert "unknown_commit" not in states(rt, run), states(rt, run)
    assert "nothing was sent" in held.error.message, held.error
    assert took < 60, took  # its timeout is 4 s: it ended on its own, not at a test's bound
    big.join(WAIT_S)
    if reconnect is not None:  # the stopped server was asked, taken for gone, and started again
        assert wait_for(lambda: toolset.connection.reconnects >= 1 and toolset.connection.connected)
        assert len(notes.lines("start ")) >= 2
    notes.resume()
    assert wait_for(lambda: call(rt, "echo", text="back")[0].status == "ok")
    wrote, _ = call(rt, "note", text="last")
    assert wrote.status == "ok", wrote.error
    assert notes.lines("call note last") == ["call note last"]  # notes are read past the stall
    assert notes.lines("call note held") == []  # never reached the server, in either process


def test_a_write_partly_handed_to_the_pipe_stays_in_doubt(rt: Runtime, notes: Notes) -> None:
    toolset = connect(rt, notes, None)
    assert call(rt, "echo", text="up")[0].status == "ok"
    big, got = fill_the_pipe(rt, notes, "note")
    big.join(WAIT_S)
    assert got, "the call never ended"
    obs, run = got[0]
    assert obs.error is not None and obs.error.category == "unknown_commit", obs.error
    assert states(rt, run) == ["unknown_commit"]
    notes.resume()
    assert wait_for(lambda: call(rt, "echo", text="back")[0].status == "ok")
    assert toolset.connection.connected


@pytest.mark.parametrize("stall", ["sigstop", "busy-loop"])
def test_a_silent_stdio_server_is_asked_and_started_again(rt: Runtime, notes: Notes, stall: str) -> None:
    toolset = connect(rt, notes, PATIENT, timeout_s=2.0)
    connection = toolset.connection
    assert call(rt, "echo", text="up")[0].status == "ok"
    first = notes.pid
    if stall == "sigstop":
        notes.pause()
    else:
        frozen = call(rt, "freeze", seconds=3600)[0]  # its timeout is 2 s: the server stays stuck
        assert frozen.error is not None and frozen.error.category == "transient", frozen.error
    for n in range(3):  # Reconnect.unanswered: 3 in a row, nothing heard
        lost = call(rt, "echo", text=f"lost-{n}")[0]
        assert lost.error is not None and lost.error.category == "transient", lost.error
    assert wait_for(lambda: connection.reconnects >= 1 and connection.connected), "not started again"
    assert notes.pid != first
    assert call(rt, "echo", text="back")[0].status == "ok"
    with pytest.raises(ProcessLookupError):  # the silent process was stopped, not left behind
        for _ in range(600):
            os.kill(first, 0)
            time.sleep(0.1)


def test_a_silent_idle_stdio_server_is_noticed_without_a_call(rt: Runtime, notes: Notes) -> None:
    policy = Reconnect(attempts=1000, initial_backoff_s=0.05, max_backoff_s=0.5, idle_probe_s=1.0)
    toolset = connect(rt, notes, policy)
    first = notes.pid
    notes.pause()
    assert wait_for(lambda: toolset.connection.reconnects >= 1 and toolset.connection.connected)
    assert notes.pid != first
    assert call(rt, "echo", text="back")[0].status == "ok"


def test_without_a_reconnect_policy_a_silent_stdio_server_is_left_running(rt: Runtime, notes: Notes) -> None:
    toolset = connect(rt, notes, None, timeout_s=2.0)
    assert call(rt, "echo", text="up")[0].status == "ok"
    notes.pause()
    for n in range(4):
        lost = call(rt, "echo", text=f"lost-{n}")[0]
        assert lost.error is not None and lost.error.category == "transient", lost.error
    notes.resume()
    assert wait_for(lambda: call(rt, "echo", text="back")[0].status == "ok")
    assert len(notes.lines("start ")) == 1 and toolset.connection.reconnects == 0
