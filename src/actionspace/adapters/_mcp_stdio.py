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
not the SDK's, holds those bytes) is read whole from where it starts, the junk reported and dropped.
A log message or a progress note (:data:`UNHEARD`) is dropped here: this client asks for neither
(no logging callback, no progress token), and the SDK would spend a task, a second validation and
a rendezvous on each before doing nothing with it (about 230 µs of wall time a notification,
measured; for a chatty server most of its traffic).
Starting, stopping (stdin closed, SIGTERM, SIGKILL to the process group) and draining are the SDK's.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Final

import anyio
import mcp_types as types
from mcp import StdioServerParameters
from mcp.client._transport import TransportStreams
from mcp.client.stdio import (
    _create_platform_compatible_process,  # pyright: ignore[reportPrivateUsage]
    _drain_stdout,  # pyright: ignore[reportPrivateUsage]
    _stop_server_process,  # pyright: ignore[reportPrivateUsage]
    get_default_environment,
)
from mcp.shared.message import SessionMessage

from actionspace.adapters._mcp_answers import answered_id, glued_starts, holds_both
from actionspace.adapters._mcp_bounds import MAX_CONTAINERS, too_structured
from actionspace.adapters._mcp_errors import MALFORMED_ANSWER, RESULT_TOO_LARGE

__all__ = ["MAX_MESSAGE_BYTES", "UNHEARD", "bounded_stdio_client"]

MAX_MESSAGE_BYTES: Final = 32 * 1024 * 1024
"""Longest message (one line) taken from a stdio server, in bytes; a longer one is refused."""
_ID: Final = re.compile(rb'"id"\s*:\s*(-?\d{1,18}|"(?:[^"\\]|\\.){0,200}")')
"""A request id near the start of a refused message (the SDK writes ``jsonrpc``, ``id``, ``result``)."""
_ID_WINDOW: Final = 1024
UNHEARD: Final = frozenset({"notifications/message", "notifications/progress"})
"""Notifications the session does nothing with: it sets no logging callback and no progress token."""


class _Lines:
    """Complete lines out of byte chunks, in time linear in their size; too long ones as errors."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._buffer = bytearray()
        self._skipped = 0
        """Bytes of the line being read through (0: not skipping)."""

    def feed(self, chunk: bytes) -> Iterator[SessionMessage | Exception]:
        start = 0
        while (end := chunk.find(b"\n", start)) != -1:
            if self._skipped:
                size, self._skipped = self._skipped + end - start, 0
                yield self._refused(size)
            else:
                self._buffer += chunk[start:end]
                yield from self._parsed(bytes(self._buffer))
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
            yield from _unreadable(line, exc)
            return
        yield from _taken(line, message)


def _taken(line: bytes, message: types.JSONRPCMessage) -> Iterator[SessionMessage]:
    """The message read from ``line`` as the session gets it: as it is, as malformed, or not at all."""
    answered = message.id if isinstance(message, types.JSONRPCResponse | types.JSONRPCError) else None
    if answered is not None and holds_both(line, message):
        yield _malformed(answered, "it holds both a result and an error")
    elif not (isinstance(message, types.JSONRPCNotification) and message.method in UNHEARD):
        yield SessionMessage(message)


def _unreadable(line: bytes, exc: ValueError) -> Iterator[SessionMessage | Exception]:
    """A line the protocol's types refused: a malformed answer to the request it names, a message
    glued to the junk before it (a line left unended), or garbage the session logs and goes on."""
    request_id = answered_id(line)
    if request_id is not None:
        yield _malformed(request_id, "it is not a JSON-RPC answer (a result must be an object)")
        return
    for start in glued_starts(line):
        try:
            message = types.jsonrpc_message_adapter.validate_json(line[start:], by_name=False)
        except ValueError:
            continue
        yield ValueError(f"{start} bytes of junk before a message on one line were dropped")
        yield from _taken(line[start:], message)
        return
    yield exc


def _malformed(request_id: int | str, said: str) -> SessionMessage:
    """A ``MALFORMED_ANSWER`` answer to the request a server's malformed answer names."""
    error = types.ErrorData(code=MALFORMED_ANSWER, message=f"the server's answer was malformed: {said}")
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


def _refusal(head: bytes, said: str, data: dict[str, int]) -> SessionMessage | Exception:
    """A ``RESULT_TOO_LARGE`` answer to the request a refused message names near its start."""
    found = _ID.search(head)
    if found is None:  # no request to answer: the call ends at its timeout
        return ValueError(said)
    request_id: int | str = json.loads(found[1])
    error = types.ErrorData(code=RESULT_TOO_LARGE, message=said, data=data)
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


@asynccontextmanager
async def bounded_stdio_client(
    params: StdioServerParameters, max_bytes: int = MAX_MESSAGE_BYTES
) -> AsyncIterator[TransportStreams]:
    """Start the server and yield the session's streams; on exit stop it (bounded, shielded)."""
    process = await _create_platform_compatible_process(
        command=params.command,
        args=params.args,
        env=get_default_environment() | (params.env or {}),
        errlog=sys.stderr,
        cwd=params.cwd,
    )
    # no await until the task group holds the process: a cancel here would leak it
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    assert process.stdin is not None and process.stdout is not None

    async def read() -> None:
        lines = _Lines(max_bytes)
        try:
            async with read_writer:
                try:
                    async for chunk in process.stdout:  # type: ignore[union-attr]
                        for item in lines.feed(chunk):
                            await read_writer.send(item)
                finally:
                    await _drain_stdout(process)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError):
            pass  # the session or our own shutdown closed a stream under the read

    async def write() -> None:
        try:
            async with write_reader:
                async for message in write_reader:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await process.stdin.send(data.encode())  # type: ignore[union-attr]
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_writer.aclose()  # the server cannot read: end the session, not hang a request

    async with anyio.create_task_group() as tg:
        tg.start_soon(read)
        tg.start_soon(write)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):  # the process is stopped even under a cancel
                read_stream.close()
                write_stream.close()
                await _stop_server_process(process)
                for stream in (read_stream, write_stream, read_writer, write_reader):
                    await stream.aclose()
            tg.cancel_scope.cancel()
