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
"""

from __future__ import annotations

import os
import socket
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from urllib.parse import urlsplit

from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from actionspace.adapters._gateway_config import exact_origin
from actionspace.policy.principal import Principal

__all__ = ["LOOPBACK", "HttpGuard", "bearer", "bound_host", "sdk_security"]

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
"""Bind addresses the SDK guards against DNS rebinding (Host and Origin must name loopback)."""
_MAX_OWNED = 20_000
"""Most session → principal bindings kept (twice the SDK's open-session cap); the oldest go first."""
_SESSION_HEADER = "mcp-session-id"


class HttpGuard:
    """ASGI middleware: bearer authentication, session ownership and (off loopback) the Origin check."""

    def __init__(
        self,
        app: ASGIApp,
        principal_for_token: Callable[[str | None], Principal | None],
        *,
        host: str,
        allowed_origins: Iterable[str] = (),
    ) -> None:
        """``allowed_origins``: exact origins (as :func:`exact_origin` gives them) let in besides our own."""
        self.app = app
        self._principal_for = principal_for_token
        self._loopback = host in LOOPBACK
        self._allowed = frozenset(exact_origin(o) for o in allowed_origins)
        self._owners: OrderedDict[str, str] = OrderedDict()
        """Session id → id of the principal whose request opened it."""

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
        if session:
            if self._owners.get(session) != principal.id:
                await _answer(send, 404, _NO_SESSION)
                return
            self._owners.move_to_end(session)
            if scope.get("method") == "DELETE":
                send = self._forget_on_success(session, send)
        else:
            send = self._bind_on_open(principal.id, send)
        await self.app(scope, receive, send)

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
                        self._owners[value.decode("latin-1")] = principal_id
                        while len(self._owners) > _MAX_OWNED:
                            self._owners.popitem(last=False)
            await send(message)

        return sending

    def _forget_on_success(self, session: str, send: Send) -> Send:
        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start" and 200 <= int(message["status"]) < 300:
                self._owners.pop(session, None)
            await send(message)

        return sending


_UNAUTHORIZED = (
    b'{"error":"unauthorized","message":"send Authorization: Bearer <token> of a configured principal"}'
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
