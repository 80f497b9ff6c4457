"""What stands in front of the gateway's streamable HTTP endpoint: who may call, on which session, from where.

* **Principal.** ``Authorization: Bearer <token>`` of a configured principal, else 401.
* **Guessing.** As for ``actionspace serve``: each client address has :data:`GUESSES_PER_MINUTE`
  unknown tokens to spend, given back at that rate; an address that spent them is answered 429
  (``rate_limited``, ``Retry-After``) for every token, a good one too. The address is the peer's,
  or from a trusted proxy the one it forwards in ``X-Forwarded-For``
  (:mod:`actionspace.service.proxies`), counted by the network its client controls: an IPv6
  address by its /64, an IPv4-mapped one as its IPv4 address. uvicorn's own reading of that
  header is off (see :meth:`Gateway.serve_http <actionspace.adapters.mcp_gateway.Gateway.serve_http>`).
* **Session.** An ``Mcp-Session-Id`` belongs to the principal whose request opened it; any other
  principal naming it (to call, listen on it or end it) is answered 404, as for a session that
  does not exist, so a leaked or guessed id is no way to act in or end someone else's session.
* **Origin.** A browser request (one with an ``Origin``) is answered 403 unless its origin is
  named exactly in ``allowed_origins`` (see ``_gateway_config.exact_origin``) or is the gateway's
  own: a loopback origin on a loopback address, where the SDK's DNS rebinding protection checks
  Host and Origin too; anywhere else, the ``Host`` the request was sent to. A page on some other
  site never reaches the tools, nor does ``Origin: null`` (sandboxed and ``file:`` pages).
* **Ids.** A posted message with a ``method`` and an ``id`` that is neither a string nor an
  integer (``null``, ``1.5``, ``true``, an object...) is answered 400 with the JSON-RPC error
  -32600: MCP requests carry a string or integer id, never null, and notifications none, so such
  a message is neither (the SDK would take it for a notification: 202, never answered). So is a
  message naming one member twice in an object (the SDK keeps the last value, a proxy's filter
  may read the first), and a JSON-RPC batch (a JSON array: MCP sends none). Any other JSON that
  is no JSON-RPC message is answered 400 -32600 too, with a short message in place of the SDK's
  validation report (which echoes the input and names the SDK's models).
* **Fair share.** A principal holds at most ``max_sessions_per_principal`` open sessions
  (default :data:`MAX_SESSIONS_PER_PRINCIPAL`); opening one more is answered 429 until it ends
  one (``DELETE``) or one expires (no request in flight for ``idle_timeout_s``, the SDK's idle
  timeout). One principal's clients never take all the sessions the SDK admits from the others.
* **Typed refusals.** Every 4xx answer (the guard's, the SDK's, its router's) is JSON naming the
  error taxonomy's category of its status (:func:`~actionspace.service.limits.category_of`): in
  ``error.data.category`` of a JSON-RPC error, else beside ``error``. A path other than the
  endpoint's is answered 404 here, never by the SDK's router: such an answer ends no session.
"""

from __future__ import annotations

import json
import math
import os
import socket
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from actionspace.adapters._gateway_config import exact_origin
from actionspace.policy.principal import Principal
from actionspace.service.limits import category_of
from actionspace.service.proxies import TrustedProxies, client_address, guess_key
from actionspace.service.quotas import Allowance, RateLimit

__all__ = [
    "GUESSES_PER_MINUTE",
    "IDLE_TIMEOUT_S",
    "LOOPBACK",
    "MAX_SESSIONS_PER_PRINCIPAL",
    "HttpGuard",
    "bearer",
    "bound_host",
    "sdk_security",
]

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
"""Bind addresses the SDK guards against DNS rebinding (Host and Origin must name loopback)."""
_MAX_OWNED = 20_000
"""Most session → principal bindings kept (twice the SDK's open-session cap); the oldest go first."""
_SESSION_HEADER = "mcp-session-id"
_MOST_CHECKED = 4 * 1024 * 1024
"""Largest body whose id is checked (the SDK's own limit: a larger one it answers 413)."""
MAX_SESSIONS_PER_PRINCIPAL = 1000
"""Most open sessions of one principal (the SDK admits 10,000 in all)."""
IDLE_TIMEOUT_S = 1800.0
"""Seconds a session lives with no request in flight (given to the SDK, which ends it then)."""
GUESSES_PER_MINUTE = 100
"""Unknown tokens one client address may send: all at once, then this many a minute (as ``serve``)."""
_ADDRESSES = 10_000
"""Most client addresses whose guesses are remembered (the longest quiet go first)."""


class HttpGuard:
    """ASGI middleware: bearer authentication, session ownership and (off loopback) the Origin check."""

    def __init__(
        self,
        app: ASGIApp,
        principal_for_token: Callable[[str | None], Principal | None],
        *,
        host: str,
        allowed_origins: Iterable[str] = (),
        max_sessions_per_principal: int = MAX_SESSIONS_PER_PRINCIPAL,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
        trusted_proxies: TrustedProxies | None = None,
        clock: Callable[[], float] = time.monotonic,
        path: str = "/mcp",
    ) -> None:
        """``allowed_origins``: exact origins (as :func:`exact_origin` gives them) let in besides our own;
        ``idle_timeout_s`` must be the SDK's session idle timeout; ``trusted_proxies``: whose
        ``X-Forwarded-For`` names the client (None: nobody's); ``clock`` in seconds (tests);
        ``path``: the endpoint's (any other is answered 404)."""
        self.app = app
        self._path = path.rstrip("/")
        self._proxies = trusted_proxies or TrustedProxies()
        self._guesses = Allowance(RateLimit(requests=GUESSES_PER_MINUTE), keys=_ADDRESSES, clock=clock)
        self._principal_for = principal_for_token
        self._loopback = host in LOOPBACK
        self._allowed = frozenset(exact_origin(o) for o in allowed_origins)
        self._owners: OrderedDict[str, str] = OrderedDict()
        """Session id → id of the principal whose request opened it."""
        self._sessions = _OpenSessions(max_sessions_per_principal, idle_timeout_s, clock)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        send = _typed(send, head=scope.get("method") == "HEAD")
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        token = bearer(headers)
        client = self._client(scope)
        wait = None if token is None else self._guesses.wait(client)
        if wait is not None:
            retry = [(b"retry-after", str(max(1, math.ceil(wait))).encode())]
            await _answer(send, 429, _GUESSING, retry)
            return
        principal = self._principal_for(token)
        if principal is None:
            if token is not None:
                self._guesses.spend(client)
            await _answer(send, 401, _UNAUTHORIZED, [(b"www-authenticate", b'Bearer realm="actionspace"')])
            return
        if not self._origin_allowed(headers):
            await _answer(send, 403, b'{"error":"forbidden","message":"cross-origin request refused"}')
            return
        if str(scope.get("path", "")).rstrip("/") != self._path:  # the router's 404 would end the session
            await _answer(send, 404, _NOT_SERVED)
            return
        if scope.get("method") == "POST":
            checked = await _checked_body(receive, send)
            if checked is None:
                return
            receive, send = checked, _concise(send)
        session = headers.get(_SESSION_HEADER)
        if not session:
            if self._sessions.full(principal.id):
                await _answer(send, 429, _TOO_MANY)
                return
            await self.app(scope, receive, self._bind_on_open(principal.id, send))
            return
        if self._owners.get(session) != principal.id:
            await _answer(send, 404, _NO_SESSION)
            return
        self._owners.move_to_end(session)
        send = self._forget_when_gone(session, scope.get("method") == "DELETE", send)
        self._sessions.begin(session)
        try:
            await self.app(scope, receive, send)
        finally:
            self._sessions.end(session)

    def _client(self, scope: Scope) -> str:
        """What the guesses of this request count against (every ``X-Forwarded-For`` read): the
        network its client controls (:func:`~actionspace.service.proxies.guess_key`)."""
        peer = scope.get("client")
        forwarded = [
            value.decode("latin-1")
            for key, value in scope.get("headers", [])
            if key.lower() == b"x-forwarded-for"
        ]
        return guess_key(client_address(str(peer[0]) if peer else "", forwarded, self._proxies))

    def _origin_allowed(self, headers: Mapping[str, str]) -> bool:
        """True without an ``Origin`` (not a browser), for an allowed origin, and for our own."""
        origin = headers.get("origin")
        if origin is None:
            return True
        try:
            exact = exact_origin(origin)
        except ValueError:
            return False
        if exact in self._allowed:
            return True
        if self._loopback:
            return urlsplit(exact).hostname in LOOPBACK
        return exact.partition("://")[2] == headers.get("host", "").lower()

    def _bind_on_open(self, principal_id: str, send: Send) -> Send:
        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                for key, value in message.get("headers", []):
                    if key.decode("latin-1").lower() == _SESSION_HEADER:
                        opened = value.decode("latin-1")
                        self._owners[opened] = principal_id
                        self._sessions.opened(principal_id, opened)
                        while len(self._owners) > _MAX_OWNED:
                            self._sessions.closed(self._owners.popitem(last=False)[0])
            await send(message)

        return sending

    def _forget_when_gone(self, session: str, deleting: bool, send: Send) -> Send:
        """Forget the session once ended (a DELETE answered 2xx) or found gone (404: it expired)."""

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status = int(message["status"])
                if status == 404 or (deleting and 200 <= status < 300):
                    self._owners.pop(session, None)
                    self._sessions.closed(session)
            await send(message)

        return sending


class _OpenSessions:
    """The sessions each principal holds open: bounded per principal, expired like the SDK's."""

    def __init__(self, limit: int, idle_timeout_s: float, clock: Callable[[], float]) -> None:
        self._limit = limit
        self._idle_s = idle_timeout_s
        self._clock = clock
        self._by_principal: dict[str, OrderedDict[str, float]] = {}
        """Principal id → its session ids → when a request of the session last ended."""
        self._principal_of: dict[str, str] = {}
        self._in_flight: dict[str, int] = {}

    def full(self, principal_id: str) -> bool:
        """True when the principal may open no more (its expired sessions are forgotten first)."""
        held = self._by_principal.get(principal_id)
        if held is None:
            return False
        cutoff = self._clock() - self._idle_s
        for session, last in list(held.items()):
            if last < cutoff and not self._in_flight.get(session):
                self.closed(session)
        return len(held) >= self._limit

    def opened(self, principal_id: str, session: str) -> None:
        self._by_principal.setdefault(principal_id, OrderedDict())[session] = self._clock()
        self._principal_of[session] = principal_id

    def begin(self, session: str) -> None:
        self._in_flight[session] = self._in_flight.get(session, 0) + 1

    def end(self, session: str) -> None:
        left = self._in_flight.pop(session, 1) - 1
        if left > 0:
            self._in_flight[session] = left
        held = self._by_principal.get(self._principal_of.get(session, ""))
        if held is not None and session in held:
            held[session] = self._clock()

    def closed(self, session: str) -> None:
        principal_id = self._principal_of.pop(session, None)
        held = None if principal_id is None else self._by_principal.get(principal_id)
        if principal_id is not None and held is not None:
            held.pop(session, None)
            if not held:
                del self._by_principal[principal_id]


_UNAUTHORIZED = (
    b'{"error":"unauthorized","message":"send Authorization: Bearer <token> of a configured principal"}'
)
_GUESSING = b'{"error":"rate_limited","message":"too many unknown tokens from this address; try again later"}'
_TOO_MANY = (
    b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,'
    b'"message":"too many open sessions for this principal: end one (DELETE) or wait for one to expire"}}'
)
_BAD_ID = (
    b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: a request\'s id is '
    b'a string or an integer (never null), and a notification has no id"}}'
)
_BATCH = (
    b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: a batch (a JSON '
    b'array of messages) is not accepted; send each message in a request of its own"}}'
)
_NOT_A_MESSAGE = (
    b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: the body is not a '
    b'JSON-RPC 2.0 request, notification or response (an object with jsonrpc \\"2.0\\")"}}'
)
_NO_SESSION = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Session not found"}}'
_NOT_SERVED = (
    b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Not Found: no MCP endpoint here"}}'
)


async def _answer(
    send: Send, status: int, body: bytes, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers + (extra or [])})
    await send({"type": "http.response.body", "body": body})


async def _checked_body(receive: Receive, send: Send) -> Receive | None:
    """``receive`` again, its body read ahead; None when the body was refused (answered 400).

    A body over :data:`_MOST_CHECKED` bytes, or not a JSON object, is passed on unchecked: the
    SDK answers it (413, a parse error) as before.
    """
    read: list[Message] = []
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        read.append(message)
        if message["type"] != "http.request":
            break
        chunk = bytes(message.get("body", b""))
        size += len(chunk)
        if size > _MOST_CHECKED:
            chunks.clear()
            break
        chunks.append(chunk)
        if not message.get("more_body", False):
            refused = _refusal(b"".join(chunks))
            if refused is not None:
                await _answer(send, 400, refused)
                return None
            break

    async def replay() -> Message:
        return read.pop(0) if read else await receive()

    return replay


class _Twice(Exception):
    """An object of the body names ``name`` twice."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def _once_each(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        for name, _ in pairs:
            if name in seen:
                raise _Twice(name)
            seen.add(name)
    return value


def _refusal(body: bytes) -> bytes | None:
    """The 400 body for a message the SDK would misread, or None to pass it on.

    Refused: an object naming a member twice (whose value counts is up to the reader: the SDK
    keeps the last, a proxy's filter may read the first), a message with a ``method`` whose
    ``id`` is neither a string nor an integer, and a JSON-RPC batch (MCP sends none since
    2025-06-18; the SDK's 400 for it would be its validator's report, see :func:`_concise`)."""
    try:
        message = json.loads(body, object_pairs_hook=_once_each)
    except _Twice as twice:
        return _invalid(f"Invalid Request: the message names {twice.name[:40]!r} twice in one object")
    except (ValueError, RecursionError):  # not JSON (the SDK's parse error answers it)
        return None
    if isinstance(message, list):
        return _BATCH
    if isinstance(message, dict) and "method" in message and "id" in message:
        ident = message["id"]
        if not (isinstance(ident, str) or (isinstance(ident, int) and not isinstance(ident, bool))):
            return _BAD_ID
    return None


def _concise(send: Send) -> Send:
    """``send``, the SDK's 400 for a body it could not validate (its validator's report, which
    echoes the input and names its models) answered :data:`_NOT_A_MESSAGE` instead."""
    held: list[Message] = []

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start" and message.get("status") == 400:
            held.append(message)  # until its body says whether it is such a report
            return
        if held and message["type"] == "http.response.body":
            start = held.pop()
            if not message.get("more_body", False) and _validation_report(message.get("body", b"")):
                headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
                headers.append((b"content-length", str(len(_NOT_A_MESSAGE)).encode()))
                await send({**start, "headers": headers})
                await send({"type": "http.response.body", "body": _NOT_A_MESSAGE})
                return
            await send(start)
        await send(message)

    return sending


def _typed(send: Send, *, head: bool) -> Send:
    """``send``, each 4xx answer's body made JSON naming its category (see the module docstring)."""
    held: list[Message] = []
    chunks: list[bytes] = []

    async def sending(message: Message) -> None:
        if (
            message["type"] == "http.response.start"
            and 400 <= int(message.get("status", 0)) < 500
            and not head
        ):
            held.append(message)  # until its whole body is read
            return
        if not held or message["type"] != "http.response.body":
            await send(message)
            return
        chunks.append(bytes(message.get("body", b"")))
        if message.get("more_body", False):
            return
        start = held.pop()
        body = _with_category(b"".join(chunks), int(start["status"]))
        chunks.clear()
        kept = [(k, v) for k, v in start.get("headers", []) if k.lower() not in _RETYPED]
        length = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({**start, "headers": kept + length})
        await send({"type": "http.response.body", "body": body})

    return sending


_RETYPED = frozenset({b"content-type", b"content-length"})


def _with_category(body: bytes, status: int) -> bytes:
    """``body`` of a 4xx answer as JSON naming the category of ``status``: in a JSON-RPC error's
    ``data``, else beside ``error``; a body that is no JSON object becomes a JSON-RPC error."""
    category = category_of(status)
    try:
        answer = json.loads(body)
    except (ValueError, RecursionError):
        answer = None
    if not isinstance(answer, dict):
        text = body.decode("utf-8", "replace")[:200] or f"refused ({status})"
        answer = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": text}}
    error = answer.get("error")
    if isinstance(error, dict):
        data = error.get("data")
        if isinstance(data, dict):
            data.setdefault("category", category)
        else:
            error["data"] = {"category": category} if data is None else {"category": category, "detail": data}
    else:
        answer.setdefault("category", category)
    return json.dumps(answer, separators=(",", ":")).encode()


def _validation_report(body: bytes) -> bool:
    """Whether ``body`` is the SDK's JSON-RPC error carrying its validator's report."""
    try:
        error = json.loads(body).get("error")
        return str(error.get("message", "")).startswith("Validation error")
    except (ValueError, AttributeError, RecursionError):
        return False


def _invalid(message: str) -> bytes:
    error = {"code": -32600, "message": message}
    return json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode()


def sdk_security(host: str, allowed_origins: Iterable[str]) -> TransportSecuritySettings | None:
    """The SDK's DNS rebinding protection for a gateway on ``host`` (None: the SDK's default).

    On loopback the SDK checks Host and Origin: the allowed origins join its loopback ones.
    """
    extra = [exact_origin(o) for o in allowed_origins]
    if host not in LOOPBACK or not extra:
        return None
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
        allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*", *extra],
    )


def bearer(headers: Mapping[str, str] | None) -> str | None:
    """The token of an ``Authorization: Bearer`` header (None: no such header)."""
    if headers is None:
        return None
    value = headers.get("authorization") or ""
    scheme, _, token = value.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def bound_host(fd: int | None, host: str) -> str:
    """The address the gateway listens on: that of the inherited socket ``fd`` when given, else ``host``."""
    if fd is None:
        return host
    with socket.socket(fileno=os.dup(fd)) as sock:
        if sock.family not in (socket.AF_INET, socket.AF_INET6):
            return "127.0.0.1"  # a Unix socket: reached only through a local proxy
        return str(sock.getsockname()[0])
