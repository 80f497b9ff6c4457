"""The MCP client's stdio transport: the SDK's process handling, with a linear, bounded reader.

The SDK's ``stdio_client`` joins a line's pieces by concatenating strings, so one long line costs
time quadratic in its length: a hostile server's 100 MB result keeps the connection's thread busy
for minutes, and every other call to that server waits. Here a line is gathered in a byte buffer
(linear), and a line longer than :data:`MAX_MESSAGE_BYTES` is never kept: it is read through to
its end and answered, for the request it names, with a ``RESULT_TOO_LARGE`` error
(``_mcp_errors``), so the call ends at once as a typed error instead of at its timeout. So is a
line holding more JSON objects and arrays than ``_mcp_bounds`` takes, before it is parsed.
A line the types refuse is looked at again (``_mcp_answers``): an answer whose ``result`` is not an
object, or one holding both a result and an error, ends the request it names with ``MALFORMED_ANSWER``
at once (the SDK drops the first, so its call waits for its timeout); a message glued to junk (the
rest of a line left unended, as by a call cancelled while its answer was being written: this buffer,
not the SDK's, holds those bytes) is read whole from where it starts, the junk reported and dropped,
within a budget of bytes parsed (``_mcp_answers.glued_budget``); past it, a request in flight that the
rest of the line names ends as malformed. Every answer is matched to the request in flight under its
exact id, and one without an id to the only request in flight, if there is one (``_mcp_inflight``).
A notification the session does nothing with (:func:`unheard`: a log message, a progress note, a
resource update, anything but a tool list change, a cancellation or a ``subscriptions/listen`` frame)
is dropped here: this client asks for none of them (no logging callback, no progress token, no cache),
and the SDK would spend a task, a second validation and a rendezvous on each before doing nothing with
it (about 230 µs of wall time a notification, measured; for a chatty server most of its traffic, and a
server flooding 200,000 resource updates held every call for over a minute). A request from the
server goes to the session only while fewer than ``_mcp_inflight.MAX_SERVED`` of its requests wait
for their answer: the SDK spawns a task per request, and one whose answer cannot be written (a server
that does not read its input) would hold that task, and its memory, for ever.
Writing is ``_mcp_pipe``'s: a request that cannot be handed to a server that stops reading its input
within its bound ends unsent instead of waiting for its timeout behind the stalled write.
Starting, stopping (stdin closed, SIGTERM, SIGKILL to the process group) and draining are ``_mcp_process``'s
(the SDK's helpers where it has them).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import asynccontextmanager
from typing import Final

import anyio
import mcp_types as types
from mcp import StdioServerParameters
from mcp.shared.message import SessionMessage

from actionspace.adapters._mcp_answers import (
    GLUED_BUDGET_LINES,
    answer_members,
    glued_budget,
    glued_starts,
    holds_both,
)
from actionspace.adapters._mcp_bounds import MAX_CONTAINERS, too_structured
from actionspace.adapters._mcp_errors import RESULT_TOO_LARGE
from actionspace.adapters._mcp_inflight import Asked, malformed
from actionspace.adapters._mcp_pipe import Outbox, pipe_of
from actionspace.adapters._mcp_process import drain_output, environment, start_process, stop_process
from actionspace.adapters._mcp_reconnect import SESSION_LOST
from actionspace.adapters._mcp_streams import Streams

__all__ = ["HEARD", "MAX_MESSAGE_BYTES", "bounded_stdio_client", "unheard"]

MAX_MESSAGE_BYTES: Final = 32 * 1024 * 1024
"""Longest message (one line) taken from a stdio server, in bytes; a longer one is refused."""
_ID: Final = re.compile(rb'"id"\s*:\s*(-?\d{1,18}|"(?:[^"\\]|\\.){0,200}")')
"""A request id near the start of a refused message (the SDK writes ``jsonrpc``, ``id``, ``result``)."""
_ID_WINDOW: Final = 1024
_CANCELLED: Final = "notifications/cancelled"
_SUBSCRIPTION_ID: Final = "io.modelcontextprotocol/subscriptionId"
"""Where a ``subscriptions/listen`` stream's frames name their subscription (the protocol's, as the SDK's
``mcp.shared.subscriptions`` spells it)."""
HEARD: Final = frozenset(
    {
        "notifications/tools/list_changed",
        "notifications/cancelled",
        "notifications/subscriptions/acknowledged",
    }
)
"""The notifications the session acts on (besides the frames of a ``subscriptions/listen`` stream)."""


def unheard(message: types.JSONRPCMessage) -> bool:
    """Whether ``message`` is a notification the session would do nothing with (see the docstring)."""
    if not isinstance(message, types.JSONRPCNotification) or message.method in HEARD:
        return False
    meta = (message.params or {}).get("_meta")
    return not (isinstance(meta, dict) and _SUBSCRIPTION_ID in meta)


class _Lines:
    """Complete lines out of byte chunks, in time linear in their size; too long ones as errors.

    Every answer is matched against the requests in flight (``asked``, see ``_mcp_inflight``)."""

    def __init__(self, limit: int, asked: Asked | None = None) -> None:
        self._limit = limit
        self._asked = Asked() if asked is None else asked
        self._buffer = bytearray()
        self._skipped = 0
        """Bytes of the line being read through (0: not skipping)."""

    def feed(self, chunk: bytes) -> Iterator[SessionMessage | Exception]:
        start = 0
        while (end := chunk.find(b"\n", start)) != -1:
            if self._skipped:
                size, self._skipped = self._skipped + end - start, 0
                yield from self._matched([self._refused(size)])
            else:
                self._buffer += chunk[start:end]
                yield from self._matched(self._parsed(bytes(self._buffer)))
            self._buffer.clear()
            start = end + 1
        rest = len(chunk) - start
        if self._skipped:
            self._skipped += rest
        elif len(self._buffer) + rest > self._limit:
            self._buffer += chunk[start : start + _ID_WINDOW]
            self._skipped = len(self._buffer) + max(0, rest - _ID_WINDOW)
            self._buffer[_ID_WINDOW:] = b""
        else:
            self._buffer += chunk[start:]

    def _matched(self, items: Iterable[SessionMessage | Exception]) -> Iterator[SessionMessage | Exception]:
        """Each answer as the request in flight it names gets it (``Asked.answer``); a request of the
        server while too many of its requests wait for their answers, as an error (``Asked.serve``); a
        request the server cancels no longer waits (``Asked.withdrawn``)."""
        for item in items:
            if not isinstance(item, SessionMessage):
                yield item
            elif isinstance(item.message, types.JSONRPCResponse | types.JSONRPCError):
                yield self._asked.answer(item.message)
            elif isinstance(item.message, types.JSONRPCRequest):
                yield self._asked.serve(item)
            else:
                if isinstance(item.message, types.JSONRPCNotification) and item.message.method == _CANCELLED:
                    self._asked.withdrawn(item.message)
                yield item

    def _refused(self, size: int) -> SessionMessage | Exception:
        said = f"the server's message of {size} bytes is larger than the {self._limit} taken"
        return _refusal(bytes(self._buffer[:_ID_WINDOW]), said, {"bytes": size})

    def _parsed(self, line: bytes) -> Iterator[SessionMessage | Exception]:
        """The messages of one line: one, a refusal, junk and the message glued to it, or none for one
        the session would not act on."""
        if too_structured(line):  # refused unparsed: parsing alone would take gigabytes
            said = f"the server's message holds more than {MAX_CONTAINERS} JSON objects and arrays"
            yield _refusal(line[:_ID_WINDOW], said, {"bytes": len(line), "limit_containers": MAX_CONTAINERS})
            return
        try:
            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError as exc:
            yield from self._unreadable(line, exc)
            return
        yield from _taken(line, message)

    def _unreadable(self, line: bytes, exc: ValueError) -> Iterator[SessionMessage | Exception]:
        """A line the protocol's types refused: a malformed answer (to the request it names, or, naming
        none, to the one in flight), a message glued to the junk before it (a line left unended), or
        garbage the session logs and goes on. An answer that is not UTF-8 is malformed too: dropped as
        garbage, its call would wait for its timeout (a write ``unknown_commit`` only then)."""
        said = "it is not a JSON-RPC answer (a result must be an object)"
        members = answer_members(line)
        if members is None and (at := _not_utf8(line)) is not None:
            members = answer_members(line.decode(errors="replace"))  # only to find the id it names
            said = f"it is not UTF-8 (byte {at} of {len(line)})"
        if members is not None:
            request_id = members.get("id")
            if request_id is None:  # null or missing: ``Asked.unnamed`` finds the request, if it can
                yield self._asked.unnamed(None)
                return
            if isinstance(request_id, int | str) and not isinstance(request_id, bool):
                yield malformed(request_id, said)
                return
        budget = glued_budget(line)
        for start in glued_starts(line):
            budget -= len(line) - start
            if budget < 0:
                yield from self._unread(line, start)
                return
            try:
                message = types.jsonrpc_message_adapter.validate_json(line[start:], by_name=False)
            except ValueError:
                continue
            yield ValueError(f"{start} bytes of junk before a message on one line were dropped")
            yield from _taken(line[start:], message)
            return
        yield exc

    def _unread(self, line: bytes, start: int) -> Iterator[SessionMessage | Exception]:
        """The line's tries spent their budget at ``start``: a request in flight that the rest of the line
        names may have its answer there, unread; it ends as malformed instead of at its timeout."""
        said = (
            f"a line of {len(line)} bytes holds more glued message starts than are read "
            f"({GLUED_BUDGET_LINES} × its length parsed in all); its answer may be among them"
        )
        named = {found[1] for found in _ID.finditer(line, start)}
        in_flight = self._asked.named(i for i in map(_id_of, named) if i is not None)
        for request_id in in_flight:
            yield malformed(request_id, said)
        if not in_flight:
            yield ValueError(said)


def _not_utf8(line: bytes) -> int | None:
    """Where ``line`` stops being UTF-8, or None when it is UTF-8 throughout."""
    try:
        line.decode()
    except UnicodeDecodeError as exc:
        return exc.start
    return None


def _taken(line: bytes, message: types.JSONRPCMessage) -> Iterator[SessionMessage]:
    """The message read from ``line`` as the session gets it: as it is, as malformed, or not at all."""
    answered = message.id if isinstance(message, types.JSONRPCResponse | types.JSONRPCError) else None
    if answered is not None and holds_both(line, message):
        yield malformed(answered, "it holds both a result and an error")
    elif not unheard(message):
        yield SessionMessage(message)


def _refusal(head: bytes, said: str, data: dict[str, int]) -> SessionMessage | Exception:
    """A ``RESULT_TOO_LARGE`` answer to the request a refused message names near its start."""
    found = _ID.search(head)
    request_id = None if found is None else _id_of(found[1])
    if request_id is None:  # no request to answer: the call ends at its timeout
        return ValueError(said)
    error = types.ErrorData(code=RESULT_TOO_LARGE, message=said, data=data)
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


def _id_of(raw: bytes) -> int | str | None:
    """The id ``_ID`` found, or None for a string JSON cannot read (``"\\q"``: it must not end the reader)."""
    try:
        found: int | str = json.loads(raw)
    except ValueError:
        return None
    return found


@asynccontextmanager
async def bounded_stdio_client(
    params: StdioServerParameters, max_bytes: int = MAX_MESSAGE_BYTES
) -> AsyncIterator[Streams]:
    """Start the server and yield the session's streams; on exit stop it (bounded, shielded)."""
    process = await start_process(
        params.command, params.args, environment(params.env), sys.stderr, params.cwd
    )
    # no await until the task group holds the process: a cancel here would leak it
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    assert process.stdin is not None and process.stdout is not None

    asked = Asked()  # read and write run on one event loop: no lock
    outbox = Outbox(pipe_of(process.stdin), process.stdin, asked)
    lost = SESSION_LOST.get()  # told when the server's output ends: its process is gone

    async def read() -> None:
        lines = _Lines(max_bytes, asked)
        try:
            async with read_writer:
                try:
                    async for chunk in process.stdout:  # type: ignore[union-attr]
                        for item in lines.feed(chunk):
                            await read_writer.send(item)
                    if lost is not None:
                        lost()
                finally:
                    await drain_output(process)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError):
            pass  # the session or our own shutdown closed a stream under the read

    async def write() -> None:
        try:
            await outbox.run()
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_writer.aclose()  # the server cannot read: end the session, not hang a request

    async with anyio.create_task_group() as tg:
        tg.start_soon(read)
        tg.start_soon(write)
        try:
            yield read_stream, outbox
        finally:
            with anyio.CancelScope(shield=True):  # the process is stopped even under a cancel
                read_stream.close()
                outbox.shut()  # its descriptor first: the server sees its input end once stdin closes
                await stop_process(process)
                for stream in (read_stream, read_writer):
                    await stream.aclose()
            tg.cancel_scope.cancel()
