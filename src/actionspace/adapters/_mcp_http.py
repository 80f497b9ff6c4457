"""The MCP client's streamable HTTP transport: the SDK's, with every answer bounded and checked.

The SDK's transport reads a JSON answer whole, however large (a 100 MB body, or a gzip bomb that
inflates to gigabytes, is held in memory and can end the session with a ``MemoryError``), and so
the JSON body of an error status; it allows 1 MiB per SSE event and reports a larger one as a lost
connection (so a read is retried and the server sends it again); it passes an SSE answer for
another request id as this request's answer; it keeps reading a handshake-era request's response
after the request was cancelled (a stream of whitespace or keep-alive comments holds it for ever);
and a connection cut mid-answer ends the whole session. Here:

* an answer (a JSON body, decoded, or one SSE event) over :data:`MAX_MESSAGE_BYTES` ends its
  request at once with ``RESULT_TOO_LARGE``, and the rest is never read;
* an answer that is not JSON-RPC (invalid UTF-8, bad JSON) or that names another request id ends
  its request at once with ``MALFORMED_ANSWER`` (``_mcp_errors`` maps both);
* the JSON body of an error status is read within the same bound (the SDK reads it whole);
* a body's content coding is undone here, not by the HTTP library: ``gzip`` (several members too),
  ``deflate`` and ``identity``, inflated in pieces of at most :data:`_PIECE_BYTES` as the answer is
  read, so a bomb never holds more than the bound and a piece; an answer in any other coding (which
  the library would pass on as if it were plain) or whose compressed stream is broken or cut short
  ends its request with ``MALFORMED_ANSWER``;
* a connection cut mid-answer ends that request (``CONNECTION_CLOSED``), not the session;
* a redirect's own body is never read (the SDK reads it whole); a request follows at most
  :data:`MAX_REDIRECTS` redirects, each within the endpoint's origin and keeping its method; any other
  3xx answer (a loop, another origin, a scheme that is not HTTP, a Location that is no URL, no
  Location, a POST turned into a GET) ends its request with ``REDIRECT_REFUSED`` (the SDK would take
  the JSON body of some as the answer);
* a cancelled request's response stream is closed at every protocol revision, and no request's
  response is read for longer than ``answer_timeout_s`` (``REQUEST_TIMEOUT``), except the
  ``subscriptions/listen`` stream, which is meant to stay open.
"""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Final

import anyio
import httpx2
from mcp.client._transport import TransportStreams
from mcp.client.streamable_http import RequestContext, StreamableHTTPTransport, StreamWriter
from mcp.shared._context_streams import create_context_streams
from mcp.shared.jsonrpc_dispatcher import cancelled_request_id_from_params
from mcp.shared.message import SessionMessage
from mcp_types import (
    CONNECTION_CLOSED,
    REQUEST_TIMEOUT,
    ErrorData,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError

from actionspace.adapters._mcp_errors import MALFORMED_ANSWER, REDIRECT_REFUSED, RESULT_TOO_LARGE
from actionspace.adapters._mcp_redirects import MAX_REDIRECTS, RedirectRefused, counting_redirects, redirected

__all__ = ["ACCEPTED_CODINGS", "MAX_MESSAGE_BYTES", "bounded_http_client", "take_codings"]

MAX_MESSAGE_BYTES: Final = 32 * 1024 * 1024
"""Longest answer taken from an HTTP server, in bytes (decoded): the stdio transport's bound."""
_LONG_LIVED: Final = frozenset({"subscriptions/listen"})
"""Requests whose response stream stays open by design: no answer deadline."""
_PIECE_BYTES: Final = 64 * 1024
"""Most bytes one inflating step yields, whatever a network chunk inflates to."""
_WBITS: Final = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}
"""The content codings undone here (``identity`` is none), as ``zlib`` window bits."""
_MAX_CODINGS: Final = 3
"""Most content codings one body may name (one is usual; each more is another inflater)."""
ACCEPTED_CODINGS: Final = "gzip, deflate"
"""What every request offers in ``Accept-Encoding``: the codings undone here."""


class _Undecodable(httpx2.DecodingError):
    """A body in a coding not undone here, or whose compressed stream is broken or cut short."""


class _Inflater:
    """One content coding undone incrementally; ``zlib`` is never asked for more than a piece at once."""

    def __init__(self, coding: str) -> None:
        self._coding = coding
        self._z = zlib.decompressobj(_WBITS[coding])
        self._head = b""
        """``deflate``: the first bytes, until there are two to tell a zlib stream from a raw one."""
        self._started = False
        self._ended = False

    def feed(self, data: bytes) -> Iterator[bytes]:
        if not self._started:
            if self._coding == "deflate":
                self._head += data
                if len(self._head) < 2:
                    return
                data, self._head = self._head, b""
                if not _zlib_header(data):  # servers send raw deflate under this name too
                    self._z = zlib.decompressobj(-zlib.MAX_WBITS)
            self._started = bool(data)
        while data or (self._started and not self._ended):
            if self._ended:
                if self._coding == "deflate":
                    raise _Undecodable("bytes after the end of the deflate stream")
                data = data.lstrip(b"\0")  # gzip: another member may follow; zero padding is skipped
                if not data:
                    return
                self._z, self._ended = zlib.decompressobj(_WBITS[self._coding]), False
            while True:
                out = self._step(data)
                data = self._z.unconsumed_tail
                if out:
                    yield out
                if self._z.eof:
                    self._ended, data = True, self._z.unused_data
                    break
                if not data and len(out) < _PIECE_BYTES:
                    return

    def _step(self, data: bytes) -> bytes:
        try:
            return self._z.decompress(data, _PIECE_BYTES)
        except zlib.error as exc:
            raise _Undecodable(f"a broken {self._coding} stream ({exc})") from exc

    def finish(self) -> None:
        if self._head or (self._started and not self._ended):
            raise _Undecodable(f"the {self._coding} stream ended early")


def _zlib_header(data: bytes) -> bool:
    """Whether a deflate body starts with a zlib header (RFC 1950), not with raw deflate data."""
    return data[0] & 0x0F == zlib.DEFLATED and (data[0] << 8 | data[1]) % 31 == 0


class _Inflating(httpx2.AsyncByteStream):
    """A response's raw stream with its content codings undone, piece by bounded piece."""

    def __init__(self, raw: httpx2.AsyncByteStream, codings: list[str]) -> None:
        self._raw = raw
        self._codings = codings
        self.failure: str | None = None
        """Why the body could not be decoded, once that is known (the SDK may swallow the error)."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        layers = [_Inflater(coding) for coding in reversed(self._codings)]  # the last applied comes off first
        try:
            async for chunk in self._raw:
                for piece in _through(layers, chunk):
                    yield piece
            for layer in layers:  # each was drained as it was fed: nothing is left inside to flush
                layer.finish()
        except _Undecodable as exc:
            self.failure = str(exc)
            raise

    async def aclose(self) -> None:
        await self._raw.aclose()


class _Refused(httpx2.AsyncByteStream):
    """The raw stream of a body in a coding not undone here: reading it fails; it is never read."""

    def __init__(self, raw: httpx2.AsyncByteStream, reason: str) -> None:
        self._raw = raw
        self.reason = reason

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self

    async def __anext__(self) -> bytes:
        raise _Undecodable(self.reason)

    async def aclose(self) -> None:
        await self._raw.aclose()


def _through(layers: list[_Inflater], data: bytes) -> Iterator[bytes]:
    """``data`` through every layer in turn, lazily: nothing is inflated ahead of its reader."""
    if not layers:
        if data:
            yield data
        return
    for piece in layers[0].feed(data):
        yield from _through(layers[1:], piece)


def take_codings(response: httpx2.Response) -> None:
    """Undo ``response``'s content codings here from now on (the library then sees a plain body)."""
    codings = [c.strip().lower() for c in response.headers.get_list("content-encoding", split_commas=True)]
    codings = [c for c in codings if c and c != "identity"]
    if not codings or not isinstance(response.stream, httpx2.AsyncByteStream):
        return
    unknown = [c for c in codings if c not in _WBITS]
    if unknown:
        said = f"its content coding {unknown[0][:50]!r} is not one of {ACCEPTED_CODINGS}, identity"
        response.stream = _Refused(response.stream, said)
    elif len(codings) > _MAX_CODINGS:
        response.stream = _Refused(response.stream, f"it names {len(codings)} content codings")
    else:
        response.stream = _Inflating(response.stream, codings)
    del response.headers["content-encoding"]


class _BoundedTransport(StreamableHTTPTransport):
    def __init__(
        self, url: str, *, client: httpx2.AsyncClient, max_bytes: int, answer_timeout_s: float
    ) -> None:
        super().__init__(url, max_sse_event_size=max_bytes)
        self._client = client
        self._max_bytes = max_bytes
        self._answer_timeout_s = answer_timeout_s
        self._sse_bodies: dict[RequestId, _Inflating] = {}
        """The compressed SSE answer being read per request: a broken one is malformed, not lost."""

    def _prepare_headers(self) -> dict[str, str]:
        return {**super()._prepare_headers(), "accept-encoding": ACCEPTED_CODINGS}

    async def _handle_post_request(self, ctx: RequestContext) -> None:
        message = ctx.session_message.message
        if not isinstance(message, JSONRPCRequest):
            await super()._handle_post_request(ctx)
            return
        long_lived = message.method in _LONG_LIVED
        deadline = None if long_lived else self._answer_timeout_s
        with counting_redirects(), anyio.move_on_after(deadline) as scope:
            try:
                await super()._handle_post_request(ctx)
            except RedirectRefused as exc:
                await self._redirect_refused(ctx.read_stream_writer, message.id, str(exc))
            except httpx2.RequestError as exc:  # the SDK would let it end the whole session
                if long_lived or isinstance(exc, httpx2.ConnectError | httpx2.ConnectTimeout):
                    raise  # nothing reached the server, which is gone: the session ends, as before
                said = f"the connection failed: {type(exc).__name__}"
                await self._resolve_abandoned_request(ctx.read_stream_writer, message.id, said)
        if scope.cancelled_caught:
            said = f"no answer within {self._answer_timeout_s:g}s"
            await self._resolve_abandoned_request(
                ctx.read_stream_writer, message.id, said, code=REQUEST_TIMEOUT
            )

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
        try:
            message = jsonrpc_message_adapter.validate_json(body, by_name=False)
        except ValidationError as exc:
            await self._malformed(
                read_stream_writer, request_id, f"not a JSON-RPC message: {exc.errors()[:1]}"
            )
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
        if sse.event != "message" or not sse.data or original_request_id is None:
            return await super()._handle_sse_event(
                sse, read_stream_writer, original_request_id, resumption_callback
            )
        try:
            message = jsonrpc_message_adapter.validate_json(sse.data, by_name=False)
        except ValidationError as exc:
            said = f"an event that is not a JSON-RPC message: {exc.errors()[:1]}"
            await self._malformed(read_stream_writer, original_request_id, said)
            return True
        if isinstance(message, JSONRPCResponse | JSONRPCError) and not _same(message.id, original_request_id):
            await self._malformed(read_stream_writer, original_request_id, _other_id(message.id))
            return True
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
        """An HTTP response hook: the body's content codings are undone here (:func:`take_codings`),
        and the JSON body of an error status, which the SDK reads whole, is read here within the
        bound; one over it, or undecodable, is dropped (the SDK then answers from the status alone).
        A 3xx answer is left to :func:`_mcp_redirects.redirected`: its body is never read."""
        if 300 <= response.status_code < 400:
            redirected(self._client, response)
            return
        take_codings(response)
        if response.status_code < 400 or not _is_json(response):
            return
        try:
            body = await self._bounded_body(response)
        except _Undecodable:
            body = None
        response._content = b"" if body is None else body  # what the SDK's ``aread`` then returns

    async def _bounded_body(self, response: httpx2.Response) -> bytes | None:
        """The decoded body, or None as soon as it is known to pass the bound (the rest is not read).

        Raises ``_Undecodable`` for a body in a coding not undone here or a broken compressed one."""
        if isinstance(response.stream, _Refused):
            raise _Undecodable(response.stream.reason)
        declared = response.headers.get("content-length", "")
        if (
            declared.isdigit()
            and not isinstance(response.stream, _Inflating)
            and int(declared) > self._max_bytes
        ):
            return None
        body = bytearray()
        async for piece in response.aiter_bytes():
            if len(body) + len(piece) > self._max_bytes:
                return None
            body += piece
        return bytes(body)

    async def _deliver(self, message: JSONRPCMessage, writer: StreamWriter, request_id: RequestId) -> None:
        if isinstance(message, JSONRPCError) and message.id is None:
            message = JSONRPCError(jsonrpc="2.0", id=request_id, error=message.error)
        if isinstance(message, JSONRPCResponse | JSONRPCError):
            if not _same(message.id, request_id):
                await self._malformed(writer, request_id, _other_id(message.id))
                return
            message.id = request_id
            await writer.send(SessionMessage(message))
            return
        await writer.send(SessionMessage(message))  # a request or notification: served, but no answer
        await self._malformed(writer, request_id, "the JSON answer held no response")

    async def _refuse(self, writer: StreamWriter, request_id: RequestId, what: str) -> None:
        said = f"{what} is larger than the {self._max_bytes} bytes taken"
        error = ErrorData(code=RESULT_TOO_LARGE, message=said, data={"limit_bytes": self._max_bytes})
        await writer.send(SessionMessage(JSONRPCError(jsonrpc="2.0", id=request_id, error=error)))

    async def _redirect_refused(self, writer: StreamWriter, request_id: RequestId, said: str) -> None:
        error = ErrorData(code=REDIRECT_REFUSED, message=said[:500])
        await writer.send(SessionMessage(JSONRPCError(jsonrpc="2.0", id=request_id, error=error)))

    async def _malformed(self, writer: StreamWriter, request_id: RequestId, said: str) -> None:
        error = ErrorData(code=MALFORMED_ANSWER, message=f"the server's answer was malformed: {said}"[:500])
        await writer.send(SessionMessage(JSONRPCError(jsonrpc="2.0", id=request_id, error=error)))


def _is_json(response: httpx2.Response) -> bool:
    return response.headers.get("content-type", "").lower().startswith("application/json")


def _same(answered: RequestId | None, asked: RequestId) -> bool:
    """Whether an answer's id names the request (a server may echo an integer id as a string)."""
    return answered is not None and (answered == asked or str(answered) == str(asked))


def _other_id(answered: RequestId | None) -> str:
    return f"it answers another request id ({str(answered)[:50]!r})"


@asynccontextmanager
async def bounded_http_client(
    url: str,
    *,
    http_client: httpx2.AsyncClient,
    answer_timeout_s: float,
    max_bytes: int = MAX_MESSAGE_BYTES,
) -> AsyncIterator[TransportStreams]:
    """The SDK's ``streamable_http_client`` over :class:`_BoundedTransport`; ``http_client`` is the
    caller's to close (its ``max_redirects`` is cut to :data:`MAX_REDIRECTS`). ``answer_timeout_s``:
    longest a request's response is read, in seconds."""
    transport = _BoundedTransport(
        url, client=http_client, max_bytes=max_bytes, answer_timeout_s=answer_timeout_s
    )
    http_client.max_redirects = min(http_client.max_redirects, MAX_REDIRECTS)
    hooks = http_client.event_hooks
    http_client.event_hooks = {**hooks, "response": [*hooks.get("response", []), transport.bound_answer]}
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
                with contextlib.suppress(Exception):
                    await transport.terminate_session(http_client)
            tg.cancel_scope.cancel()
