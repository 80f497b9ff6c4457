"""A client that asks for responses and never reads them, against a real uvicorn server.

Without a deadline on sending, such a connection waits on the client for ever: it stays counted
against the connection cap (so ``max_connections`` of them, with no token at all, leave every later
client a 503) and holds the server's shutdown. The static file asked for needs no token.
"""

from __future__ import annotations

import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from actionspace import Principal, Runtime
from actionspace.service import RunnerConfig, create_app
from actionspace.service.slow_clients import deadlines
from tests.service.apptools import TOKENS, uvicorn_server

_BUNDLE = b"GET /static/vendor/swagger-ui-bundle.js HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
"""A request for the largest static file (1.7 MB): served to anyone."""


@contextmanager
def _server(send_s: float, cap: int) -> Iterator[int]:
    """A uvicorn server with half-second head and body deadlines, ``send_s`` on sending, at most
    ``cap`` connections; its port. Stopping it must take at most 10 s (``uvicorn_server`` asserts)."""
    rt = Runtime("memory://", principal=Principal(id="svc", scopes=("read:*",)), recover_on_start=False)
    app = create_app(rt, tokens=TOKENS, runner=RunnerConfig(approval_poll_s=0.05))
    protocol = type("Protocol", (deadlines(0.5, 0.5, max_connections=cap),), {"send_timeout_s": send_s})
    try:
        with uvicorn_server(app, http=protocol) as base:
            yield int(base.rsplit(":", 1)[1])
    finally:
        app.state.runner.close()
        rt.close()


def _non_reader(port: int) -> socket.socket:
    """A connection that asks for far more than the kernel's buffers hold, and reads nothing."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(_BUNDLE * 16)  # pipelined: 27 MB of answers, past any socket buffer
    return sock


def _health(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=5) as answer:
            status: int = answer.status
            return status
    except urllib.error.HTTPError as refused:
        return refused.code
    except OSError:  # not answered in time (a busy machine): asked again
        return 0


def test_clients_that_never_read_their_answers_lose_their_connections_and_others_are_served() -> None:
    with _server(send_s=0.5, cap=2) as port:
        held = [_non_reader(port), _non_reader(port)]
        try:
            statuses = []
            deadline = time.monotonic() + 20  # generous: the send deadline is half a second
            while time.monotonic() < deadline:
                statuses.append(_health(port))
                if statuses[-1] == 200:
                    break
                time.sleep(0.2)  # the server ends the stalled connections on its own clock
            assert statuses[-1] == 200, f"every later client refused while two never read: {statuses[:5]}"
            for sock in held:  # the server ended them: what is left to read ends, or is a reset
                sock.settimeout(10)
                try:
                    while sock.recv(1 << 20):
                        pass
                except ConnectionResetError:
                    pass
        finally:
            for sock in held:
                sock.close()


@contextmanager
def _small_buffers_server(send_s: float) -> Iterator[int]:
    """As :func:`_server` (one connection at most), its sockets' send buffers as small as the
    kernel allows: a few kilobytes of answers fill them, so what is left stays with the server."""
    rt = Runtime("memory://", principal=Principal(id="svc", scopes=("read:*",)), recover_on_start=False)
    app = create_app(rt, tokens=TOKENS, runner=RunnerConfig(approval_poll_s=0.05))
    protocol = type("Protocol", (deadlines(0.5, 0.5, max_connections=1),), {"send_timeout_s": send_s})
    listening = socket.socket()
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1)  # inherited by what it accepts
    listening.bind(("127.0.0.1", 0))
    listening.listen(16)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", http=protocol, timeout_keep_alive=1))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listening]}, daemon=True)
    thread.start()
    try:
        yield listening.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        listening.close()
        app.state.runner.close()
        rt.close()
    assert not thread.is_alive(), "the server did not stop: a connection held its shutdown"


def test_a_connection_closed_with_a_few_kilobytes_unread_is_ended_all_the_same() -> None:
    """Under the high-water mark nothing pauses writing: asyncio holds a closed connection until its
    last bytes are sent, and a client that reads nothing never lets them go."""
    with _small_buffers_server(send_s=0.5) as port:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1)
        sock.connect(("127.0.0.1", port))
        asset = b"GET /static/core.js HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"  # 9 KB
        sock.sendall(asset * 2 + asset.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n"))
        try:
            statuses = []
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                statuses.append(_health(port))
                if statuses[-1] == 200:
                    break
                time.sleep(0.2)
            assert statuses[-1] == 200, f"the one connection stayed taken: {statuses[:5]}"
        finally:
            sock.close()


def test_a_client_that_reads_gets_the_whole_answer() -> None:
    with _server(send_s=10.0, cap=4) as port:
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect(("127.0.0.1", port))
            sock.sendall(_BUNDLE.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n"))
            sock.settimeout(30)
            got = bytearray()
            while chunk := sock.recv(4096):
                got += chunk
        head, _, body = bytes(got).partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200")
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        )
        assert len(body) == length > 1_000_000


class _Transport:
    """What the protocol's send deadline reads of a transport: the bytes it still holds."""

    def __init__(self) -> None:
        self.buffered = 0
        self.aborted = False

    def get_write_buffer_size(self) -> int:
        return self.buffered

    def abort(self) -> None:
        self.aborted = True


class _Timer:
    def __init__(self, callback: Any, args: tuple[Any, ...]) -> None:
        self.callback, self.args, self.cancelled = callback, args, False

    def cancel(self) -> None:
        self.cancelled = True


class _Loop:
    """A loop whose timers run when the test says."""

    def __init__(self) -> None:
        self.timers: list[_Timer] = []

    def call_later(self, _delay: float, callback: Any, *args: Any) -> _Timer:
        self.timers.append(_Timer(callback, args))
        return self.timers[-1]

    def fire(self) -> None:
        timer = self.timers.pop(0)
        assert not timer.cancelled
        timer.callback(*timer.args)


def _stalled_protocol() -> tuple[Any, _Transport, _Loop]:
    protocol_class = deadlines(10, 10)
    protocol: Any = protocol_class.__new__(protocol_class)
    transport, loop = _Transport(), _Loop()
    protocol.transport, protocol.loop = transport, loop
    protocol._send_timer = None
    return protocol, transport, loop


def test_a_reader_taking_its_minimum_each_window_is_kept_and_one_taking_less_is_cut() -> None:
    from actionspace.service.slow_clients import MIN_SEND_PROGRESS

    protocol, transport, loop = _stalled_protocol()
    transport.buffered = 10 * MIN_SEND_PROGRESS
    protocol._sending_paused()
    for _ in range(5):  # each window the client takes its minimum: the answer goes on
        transport.buffered -= MIN_SEND_PROGRESS
        loop.fire()
        assert not transport.aborted
    transport.buffered -= MIN_SEND_PROGRESS - 1  # one byte short of the minimum
    loop.fire()
    assert transport.aborted and loop.timers == []


def test_sending_resumed_stops_the_deadline() -> None:
    protocol, transport, loop = _stalled_protocol()
    transport.buffered = 100
    protocol._sending_paused()
    assert len(loop.timers) == 1
    protocol._sending_resumed()
    assert loop.timers[0].cancelled and not transport.aborted
