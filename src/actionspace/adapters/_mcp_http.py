"""The MCP client's streamable HTTP transport: the SDK's, with every answer bounded and checked.

The SDK's transport reads a JSON answer whole, however large (a 100 MB body, or a gzip bomb that
inflates to gigabytes, is held in memory and can end the session with a ``MemoryError``), and so
the JSON body of an error status; it allows 1 MiB per SSE event and reports a larger one as a lost
connection (so a read is retried and the server sends it again); it passes an SSE answer for
another request id as this request's answer; it keeps reading a handshake-era request's response
after the request was cancelled (a stream of whitespace or keep-alive comments holds it for ever);
and a connection cut mid-answer ends the whole session. Here:

* an answer (a JSON body, decoded, or one SSE event) over :data:`MAX_MESSAGE_BYTES` ends its
  request at once with ``RESULT_TOO_LARGE``, and the rest is never read; so does one holding
  more JSON objects and arrays than ``_mcp_bounds`` takes, before it is parsed;
* an answer that is not JSON-RPC (invalid UTF-8, bad JSON), that holds both a result and an error
  (``_mcp_answers``) or that names another request id (or this one's as another type: the string
  ``"1"`` for request ``1``) ends its request at once with ``MALFORMED_ANSWER`` (``_mcp_errors`` maps
  both);
* the JSON body of an error status is read within the same bound (the SDK reads it whole);
* a body's content coding is undone here (``_mcp_codings``), not by the HTTP library: ``gzip``,
  ``deflate`` (zlib-wrapped or raw) and ``identity``, inflated in bounded pieces as the answer is read,
  so a bomb never holds more than the bound and a piece; an answer in any other coding or whose
  compressed stream is broken or cut short ends its request with ``MALFORMED_ANSWER``;
* a connection cut mid-answer ends that request (``CONNECTION_CLOSED``), not the session; an SSE
  answer dropped after an event with an id is resumed, but only :data:`_mcp_resumes.MAX_RESUMES`
  times (the SDK resumes until the answer deadline, and ``subscriptions/listen`` for ever);
* a redirect's own body is never read (the SDK reads it whole); a request follows at most
  :data:`MAX_REDIRECTS` redirects, each within the endpoint's origin and keeping its method; any other
  3xx answer (a loop, another origin, a scheme that is not HTTP, a Location that is no URL, no
  Location, a POST turned into a GET) ends its request with ``REDIRECT_REFUSED`` (the SDK would take
  the JSON body of some as the answer);
* a cancelled request's response stream is closed at every protocol revision, and no request's
  response is read for longer than ``answer_timeout_s`` (``REQUEST_TIMEOUT``), except the
  ``subscriptions/listen`` stream, which is meant to stay open;
* a GET stream (for server notifications, or resuming an answer) is taken at most once per
  :data:`_GET_PACE_S`, whatever reconnection delay the server asks for; the notification stream is
  given up after :data:`_mcp_resumes.MAX_NOTICE_RECONNECTS` failed ones in a row (the SDK takes it
  again for ever once the server accepted it), and an answer to a request on it is dropped;
* the POST of a notification (or of an answer to the server) is waited for at most
  :data:`_NOTICE_TIMEOUT_S`, and no body but a request's answer is read; a POST of a notification
  that fails (a reset connection) is logged and the session goes on (the SDK would end it). The SDK
  POSTs a notification before it takes its next message, so a cancelled request's
  ``notifications/cancelled`` is POSTed beside them (``_mcp_served.post_aside``): a server that does
  not take it (one stopped) held every later call up to 10 s;
* a notification the session does nothing with (``_mcp_stdio.unheard``: a log message, a progress
  note...) is dropped here (on the notification stream, by ``_mcp_resumes``), as over stdio;
* a request answered ``404`` to the session id (the server restarted), or whose connection cannot be
  made, ends ``UNDELIVERED`` (unprocessed), and a new session is opened (``_mcp_reconnect``);
* a request of the server (on an answer's SSE stream, the notification stream or a JSON body) goes to
  the session only while fewer than ``_mcp_inflight.MAX_SERVED`` of them wait for their answer's POST
  to send its body (``_mcp_served``), as over stdio; past the bound one is dropped unanswered. The
  answers are POSTed beside the client's own messages, at most :data:`_ANSWER_POSTS` at a time: the
  SDK sends one message at a time, so an answer a server holds would hold the next call;
* closing the session sends the DELETE the protocol asks for and waits at most
  :data:`CLOSE_TIMEOUT_S` for its status; its body is never read (the SDK reads it whole, so an
  endless body or a bomb would hold the close, and ``Runtime.close()``, for ever).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import Final

import anyio
import httpx2
from anyio.abc import TaskGroup
from mcp.client.streamable_http import RequestContext, StreamWriter
from mcp.shared._context_streams import create_context_streams
from mcp.shared.jsonrpc_dispatcher import cancelled_request_id_from_params
from mcp.shared.message import SessionMessage
from mcp_types import (
    CONNECTION_CLOSED,
    REQUEST_TIMEOUT,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError

from actionspace.adapters import _mcp_redirects
from actionspace.adapters._mcp_answers import error_answer as _error
from actionspace.adapters._mcp_answers import holds_both, other_id, same_id
from actionspace.adapters._mcp_bounds import MAX_CONTAINERS, too_structured
from actionspace.adapters._mcp_codings import ACCEPTED_CODINGS, take_codings
from actionspace.adapters._mcp_codings import Inflating as _Inflating
from actionspace.adapters._mcp_codings import Refused as _Refused
from actionspace.adapters._mcp_codings import Undecodable as _Undecodable
from actionspace.adapters._mcp_errors import (
    MALFORMED_ANSWER,
    REDIRECT_REFUSED,
    RESULT_TOO_LARGE,
    UNDELIVERED,
    SessionExpired,
)
from actionspace.adapters._mcp_inflight import Asked
from actionspace.adapters._mcp_reconnect import SESSION_LOST
from actionspace.adapters._mcp_redirects import MAX_REDIRECTS, RedirectRefused, counting_redirects, redirected
from actionspace.adapters._mcp_resumes import ResumingTransport, skipped
from actionspace.adapters._mcp_served import CANCEL_POSTS, is_cancel, note_sent_body, post_answer, post_aside
from actionspace.adapters._mcp_stdio import unheard
from actionspace.adapters._mcp_streams import Held, Streams

__all__ = ["ACCEPTED_CODINGS", "CLOSE_TIMEOUT_S", "MAX_MESSAGE_BYTES", "bounded_http_client", "take_codings"]

_log = logging.getLogger("actionspace.mcp")

MAX_MESSAGE_BYTES: Final = 32 * 1024 * 1024
"""Longest answer taken from an HTTP server, in bytes (decoded): the stdio transport's bound."""
CLOSE_TIMEOUT_S: Final = 3.0
"""Longest wait for the server's answer to the closing DELETE, in seconds (its body is never read)."""
_NOTICE_TIMEOUT_S: Final = 10.0
"""Longest wait for the POST of a notification or of an answer to the server, in seconds (or the
answer deadline when shorter): the SDK sends nothing else meanwhile, and nothing is read from it."""
_ANSWER_POSTS: Final = 8
"""Most POSTs of the client's answers to the server's requests under way at a time."""
_GET_PACE_S: Final = 1.0
"""Least time between two GET streams taken, in seconds (the SDK's own reconnection delay): the SDK
reconnects after the server's ``retry`` (``retry: 0`` and a closed stream would make it a busy loop)."""
_LONG_LIVED: Final = frozenset({"subscriptions/listen"})
"""Requests whose response stream stays open by design: no answer deadline."""
_ASKING: ContextVar[bool] = ContextVar("_ASKING", default=False)
"""True while this task posts a request, whose error status body the SDK reads as its answer."""


class _BoundedTransport(ResumingTransport):
    def __init__(
        self, url: str, *, client: httpx2.AsyncClient, max_bytes: int, answer_timeout_s: float
    ) -> None:
        super().__init__(url, max_sse_event_size=max_bytes)
        self._client = client
        self._max_bytes = max_bytes
        self._answer_timeout_s = answer_timeout_s
        self._sse_bodies: dict[RequestId, _Inflating] = {}
        """The compressed SSE answer being read per request: a broken one is malformed, not lost."""
        self._where = str(httpx2.URL(url).copy_with(userinfo=b"", query=None, fragment=None))
        """The endpoint as logged: without what may carry a credential."""
        self._next_get = 0.0
        """When the next GET stream may be taken (``anyio.current_time()``): see :data:`_GET_PACE_S`."""
        self._asked = Asked()
        """The server's requests handed to the session whose answers' POSTs have not sent their bodies."""
        self._answer_posts = anyio.CapacityLimiter(_ANSWER_POSTS)
        self._cancel_posts = anyio.CapacityLimiter(CANCEL_POSTS)
        self._lost = SESSION_LOST.get()  # told of a 404 to the session id (``_mcp_reconnect``)
        self.tasks: TaskGroup | None = None
        """Where the answers to the server's requests are POSTed (None: in the SDK's line, one at a time)."""

    def _prepare_headers(self) -> dict[str, str]:
        return {**super()._prepare_headers(), "accept-encoding": ACCEPTED_CODINGS}

    async def _handle_post_request(self, ctx: RequestContext) -> None:
        message, tasks = ctx.session_message.message, self.tasks
        if isinstance(message, JSONRPCResponse | JSONRPCError) and tasks is not None:
            tasks.start_soon(self._post_answer, ctx)
            return
        if is_cancel(message) and tasks is not None:  # not in the SDK's line (``post_aside``)
            post_aside(tasks, self._cancel_posts, lambda: self._post_unanswered(ctx), self._where)
            return
        if not isinstance(message, JSONRPCRequest):
            await self._post_unanswered(ctx)
            return
        long_lived = message.method in _LONG_LIVED
        deadline = None if long_lived else self._answer_timeout_s
        asking = _ASKING.set(True)
        with counting_redirects(), anyio.move_on_after(deadline) as scope:
            try:
                await super()._handle_post_request(ctx)
            except RedirectRefused as exc:
                await self._redirect_refused(ctx.read_stream_writer, message.id, str(exc))
            except SessionExpired as exc:  # not processed: refused unsent, and the session opened anew
                await _error(ctx.read_stream_writer, message.id, UNDELIVERED, str(exc))
            except httpx2.RequestError as exc:  # the SDK would let it end the whole session
                unmade = isinstance(exc, httpx2.ConnectError | httpx2.ConnectTimeout)
                if unmade and not long_lived and self._lost is not None:  # refused unsent; reconnected
                    self._lost()
                    said = f"no connection could be made: {type(exc).__name__}"
                    return await _error(ctx.read_stream_writer, message.id, UNDELIVERED, said)
                if long_lived or unmade:
                    raise  # nothing reached the server, which is gone: the session ends, as before
                said = f"the connection failed: {type(exc).__name__}"
                await self._resolve_abandoned_request(ctx.read_stream_writer, message.id, said)
            finally:
                _ASKING.reset(asking)
        if scope.cancelled_caught:
            said = f"no answer within {self._answer_timeout_s:g}s"
            await self._resolve_abandoned_request(
                ctx.read_stream_writer, message.id, said, code=REQUEST_TIMEOUT
            )

    async def _post_unanswered(self, ctx: RequestContext) -> None:
        """POST a notification or an answer to the server, whose own answer is a status only."""
        with anyio.move_on_after(min(_NOTICE_TIMEOUT_S, self._answer_timeout_s)) as scope:
            try:
                await super()._handle_post_request(ctx)
            except httpx2.HTTPError as exc:  # the SDK would let it end the whole session
                _log.warning(
                    "MCP server at %s: a notification's POST failed: %s", self._where, type(exc).__name__
                )
        if scope.cancelled_caught:
            _log.warning("MCP server at %s: a notification's POST got no answer in time", self._where)

    async def _post_answer(self, ctx: RequestContext) -> None:
        """POST an answer to a request of the server, which is counted until the body is sent."""
        message = ctx.session_message.message
        await post_answer(
            lambda: self._post_unanswered(ctx), lambda: self._asked.sent(message), self._answer_posts
        )

    async def _served(self, message: JSONRPCMessage | None, writer: StreamWriter) -> bool:
        """Whether ``message`` may go to the session: anything but a request of the server past the
        bound (``Asked.serve``), which is dropped unanswered and the session told."""
        if isinstance(message, JSONRPCNotification) and message.method == "notifications/cancelled":
            self._asked.withdrawn(message)
        if not isinstance(message, JSONRPCRequest):
            return True
        taken = self._asked.serve(SessionMessage(message))
        if isinstance(taken, Exception):
            await writer.send(taken)
            return False
        return True

    async def _handle_json_response(
        self, response: httpx2.Response, read_stream_writer: StreamWriter, *, request_id: RequestId
    ) -> None:
        try:
            body = await self._bounded_body(response)
        except _Undecodable as exc:
            await self._malformed(read_stream_writer, request_id, str(exc))
            return
        if body is None:
            await self._refuse(read_stream_writer, request_id, "the server's JSON answer")
            return
        if too_structured(body):
            await self._overstructured(read_stream_writer, request_id, "the server's JSON answer")
            return
        try:
            message = jsonrpc_message_adapter.validate_json(body, by_name=False)
        except ValidationError as exc:
            await self._malformed(
                read_stream_writer, request_id, f"not a JSON-RPC message: {exc.errors()[:1]}"
            )
            return
        if holds_both(body, message):
            await self._malformed(read_stream_writer, request_id, "it holds both a result and an error")
            return
        await self._deliver(message, read_stream_writer, request_id)

    async def _handle_sse_response(self, response: httpx2.Response, ctx: RequestContext) -> None:
        message = ctx.session_message.message
        if not isinstance(message, JSONRPCRequest):  # pragma: no cover - only requests get answers
            await super()._handle_sse_response(response, ctx)
            return
        request_id, stream = message.id, response.stream
        if isinstance(stream, _Refused):
            await self._malformed(ctx.read_stream_writer, request_id, stream.reason)
            return
        if isinstance(stream, _Inflating):
            self._sse_bodies[request_id] = stream
        try:
            await super()._handle_sse_response(response, ctx)
        finally:
            if self._sse_bodies.get(request_id) is stream:
                del self._sse_bodies[request_id]

    async def _handle_sse_event(
        self,
        sse: httpx2.ServerSentEvent,
        read_stream_writer: StreamWriter,
        original_request_id: RequestId | None = None,
        resumption_callback: Callable[[str], Awaitable[None]] | None = None,
    ) -> bool:
        if sse.event != "message" or not sse.data or original_request_id is None:  # None: ``_mcp_resumes``
            return await super()._handle_sse_event(
                sse, read_stream_writer, original_request_id, resumption_callback
            )
        if too_structured(sse.data):
            await self._overstructured(read_stream_writer, original_request_id, "an event of the answer")
            return True
        try:
            message = jsonrpc_message_adapter.validate_json(sse.data, by_name=False)
        except ValidationError as exc:
            said = f"an event that is not a JSON-RPC message: {exc.errors()[:1]}"
            await self._malformed(read_stream_writer, original_request_id, said)
            return True
        if holds_both(sse.data, message):
            said = "an event holding both a result and an error"
            await self._malformed(read_stream_writer, original_request_id, said)
            return True
        if isinstance(message, JSONRPCResponse | JSONRPCError) and not same_id(
            message.id, original_request_id
        ):
            await self._malformed(read_stream_writer, original_request_id, other_id(message.id))
            return True
        if (message is not None and unheard(message)) or not await self._served(message, read_stream_writer):
            return await skipped(sse, resumption_callback)
        return await super()._handle_sse_event(
            sse, read_stream_writer, original_request_id, resumption_callback
        )

    async def _resolve_abandoned_request(
        self,
        read_stream_writer: StreamWriter,
        request_id: RequestId,
        message: str,
        *,
        code: int = CONNECTION_CLOSED,
    ) -> None:
        # The SDK reports an SSE event over the bound as a failed stream: it is an answer too large.
        if code == CONNECTION_CLOSED and f"exceeded the {self._max_bytes} byte limit" in message:
            await self._refuse(read_stream_writer, request_id, "a server-sent event")
            return
        body = self._sse_bodies.get(request_id)
        if code == CONNECTION_CLOSED and body is not None and body.failure is not None:
            await self._malformed(read_stream_writer, request_id, body.failure)
            return
        await super()._resolve_abandoned_request(read_stream_writer, request_id, message, code=code)

    def _consume_modern_cancellation(self, session_message: SessionMessage) -> bool:
        consumed = super()._consume_modern_cancellation(session_message)
        message = session_message.message
        if (
            not consumed
            and isinstance(message, JSONRPCNotification)
            and message.method == "notifications/cancelled"
        ):
            # The frame is still sent (the handshake-era signal); the abandoned response is not read on.
            request_id = cancelled_request_id_from_params(message.params)
            post = self._in_flight_posts.get(request_id) if request_id is not None else None
            if post is not None:
                post.scope.cancel()
        return consumed

    async def bound_answer(self, response: httpx2.Response) -> None:
        """An HTTP response hook: the body's content codings are undone here (:func:`take_codings`), and
        the JSON body of an error status, which the SDK reads whole, is read here within the bound and
        given to the SDK (:class:`Held`); one over it, or undecodable, is dropped (the SDK then answers
        from the status alone). A 3xx answer is left to :func:`_mcp_redirects.redirected`: its body is
        never read. Nor is the error body of any other request (a notification's POST, the GET stream,
        the closing DELETE). A GET stream is taken at most once per :data:`_GET_PACE_S`."""
        if response.request.method == "GET":
            await self._paced_get()
        if response.status_code == 404 and response.request.headers.get("mcp-session-id"):
            if self._lost is not None:  # the server no longer knows the session: it is opened anew
                self._lost()
            if _asking(response):
                raise SessionExpired(f"the server does not know the session ({response.request.method})")
        if 300 <= response.status_code < 400:
            redirected(self._client, response)
            return
        take_codings(response)
        if response.status_code < 400 or not _is_json(response) or not _asking(response):
            return
        raw = response.stream
        try:
            body = await self._bounded_body(response, raw)
        except _Undecodable:
            body = None
        if isinstance(raw, httpx2.AsyncByteStream):  # always, for an async client
            response.stream = Held(body or b"", raw)  # what the SDK's ``aread`` then reads

    async def _paced_get(self) -> None:
        now = anyio.current_time()
        wait, self._next_get = self._next_get - now, max(now, self._next_get) + _GET_PACE_S
        if wait > 0:
            await anyio.sleep(wait)

    async def terminate_session(self, client: httpx2.AsyncClient) -> None:
        """End the session with a DELETE, waiting at most :data:`CLOSE_TIMEOUT_S` for its answer, whose
        body is never read (the SDK reads it whole, however large or slow). Failures are logged."""
        if not self.session_id:
            return
        with anyio.move_on_after(CLOSE_TIMEOUT_S) as scope:
            try:
                async with _mcp_redirects.streamed_within_origin(
                    client, "DELETE", self.url, headers=self._prepare_headers()
                ) as response:
                    status = response.status_code
            except httpx2.HTTPError as exc:
                _log.info("MCP server at %s: ending the session failed: %s", self._where, type(exc).__name__)
                return
            if status not in (200, 202, 204, 405):
                _log.info("MCP server at %s: ending the session was answered %s", self._where, status)
        if scope.cancelled_caught:
            _log.info("MCP server at %s: ending the session got no answer in time", self._where)

    async def _bounded_body(self, response: httpx2.Response, raw: object = None) -> bytes | None:
        """The decoded body (read from ``raw``, the response's stream, when given: the response itself is
        then left unread), or None as soon as it is known to pass the bound (the rest is not read).

        Raises ``_Undecodable`` for a body in a coding not undone here or a broken compressed one."""
        if isinstance(response.stream, _Refused):
            raise _Undecodable(response.stream.reason)
        declared = response.headers.get("content-length", "")
        inflating = isinstance(response.stream, _Inflating)  # its declared length is the compressed one
        if declared.isdigit() and not inflating and int(declared) > self._max_bytes:
            return None
        body = bytearray()
        async for piece in raw if isinstance(raw, httpx2.AsyncByteStream) else response.aiter_bytes():
            if len(body) + len(piece) > self._max_bytes:
                return None
            body += piece
        return bytes(body)

    async def _deliver(self, message: JSONRPCMessage, writer: StreamWriter, request_id: RequestId) -> None:
        if isinstance(message, JSONRPCError) and message.id is None:
            message = JSONRPCError(jsonrpc="2.0", id=request_id, error=message.error)
        if isinstance(message, JSONRPCResponse | JSONRPCError):
            if not same_id(message.id, request_id):
                await self._malformed(writer, request_id, other_id(message.id))
                return
            message.id = request_id
            await writer.send(SessionMessage(message))
            return
        if await self._served(message, writer):  # a request or notification: served, but no answer
            await writer.send(SessionMessage(message))
        await self._malformed(writer, request_id, "the JSON answer held no response")

    async def _refuse(self, writer: StreamWriter, request_id: RequestId, what: str) -> None:
        said = f"{what} is larger than the {self._max_bytes} bytes taken"
        await _error(writer, request_id, RESULT_TOO_LARGE, said, {"limit_bytes": self._max_bytes})

    async def _overstructured(self, writer: StreamWriter, request_id: RequestId, what: str) -> None:
        said = f"{what} holds more than {MAX_CONTAINERS} JSON objects and arrays"
        await _error(writer, request_id, RESULT_TOO_LARGE, said, {"limit_containers": MAX_CONTAINERS})

    async def _redirect_refused(self, writer: StreamWriter, request_id: RequestId, said: str) -> None:
        await _error(writer, request_id, REDIRECT_REFUSED, said[:500])

    async def _malformed(self, writer: StreamWriter, request_id: RequestId, said: str) -> None:
        await _error(writer, request_id, MALFORMED_ANSWER, f"the server's answer was malformed: {said}"[:500])


def _asking(response: httpx2.Response) -> bool:
    """Whether ``response`` answers the POST of a request (the SDK reads its error body as the answer)."""
    return response.request.method == "POST" and _ASKING.get()


def _is_json(response: httpx2.Response) -> bool:
    return response.headers.get("content-type", "").lower().startswith("application/json")


@asynccontextmanager
async def bounded_http_client(
    url: str,
    *,
    http_client: httpx2.AsyncClient,
    answer_timeout_s: float,
    max_bytes: int = MAX_MESSAGE_BYTES,
) -> AsyncIterator[Streams]:
    """The SDK's ``streamable_http_client`` over :class:`_BoundedTransport`; ``http_client`` is the
    caller's to close (its ``max_redirects`` is cut to :data:`MAX_REDIRECTS`). ``answer_timeout_s``:
    longest a request's response is read, in seconds."""
    transport = _BoundedTransport(
        url, client=http_client, max_bytes=max_bytes, answer_timeout_s=answer_timeout_s
    )
    http_client.max_redirects = min(http_client.max_redirects, MAX_REDIRECTS)
    hooks = http_client.event_hooks
    http_client.event_hooks = {
        "request": [*hooks.get("request", []), note_sent_body],
        "response": [*hooks.get("response", []), transport.bound_answer],
    }
    read_stream_writer, read_stream = create_context_streams[SessionMessage | Exception](0)
    write_stream, write_stream_reader = create_context_streams[SessionMessage](0)
    async with (
        read_stream_writer,
        read_stream,
        write_stream,
        write_stream_reader,
        anyio.create_task_group() as tg,
    ):

        def start_get_stream() -> None:
            tg.start_soon(transport.handle_get_stream, http_client, read_stream_writer)

        transport.tasks = tg

        tg.start_soon(
            transport.post_writer,
            http_client,
            write_stream_reader,
            read_stream_writer,
            write_stream,
            start_get_stream,
            tg,
        )
        try:
            yield read_stream, write_stream
        finally:
            if transport.session_id:
                with contextlib.suppress(Exception):  # bounded by CLOSE_TIMEOUT_S
                    await transport.terminate_session(http_client)
            tg.cancel_scope.cancel()
