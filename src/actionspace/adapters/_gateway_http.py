"""What stands in front of the gateway's streamable HTTP endpoint: who may call, on which session, from where.

* **Principal.** ``Authorization: Bearer <token>`` of a configured principal, else 401.
* **Session.** An ``Mcp-Session-Id`` belongs to the principal whose request opened it; any other
  principal naming it (to call, listen on it or end it) is answered 404, as for a session that
  does not exist, so a leaked or guessed id is no way to act in or end someone else's session.
* **Origin.** A browser request (one with an ``Origin``) is answered 403 unless its origin is
  named exactly in ``allowed_origins`` (see ``_gateway_config.exact_origin``) or is the gateway's
  own: a loopback origin on a loopback address, where the SDK's DNS rebinding protection checks
  Host and Origin too; anywhere else, the ``Host`` the request was sent to. A page on some other
  site never reaches the tools, nor does ``Origin: null`` (sandboxed and ``file:`` pages).
* **Fair share.** A principal holds at most ``max_sessions_per_principal`` open sessions
  (default :data:`MAX_SESSIONS_PER_PRINCIPAL`); opening one more is answered 429 until it ends
  one (``DELETE``) or one expires (no request in flight for ``idle_timeout_s``, the SDK's idle
  timeout). One principal's clients never take all the sessions the SDK admits from the others.
"""

from __future__ import annotations

import os
import socket
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from urllib.parse import urlsplit

from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from actionspace.adapters._gateway_config import exact_origin
from actionspace.policy.principal import Principal

__all__ = [
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
MAX_SESSIONS_PER_PRINCIPAL = 1000
"""Most open sessions of one principal (the SDK admits 10,000 in all)."""
IDLE_TIMEOUT_S = 1800.0
"""Seconds a session lives with no request in flight (given to the SDK, which ends it then)."""


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
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``allowed_origins``: exact origins (as :func:`exact_origin` gives them) let in besides our own;
        ``idle_timeout_s`` must be the SDK's session idle timeout; ``clock`` in seconds (tests)."""
        self.app = app
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
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        principal = self._principal_for(bearer(headers))
        if principal is None:
            await _answer(send, 401, _UNAUTHORIZED, [(b"www-authenticate", b'Bearer realm="actionspace"')])
            return
        if not self._origin_allowed(headers):
            await _answer(send, 403, b'{"error":"forbidden","message":"cross-origin request refused"}')
            return
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
_TOO_MANY = (
    b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,'
    b'"message":"too many open sessions for this principal: end one (DELETE) or wait for one to expire"}}'
)
_NO_SESSION = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Session not found"}}'


async def _answer(
    send: Send, status: int, body: bytes, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers + (extra or [])})
    await send({"type": "http.response.body", "body": body})


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
