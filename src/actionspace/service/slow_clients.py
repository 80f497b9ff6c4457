"""The HTTP/1.1 protocol ``actionspace serve`` and ``actionspace gateway`` run uvicorn with: deadlines.

uvicorn (h11) waits for a request's line, headers and body for as long as the client takes: a
client that opens connections and sends a byte every few seconds (a "slowloris") holds each one,
and the server's shutdown with them, for ever. :class:`Deadlines` gives every request head
``head_timeout_s`` from the moment the connection may send one (opened, or the last response
sent), and its body ``body_timeout_s`` from the end of its head. A request late on either is
answered 408 (when nothing of a response was sent yet) and its connection closed; a route still
reading the body sees the client gone. Only uvicorn's h11 protocol is covered (the one it runs
without the optional ``httptools``); :func:`deadlines` builds the class ``uvicorn.Config(http=)``
takes.

It also caps the connections served at once (``max_connections``; ``serve`` sets
:data:`DEFAULT_MAX_CONNECTIONS`): a connection made while that many are open is answered, when its
request arrives, a 503 with the API's error body (category ``transient``, ``Retry-After: 1``)
without reaching the application, and closed. uvicorn's own ``limit_concurrency`` answers plain
text, and refuses whichever connection asks next, an old keep-alive one too; here the newest one
is refused. Such a connection holds a socket until its head arrives, for a second at most.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, ClassVar, Final

import h11
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from actionspace.service.limits import DEFAULT_BODY_TIMEOUT_S, category_of

__all__ = [
    "DEFAULT_BODY_TIMEOUT_S",
    "DEFAULT_HEAD_TIMEOUT_S",
    "DEFAULT_MAX_CONNECTIONS",
    "Deadlines",
    "deadlines",
]

DEFAULT_HEAD_TIMEOUT_S: Final = 10.0
"""Seconds a request's line and headers may take to arrive, by default."""
_OVER_CAP_HEAD_S: Final = 1.0
"""Seconds a connection over the cap has to send its request's head before it is closed."""
DEFAULT_MAX_CONNECTIONS: Final = 512
"""Connections ``actionspace serve`` serves at once, by default: far more than its worker threads
answer at a time (so clients queue rather than fail), well under the common limit of 1024 open
files a process gets (so the stores keep theirs)."""


class Deadlines(H11Protocol):
    """uvicorn's h11 protocol, with a deadline on each request head and body (see the module docstring)."""

    head_timeout_s: ClassVar[float] = DEFAULT_HEAD_TIMEOUT_S
    body_timeout_s: ClassVar[float] = DEFAULT_BODY_TIMEOUT_S
    max_connections: ClassVar[int | None] = None
    """Most connections served at once (None: no cap); see the module docstring."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._timer: asyncio.TimerHandle | None = None
        self._awaited: Any = None
        """The h11 state of the client the timer waits to see left (IDLE: a head, SEND_BODY: a body)."""
        self._head_s = self.head_timeout_s
        super().connection_made(transport)  # counts this connection in self.connections
        cap = self.max_connections
        if cap is not None and len(self.connections) > cap:
            self.app = _over_capacity(cap)  # this connection's requests only; it closes after one
            # its answer is known already: it holds a socket over the cap no longer than a second
            self._head_s = min(self.head_timeout_s, _OVER_CAP_HEAD_S)
        self._follow()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._follow()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop()
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        """What uvicorn answers a request h11 cannot read (headers over its size limit, a bad request
        line), as the API's error body instead of plain text."""
        if self.conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            self.transport.write(
                _answer(400, "Bad Request", f"{msg} (malformed, or its headers are too large)")
            )
        self.transport.close()

    def _follow(self) -> None:
        """Arm the deadline of what the client sends now, or none once its request is in."""
        state = self.conn.their_state
        if self.transport.is_closing() or state not in (h11.IDLE, h11.SEND_BODY):
            self._stop()
        elif state is not self._awaited:
            self._stop()
            seconds = self._head_s if state is h11.IDLE else self.body_timeout_s
            self._awaited = state
            self._timer = self.loop.call_later(seconds, self._too_slow, state, seconds)

    def _stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None
        self._awaited = None

    def _too_slow(self, state: Any, seconds: float) -> None:
        self._timer = None
        self._awaited = None
        if self.transport.is_closing() or self.conn.their_state is not state:
            return
        begun = state is not h11.IDLE or bool(self.conn.trailing_data[0])  # an idle connection: just close
        if begun and self.conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):  # no response begun: say why
            what = "line and headers" if state is h11.IDLE else "body"
            message = f"the request's {what} did not arrive within {seconds:g} s"
            self.transport.write(_answer(408, "Request Timeout", message))
        self.transport.close()


def deadlines(
    head_s: float = DEFAULT_HEAD_TIMEOUT_S,
    body_s: float = DEFAULT_BODY_TIMEOUT_S,
    *,
    max_connections: int | None = None,
) -> type[Deadlines]:
    """:class:`Deadlines` with these deadlines, in seconds (a class, as ``uvicorn.Config(http=)`` takes),
    serving at most ``max_connections`` connections at once (None: no cap).

    Raises ValueError unless both deadlines are positive and the cap, when given, is an int ≥ 1.
    """
    if not (head_s > 0 and body_s > 0):
        raise ValueError(f"request deadlines must be positive, got head {head_s!r} s and body {body_s!r} s")
    if max_connections is not None and (
        isinstance(max_connections, bool) or not isinstance(max_connections, int) or max_connections < 1
    ):
        raise ValueError(f"max_connections must be an int of at least 1, got {max_connections!r}")
    attrs: dict[str, Any] = {
        "head_timeout_s": float(head_s),
        "body_timeout_s": float(body_s),
        "max_connections": max_connections,
    }
    return type("Deadlines", (Deadlines,), attrs)


def _over_capacity(cap: int) -> ASGIApp:
    """The application a connection over the cap is served: a typed 503, then the connection closes."""
    message = f"the server serves {cap} connections at once, the most it may; try again shortly"
    body = json.dumps({"error": {"message": message, "category": category_of(503)}}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
        (b"retry-after", b"1"),
        (b"x-content-type-options", b"nosniff"),
    ]

    async def refuse(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 503, "headers": headers})
        await send({"type": "http.response.body", "body": body, "more_body": False})

    return refuse


def _answer(status: int, reason: str, message: str) -> bytes:
    """A whole HTTP/1.1 response carrying the API's error body; the connection closes after it."""
    body = json.dumps({"error": {"message": message, "category": category_of(status)}}).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\nconnection: close\r\n"
        f"x-content-type-options: nosniff\r\ncontent-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body
