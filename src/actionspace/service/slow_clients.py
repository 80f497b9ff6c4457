"""The HTTP/1.1 protocol ``actionspace serve`` and ``actionspace gateway`` run uvicorn with: deadlines.

uvicorn (h11) waits for a request's line, headers and body for as long as the client takes: a
client that opens connections and sends a byte every few seconds (a "slowloris") holds each one,
and the server's shutdown with them, for ever. :class:`Deadlines` gives every request head
``head_timeout_s`` from the moment the connection may send one (opened, or the last response
sent), and its body ``body_timeout_s`` from the end of its head. A request late on either is
answered 408 (when nothing of a response was sent yet) and its connection closed; a route still
reading the body sees the client gone. Sending has a deadline too: a client that asks and does not
read (its window shut, the server's send buffer full) would hold its connection, the answer waiting
on it, the shutdown and, at the cap below, every later client's turn; once writing to it is paused
(or its connection closed with bytes unsent), a client that takes less than
:data:`MIN_SEND_PROGRESS` bytes of what waits within ``send_timeout_s`` is cut off (aborted: nothing
more can reach it). Only uvicorn's h11 protocol is covered (the one it runs without the optional
``httptools``); :func:`deadlines` builds the class ``uvicorn.Config(http=)`` takes.

It also caps the connections served at once (``max_connections``; ``serve`` sets
:data:`DEFAULT_MAX_CONNECTIONS`): a connection made while that many are open is answered at once,
before it sends anything, a 503 with the API's error body (category ``transient``,
``Retry-After: 1``) without reaching the application, and its sending side is closed. What the client
sends after is read and dropped (closing a socket with unread bytes resets it, and a client that
sent its request before reading could lose the answer) until it closes its side, for a second at
most. uvicorn's own ``limit_concurrency`` answers plain text, and refuses whichever connection asks
next, an old keep-alive one too; here the newest one is refused.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, ClassVar, Final, cast

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from actionspace.service.limits import DEFAULT_BODY_TIMEOUT_S, category_of

__all__ = [
    "DEFAULT_BODY_TIMEOUT_S",
    "DEFAULT_HEAD_TIMEOUT_S",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_SEND_TIMEOUT_S",
    "MIN_SEND_PROGRESS",
    "Deadlines",
    "deadlines",
]

DEFAULT_HEAD_TIMEOUT_S: Final = 10.0
"""Seconds a request's line and headers may take to arrive, by default."""
DEFAULT_SEND_TIMEOUT_S: Final = 60.0
"""Seconds a response may wait on a client that takes less than :data:`MIN_SEND_PROGRESS` of it."""
MIN_SEND_PROGRESS: Final = 64 * 1024
"""Bytes a client must take of a response waiting on it within each ``send_timeout_s`` (about
1 KiB/s by default): a slow link passes, a client that reads nothing or a trickle does not."""
_OVER_CAP_LINGER_S: Final = 1.0
"""Seconds a connection answered and ended by the server (over the cap, or too slow) is read, what
it sends dropped, before it is closed, if the client has not closed it first."""
DEFAULT_MAX_CONNECTIONS: Final = 512
"""Connections ``actionspace serve`` serves at once, by default: far more than its worker threads
answer at a time (so clients queue rather than fail), well under the common limit of 1024 open
files a process gets (so the stores keep theirs)."""


class Deadlines(H11Protocol):
    """uvicorn's h11 protocol, with a deadline on each request head and body (see the module docstring)."""

    head_timeout_s: ClassVar[float] = DEFAULT_HEAD_TIMEOUT_S
    body_timeout_s: ClassVar[float] = DEFAULT_BODY_TIMEOUT_S
    send_timeout_s: ClassVar[float] = DEFAULT_SEND_TIMEOUT_S
    max_connections: ClassVar[int | None] = None
    """Most connections served at once (None: no cap); see the module docstring."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._timer: asyncio.TimerHandle | None = None
        self._send_timer: asyncio.TimerHandle | None = None
        self._unsent = 0
        """Bytes the transport held when the send deadline was (re)armed."""
        self._awaited: Any = None
        """The h11 state of the client the timer waits to see left (IDLE: a head, SEND_BODY: a body)."""
        self._refused = False
        self._linger: asyncio.TimerHandle | None = None
        # uvicorn closes a connection whose request it answered before reading all of its body: seen
        # through _DrainedClose, that close drains first (see _drained)
        super().connection_made(cast(asyncio.Transport, _DrainedClose(transport, self)))
        cap = self.max_connections
        if cap is not None and len(self.connections) > cap:
            self._refuse(cap)
        else:
            self._follow()

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # answered already: read and dropped, so that closing resets nothing
        super().data_received(data)
        self._follow()

    def _refuse(self, cap: int) -> None:
        """Answer a connection over the cap its 503 now: it does not depend on the request, so no
        head is waited for. The answer, then the end of what this side sends (where the transport
        can half-close; TLS cannot, and the client's close or the deadline ends it alike)."""
        message = f"the server serves {cap} connections at once, the most it may; try again shortly"
        self._answered_then_drained(_answer(503, "Service Unavailable", message, retry_after=True))

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.transport.is_closing():  # uvicorn closed it after this response (Connection: close)
            self._closing()
        self._follow()

    def timeout_keep_alive_handler(self) -> None:
        super().timeout_keep_alive_handler()
        self._closing()

    def shutdown(self) -> None:
        super().shutdown()
        self._closing()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop()
        if self._linger is not None:
            self._linger.cancel()
        self._sending_resumed()
        super().connection_lost(exc)

    def pause_writing(self) -> None:
        super().pause_writing()
        self._sending_paused()

    def resume_writing(self) -> None:
        super().resume_writing()
        self._sending_resumed()

    def _sending_paused(self) -> None:
        """The client stopped taking bytes as fast as they come: arm the send deadline."""
        if self._send_timer is None:
            self._unsent = self.transport.get_write_buffer_size()
            self._send_timer = self.loop.call_later(self.send_timeout_s, self._send_deadline)

    def _sending_resumed(self) -> None:
        if self._send_timer is not None:
            self._send_timer.cancel()
        self._send_timer = None

    def _closing(self) -> None:
        """Bound a closed connection's last bytes: asyncio ends it only once they are sent, which
        a client that reads nothing never lets happen. With no high-water mark left, any byte
        still held pauses writing, which arms the send deadline."""
        if self.transport.is_closing() and self.transport.get_write_buffer_size():
            self.transport.set_write_buffer_limits(high=0)

    def _close(self) -> None:
        self.transport.close()
        self._closing()

    def _send_deadline(self) -> None:
        """Cut off a client that took less than its minimum of what waits; else wait once more."""
        self._send_timer = None
        left = self.transport.get_write_buffer_size()
        if left == 0:
            return
        if self._unsent - left < MIN_SEND_PROGRESS:
            self.transport.abort()  # close() would wait for the bytes to go, that is for ever
            return
        self._sending_paused()

    def send_400_response(self, msg: str) -> None:
        """What uvicorn answers a request h11 cannot read (headers over its size limit, a bad request
        line), as the API's error body instead of plain text."""
        if self.conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            self.transport.write(
                _answer(400, "Bad Request", f"{msg} (malformed, or its headers are too large)")
            )
        self._close()

    def _follow(self) -> None:
        """Arm the deadline of what the client sends now, or none once its request is in."""
        state = self.conn.their_state
        if self.transport.is_closing() or state not in (h11.IDLE, h11.SEND_BODY):
            self._stop()
        elif state is not self._awaited:
            self._stop()
            seconds = self.head_timeout_s if state is h11.IDLE else self.body_timeout_s
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
            self._answered_then_drained(_answer(408, "Request Timeout", message))
            return
        self._close()

    def _answered_then_drained(self, answer: bytes) -> None:
        """Write ``answer``, end what this side sends, and read and drop what the client still sends
        until it closes, a second at most: closing a socket with unread bytes resets it, and the
        reset can reach the client before it has read the answer (a client trickling its body does
        not stop writing because an answer came)."""
        self.transport.write(answer)
        self._drained()

    def _drained(self) -> None:
        """End what this side sends and read and drop what the client still sends, until it closes
        or :data:`_OVER_CAP_LINGER_S` passed (once: an answer drained already is not drained again)."""
        if self._linger is not None:
            return
        self._refused = True
        self.transport.resume_reading()  # read on even where the body's flow control paused it
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self._linger = self.loop.call_later(_OVER_CAP_LINGER_S, self._close)


class _DrainedClose:
    """A connection's transport as uvicorn sees it: its ``close()``, while the client is still sending
    the request's body (an answer given before reading it all: a 408, a 413), drains first
    (:meth:`Deadlines._drained`): closing with bytes unread would reset the connection, and the
    reset throws away the answer the client has not read yet. Everything else is the transport's."""

    def __init__(self, transport: asyncio.Transport, protocol: Deadlines) -> None:
        self._transport = transport
        self._protocol = protocol
        self._draining = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)

    def close(self) -> None:
        if self._draining or self._protocol.conn.their_state is not h11.SEND_BODY:
            self._transport.close()
            return
        self._draining = True
        self._protocol._drained()

    def is_closing(self) -> bool:
        return self._draining or self._transport.is_closing()


def deadlines(
    head_s: float = DEFAULT_HEAD_TIMEOUT_S,
    body_s: float = DEFAULT_BODY_TIMEOUT_S,
    *,
    max_connections: int | None = None,
    send_s: float = DEFAULT_SEND_TIMEOUT_S,
) -> type[Deadlines]:
    """:class:`Deadlines` with these deadlines, in seconds (a class, as ``uvicorn.Config(http=)`` takes),
    serving at most ``max_connections`` connections at once (None: no cap); a client must take
    :data:`MIN_SEND_PROGRESS` bytes of a response waiting on it every ``send_s``.

    Raises ValueError unless the deadlines are positive and the cap, when given, is an int ≥ 1.
    """
    if not (head_s > 0 and body_s > 0 and send_s > 0):
        raise ValueError(
            f"deadlines must be positive, got head {head_s!r} s, body {body_s!r} s and send {send_s!r} s"
        )
    if max_connections is not None and (
        isinstance(max_connections, bool) or not isinstance(max_connections, int) or max_connections < 1
    ):
        raise ValueError(f"max_connections must be an int of at least 1, got {max_connections!r}")
    attrs: dict[str, Any] = {
        "head_timeout_s": float(head_s),
        "body_timeout_s": float(body_s),
        "send_timeout_s": float(send_s),
        "max_connections": max_connections,
    }
    return type("Deadlines", (Deadlines,), attrs)


def _answer(status: int, reason: str, message: str, *, retry_after: bool = False) -> bytes:
    """A whole HTTP/1.1 response carrying the API's error body; the connection closes after it
    (``retry_after``: it says ``Retry-After: 1``)."""
    body = json.dumps({"error": {"message": message, "category": category_of(status)}}).encode()
    retry = "retry-after: 1\r\n" if retry_after else ""
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\nconnection: close\r\n"
        f"{retry}x-content-type-options: nosniff\r\ncontent-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body
