"""The stdio transport's writer: every message written whole and in order to the server's input, and a
request that cannot be handed to the server within its bound refused unsent.

A server that stops reading its input (its process stopped, stuck in a busy loop, or one that never
reads) lets the pipe fill (64 KiB), and a write then waits for as long as it does not read. Written
through ``asyncio``'s pipe transport, a message was taken for sent once it sat in this process's own
buffer, and every later one waited behind the stalled write in the session's hand-over: a call whose
request never left this process ended at its timeout as if the server had it, a write
``unknown_commit``.

Here the messages go to a descriptor of the pipe directly (non-blocking), one at a time, in order, from
one task (:meth:`Outbox.run`), so what went into the pipe is known to the byte:

* a message none of whose bytes went in was not sent, and its sender may take it back. A call's first
  request waits at most :data:`SEND_WITHIN` (the call's ``wait_s``: half its timeout, so that the wait
  never becomes the call's own timeout) for its first bytes to go in; then it is taken back and its sender
  gets an ``UNSENT`` error (``_mcp_errors``): the call ends ``transient``, nothing sent, and the
  connection asks the server whether it is there (``_mcp_liveness``), which ends the session when it is
  not. A sender cancelled first takes its message back the same way; once the pipe is closed or broken,
  a call's first request not begun is refused ``UNSENT`` (any other message: ``ClosedResourceError``).
* a message whose first bytes went in is in doubt until answered (the server may read it), and is
  written to its end even when its sender gave up: a line cut short would glue onto the next one.
"""

from __future__ import annotations

import contextlib
import os
from collections import deque
from contextvars import ContextVar
from types import TracebackType
from typing import Any, Final

import anyio
from anyio.abc import ByteSendStream
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCRequest

from actionspace.adapters._mcp_errors import UNSENT
from actionspace.adapters._mcp_inflight import Asked

__all__ = ["SEND_WITHIN", "Handing", "Outbox", "pipe_of"]


class Handing:
    """How long the first request of a call may wait for its first bytes to go into the server's pipe."""

    __slots__ = ("spent", "within_s")

    def __init__(self, within_s: float) -> None:
        self.within_s = within_s
        self.spent = False
        """Its first request began: the call's later requests (another round of it) are not refused
        unsent, since the server had the call."""


SEND_WITHIN: ContextVar[Handing | None] = ContextVar("SEND_WITHIN", default=None)
"""The bound on the current call's first request (None: it waits as long as its sender does). Set by the
connection around a tool call."""
_NOT_BEGUN: Final = "not a byte of it was written"


class _Queued:
    __slots__ = ("begun", "data", "failure", "message", "taken_back", "written")

    def __init__(self, message: SessionMessage, data: bytes) -> None:
        self.message = message
        self.data = data
        self.written = 0
        self.begun = anyio.Event()
        """Set once its first bytes went into the pipe, or it failed (``failure``)."""
        self.taken_back = False
        self.failure: BaseException | None = None


def _unsent(said: str) -> MCPError:
    return MCPError(code=UNSENT, message=f"the request was not sent: {said}")


def pipe_of(stdin: Any) -> int | None:
    """A descriptor of its own for the pipe behind the process's ``stdin`` (anyio's wrapper of asyncio's
    ``StreamWriter``), non-blocking; None when there is none (it is then written through ``stdin``)."""
    transport = getattr(getattr(stdin, "_stream", None), "transport", None)
    pipe = None if transport is None else transport.get_extra_info("pipe")
    fileno = getattr(pipe, "fileno", None)
    if fileno is None:
        return None
    try:
        fd = os.dup(fileno())  # not inherited by later children, which would hold the pipe open
    except OSError:  # out of descriptors: written through the stream, as before
        return None
    os.set_blocking(fd, False)  # already so (asyncio's), and shared with the process's own
    return fd


class Outbox:
    """The session's write stream (the SDK's ``WriteStream``): each message waits here for :meth:`run` to
    write it, and is taken back unsent when its sender stops waiting first (see the module docstring).

    ``fd``: the pipe's descriptor, owned from here on (closed by :meth:`shut`); None: the messages go to
    ``stream`` instead, and each is taken for sent once handed to it. Used on one event loop."""

    def __init__(self, fd: int | None, stream: ByteSendStream, asked: Asked) -> None:
        self._fd = fd
        self._stream = stream
        self._asked = asked
        self._queue: deque[_Queued] = deque()
        self._wake = anyio.Event()
        self._closed = False
        self._shut = False

    async def send(self, item: SessionMessage, /) -> None:
        """Queue ``item`` and wait until its first bytes went into the pipe (see the module docstring)."""
        handing = SEND_WITHIN.get() if isinstance(item.message, JSONRPCRequest) else None
        first = handing is not None and not handing.spent
        if self._closed:
            raise (
                _unsent(f"the server's input is closed; {_NOT_BEGUN}")
                if first
                else anyio.ClosedResourceError()
            )
        data = item.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
        queued = _Queued(item, data.encode())
        self._queue.append(queued)
        self._wake.set()
        within = handing.within_s if handing is not None and first else None
        try:
            with anyio.move_on_after(within):
                await queued.begun.wait()
        finally:
            if not queued.begun.is_set():  # cancelled, or its bound passed, before a byte went in
                self._take_back(queued)
        if queued.taken_back:
            raise _unsent(f"the server did not read its input for {within:g}s; {_NOT_BEGUN}")
        if queued.failure is not None:
            raise queued.failure if first else anyio.ClosedResourceError()
        if handing is not None:
            handing.spent = True

    def _take_back(self, queued: _Queued) -> None:
        queued.taken_back = True
        with contextlib.suppress(ValueError):  # already failed by a close
            self._queue.remove(queued)

    async def run(self) -> None:
        """Write the queued messages in order until the outbox is closed and empty. Raises ``OSError``
        when the pipe breaks (the server's input closed: its process ended)."""
        try:
            while True:
                while not self._queue:
                    if self._closed:
                        return
                    self._wake = anyio.Event()
                    await self._wake.wait()
                queued = self._queue[0]
                await self._write(queued)
                if self._queue and self._queue[0] is queued:
                    self._queue.popleft()
        except BaseException:
            self._fail()
            raise

    async def _write(self, queued: _Queued) -> None:
        if self._fd is None:
            if self._shut:
                raise anyio.ClosedResourceError
            self._begin(queued)
            await self._stream.send(queued.data)
            return
        view = memoryview(queued.data)
        while queued.written < len(view) and not queued.taken_back:
            if self._shut:
                raise anyio.ClosedResourceError
            try:
                written = os.write(self._fd, view[queued.written :])
            except BlockingIOError:  # the pipe is full: the server is not reading
                await anyio.wait_writable(self._fd)
                continue
            if queued.written == 0:  # no await in between: its answer cannot be read before this
                self._begin(queued)
            queued.written += written

    def _begin(self, queued: _Queued) -> None:
        self._asked.sent(queued.message.message)
        queued.begun.set()

    def _fail(self) -> None:
        """Close: every message not begun is refused (a call's first request ``UNSENT``: nothing of the call
        was sent; any other ``ClosedResourceError``, as the SDK's own streams refuse it)."""
        self._closed = True
        self._wake.set()
        while self._queue:
            queued = self._queue.popleft()
            if queued.begun.is_set():
                continue  # in doubt: its sender already went on
            queued.failure = _unsent(f"the server's input closed; {_NOT_BEGUN}")
            queued.begun.set()

    def shut(self) -> None:
        """Close, and close the pipe's descriptor (the server sees the end of its input once the process's
        own ``stdin`` is closed too); a write under way stops."""
        if self._queue and self._queue[0].begun.is_set():
            self._queue.popleft()  # cut short: the session is ending, no line comes after it
        self._fail()
        self._shut = True
        fd, self._fd = self._fd, None
        if fd is not None:
            anyio.notify_closing(fd)
            os.close(fd)

    async def aclose(self) -> None:
        """The session is done sending: what is queued is still written, later messages are refused."""
        self._closed = True
        self._wake.set()

    async def __aenter__(self) -> Outbox:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
