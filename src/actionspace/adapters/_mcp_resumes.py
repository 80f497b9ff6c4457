"""Resuming an MCP server's dropped SSE answer, and its notification stream, over streamable HTTP: a
bounded number of times.

When a request's SSE answer ends after an event with an id and before the answer, the client asks for
the rest with a GET carrying ``Last-Event-ID``. The SDK does so by recursion and starts its count again
whenever a resumed stream is dropped in turn, so a server that drops every answer after one event
holds the request until its answer deadline, one GET after another (and ``subscriptions/listen``, which
has no deadline, for ever). Here a request's answer is resumed at most :data:`MAX_RESUMES` times in
all, in a loop:

* before resume ``n`` (from 0) the client waits the server's last ``retry``, but at least a floor that
  doubles each time (:data:`RESUME_FLOOR_S` × 2ⁿ) and at most :data:`RESUME_MOST_S`
  (:func:`resume_delay`);
* a resume that fails (a lost connection, an error status, a stream dropped again) counts as one;
  once all are spent, the request ends with ``CONNECTION_CLOSED`` (``transient`` for a read,
  ``unknown_commit`` for a write, in ``_mcp_errors``);
* a resumed answer that is not an SSE stream, or whose event is over the bound, ends the request at
  once; so does one in a content coding that is not undone here, or broken (``MALFORMED_ANSWER``).

The GET stream that carries the server's own notifications is reconnected by the SDK whenever it
ends, and its count of failures starts again whenever the server accepted the stream: a server that
accepts it and drops it at once is asked again every second for the session's life. Here it is taken
again only while fewer than :data:`MAX_NOTICE_RECONNECTS` streams in a row failed (an error status, a
lost connection, or an end before any JSON-RPC message), after :func:`resume_delay` for that count;
then it is given up for the session, logged once, and calls go on without it. A stream whose
connection failed (cut, or not made) may say the server went away: the session is asked whether it
is still there (``_mcp_reconnect.STREAM_DROPPED``), so a server that died while idle is noticed before
the next call. A stream that brought a message starts the count again: that server is working (as
one that keeps its stream open and sends one a second is). A 405 answer means the server offers no
such stream: it is not asked again. An answer to a request on that stream (where the protocol allows
none) is dropped: the SDK would take it as the answer of the request in flight with that id, before
(and instead of) the one on its own stream.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

import anyio
import httpx2
from mcp.client.streamable_http import LAST_EVENT_ID, RequestContext, StreamableHTTPTransport, StreamWriter
from mcp_types import (
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError

from actionspace.adapters._mcp_codings import Undecodable
from actionspace.adapters._mcp_errors import MALFORMED_ANSWER
from actionspace.adapters._mcp_reconnect import STREAM_DROPPED
from actionspace.adapters._mcp_redirects import events_within_origin, unfollowed
from actionspace.adapters._mcp_stdio import unheard

__all__ = [
    "MAX_NOTICE_RECONNECTS",
    "MAX_RESUMES",
    "RESUME_FLOOR_S",
    "RESUME_MOST_S",
    "ResumingTransport",
    "resume_delay",
    "skipped",
]

_log = logging.getLogger("actionspace.mcp")

MAX_RESUMES: Final = 4
"""Most GETs that resume one request's dropped answer, in all (however many events each brought)."""
RESUME_FLOOR_S: Final = 0.25
"""Least wait before the first resume, in seconds; doubled before each further one (``retry: 0`` and
a stream dropped at once would otherwise be a busy loop)."""
RESUME_MOST_S: Final = 30.0
"""Longest wait before one resume, in seconds, whatever ``retry`` the server asked for."""
MAX_NOTICE_RECONNECTS: Final = 5
"""Most notification streams (GETs) in a row that may fail before that stream is given up for the
session; one that brings a JSON-RPC message starts the count again."""


def resume_delay(attempt: int, retry_ms: int | None) -> float:
    """Seconds to wait before resume number ``attempt`` (from 0): the server's ``retry_ms`` (None: not
    given), at least ``RESUME_FLOOR_S × 2**attempt``, at most :data:`RESUME_MOST_S`."""
    asked = 0.0 if retry_ms is None else max(retry_ms, 0) / 1000
    floor = RESUME_FLOOR_S * float(1 << min(attempt, 16))
    return min(max(asked, floor), RESUME_MOST_S)


@dataclass(slots=True)
class _Resumed:
    """Where a dropped answer stands: the last event id seen and the server's last ``retry``."""

    last_id: str
    retry_ms: int | None


class ResumingTransport(StreamableHTTPTransport):
    """The SDK's transport, resuming a dropped answer in a bounded loop (see the module docstring)."""

    async def _handle_reconnection(
        self,
        ctx: RequestContext,
        last_event_id: str,
        retry_interval_ms: int | None = None,
        attempt: int = 0,
    ) -> None:
        message = ctx.session_message.message
        assert isinstance(message, JSONRPCRequest)  # only a request's answer is resumed
        writer, request_id = ctx.read_stream_writer, message.id
        where = _Resumed(last_event_id, retry_interval_ms)
        for number in range(attempt, MAX_RESUMES):
            await anyio.sleep(resume_delay(number, where.retry_ms))
            try:
                if await self._resume_once(ctx, request_id, where):
                    return
            except Undecodable as exc:
                said = f"the server's answer was malformed: {exc}"[:500]
                await self._resolve_abandoned_request(writer, request_id, said, code=MALFORMED_ANSWER)
                return
            except httpx2.SSEError as exc:  # not an event stream, or an event over the bound
                await self._resolve_abandoned_request(writer, request_id, f"SSE stream failed: {exc}")
                return
            except httpx2.HTTPError as exc:
                _log.info("MCP request %r: resuming its answer failed: %s", request_id, type(exc).__name__)
        _log.warning("MCP request %r: no answer after %d resumes; given up", request_id, MAX_RESUMES)
        said = f"the answer's stream ended without the answer and was resumed {MAX_RESUMES} times"
        await self._resolve_abandoned_request(writer, request_id, said)

    async def _resume_once(self, ctx: RequestContext, request_id: RequestId, where: _Resumed) -> bool:
        """One GET resuming the answer from ``where``; True once the answer (or an error) was given.

        Raises ``httpx2.HTTPError`` for a failed GET (an error status too)."""
        headers = {**self._prepare_headers(), LAST_EVENT_ID: where.last_id}
        on_token = ctx.metadata.on_resumption_token_update if ctx.metadata else None
        async with events_within_origin(
            ctx.client, self.url, headers=headers, max_event_size=self.max_sse_event_size
        ) as source:
            source.response.raise_for_status()
            async for sse in source:
                if sse.id:
                    where.last_id = sse.id
                if sse.retry is not None:
                    where.retry_ms = sse.retry
                if await self._handle_sse_event(sse, ctx.read_stream_writer, request_id, on_token):
                    await source.response.aclose()
                    return True
        return False

    async def handle_get_stream(self, client: httpx2.AsyncClient, read_stream_writer: StreamWriter) -> None:
        """The server's notification stream, taken again a bounded number of times in a row (see the
        module docstring); the SDK's own loop takes it again for ever once the server accepted it."""
        where = _Resumed("", None)
        failures = 0
        dropped = STREAM_DROPPED.get()  # the session is asked whether it is still there
        while self.session_id:
            try:
                delivered = await self._notices_once(client, read_stream_writer, where)
            except _NoStream as exc:
                _log.info("MCP server at %s: %s", _logged(self.url), exc)
                return
            except Exception as exc:  # anything the stream raises ends this stream only, as in the SDK
                what = type(exc).__name__  # its words may hold the URL's query, or the server's
                _log.info("MCP server at %s: its notification stream failed: %s", _logged(self.url), what)
                delivered = False
                if dropped is not None and isinstance(exc, httpx2.TransportError):
                    dropped()
            failures = 0 if delivered else failures + 1
            if failures >= MAX_NOTICE_RECONNECTS:
                _log.warning(
                    "MCP server at %s: its notification stream failed %d times in a row; given up for "
                    "this session (calls go on without it)",
                    _logged(self.url),
                    failures,
                )
                return
            await anyio.sleep(resume_delay(failures, where.retry_ms))

    async def _notices_once(self, client: httpx2.AsyncClient, writer: StreamWriter, where: _Resumed) -> bool:
        """One notification stream, read to its end; True when it brought a JSON-RPC message.

        Raises :class:`_NoStream` when the server offers none (405, a redirect not followed) and
        ``httpx2.HTTPError`` for a failed GET (an error status too)."""
        headers = self._prepare_headers()
        if where.last_id:
            headers[LAST_EVENT_ID] = where.last_id
        delivered = False
        async with events_within_origin(
            client, self.url, headers=headers, max_event_size=self.max_sse_event_size
        ) as source:
            if (redirect := unfollowed(source.response)) is not None:
                raise _NoStream(f"its notification stream was not opened: {redirect}"[:500])
            if source.response.status_code == 405:
                raise _NoStream("it offers no notification stream (405)")
            source.response.raise_for_status()
            async for sse in source:
                if sse.id:
                    where.last_id = sse.id
                if sse.retry is not None:
                    where.retry_ms = sse.retry
                message = _message(sse.data) if sse.event == "message" and sse.data else None
                if isinstance(message, JSONRPCResponse | JSONRPCError):
                    _log.info(
                        "MCP server at %s: an answer on its notification stream ignored", _logged(self.url)
                    )
                    continue
                delivered = delivered or message is not None
                if message is not None and (unheard(message) or not await self._served(message, writer)):
                    continue  # a log or progress note, say, or a request past the bound
                await self._handle_sse_event(sse, writer)
        return delivered

    async def _served(self, message: JSONRPCMessage | None, writer: StreamWriter) -> bool:
        """Whether a message of the server goes to the session (``_mcp_http`` bounds its requests)."""
        return True


class _NoStream(Exception):
    """The server offers no notification stream: it is not asked again."""


def _message(data: str) -> JSONRPCMessage | None:
    """The JSON-RPC message an event carries, or None."""
    try:
        return jsonrpc_message_adapter.validate_json(data, by_name=False)
    except ValidationError:
        return None


def _logged(url: str) -> str:
    """The endpoint as logged: without what may carry a credential."""
    return str(httpx2.URL(url).copy_with(userinfo=b"", query=None, fragment=None))


async def skipped(
    sse: httpx2.ServerSentEvent, resumption_callback: Callable[[str], Awaitable[None]] | None
) -> bool:
    """Drop an event the session would not act on, keeping its id as the point to resume from."""
    if sse.id and resumption_callback is not None:
        await resumption_callback(sse.id)
    return False
