"""Bearer-token authentication, per-route scopes, and how often a client or a principal may ask.

Each token maps to a :class:`Principal`; a route names the scope it needs and the principal must
hold it (glob patterns, ``"*"`` allows everything). No token or an unknown token is 401; a known
token without the scope is 403. Tokens are compared in constant time. One function decides who
the caller is (``_caller``), once per request: :class:`BeforeBody`, :func:`authenticated` (run on
every route but the health one before its id and query checks) and :func:`require` all ask it.

A request that carries a body (any method but GET, HEAD and OPTIONS) is authenticated before a
byte of its body is read (:class:`BeforeBody`, run by :class:`~actionspace.service.limits.BodyLimits`
once the declared length passed), so a client without a good token cannot make the server read or
parse a body to get its 401; such an answer closes the connection, since the body is left unread.

Guessing is bounded: each client network has :data:`GUESSES_PER_MINUTE` unknown tokens to spend,
given back at that rate: an IPv4 address, or an IPv6 /64 whatever its address in it, an IPv4-mapped
IPv6 address counting as its IPv4 one (:func:`~actionspace.service.proxies.guess_key`). A network
that spent them is answered 429 (``rate_limited``, with
``Retry-After``) for every token, a good one too (else the one answer that is not a 429 would name
the right guess), until one comes back. A known token spends nothing. The address is the
connecting one, or, from a trusted proxy, the one it forwards (:mod:`actionspace.service.proxies`).

A request carrying more than one ``Authorization`` header is answered 400 before any token is
compared: a proxy in front may check one and the service would act on another.

Requests are bounded too when the application has a :class:`RateLimit`: each principal (its id,
within its tenant) may make that many, then is answered 429 ``rate_limited`` with ``Retry-After``.
"""

from __future__ import annotations

import hmac
import math
import secrets
import time
from collections.abc import Callable, Mapping
from typing import Annotated, Final

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.security.utils import get_authorization_scheme_param
from starlette.types import Message, Scope, Send

from actionspace.errors import ConfigurationError
from actionspace.policy.principal import Principal
from actionspace.service.errors import error_response
from actionspace.service.proxies import TrustedProxies, client_address, guess_key
from actionspace.service.quotas import Allowance, RateLimit

__all__ = [
    "GUESSES_PER_MINUTE",
    "SCOPES",
    "Auth",
    "BeforeBody",
    "admin_principal",
    "authenticated",
    "new_token",
    "require",
]

SCOPES: Final = (
    "runs:read",
    "runs:write",
    "approvals:read",
    "approvals:decide",
    "ledger:read",
    "ledger:resolve",
    "catalog:read",
    "metrics:read",
)
"""Every scope a route of the API checks."""
GUESSES_PER_MINUTE: Final = 100
"""Unknown tokens one client network may send: all at once, then this many a minute."""
_ADDRESSES: Final = 10_000
"""Most client networks whose guesses are remembered (the longest quiet go first)."""
_AUTHENTICATED: Final = "actionspace.principal"
"""Where :class:`BeforeBody` leaves the principal in the request's state, for the route's check."""

_bearer = HTTPBearer(auto_error=False, description="An API token: `Authorization: Bearer <token>`.")


def new_token() -> str:
    """A fresh random API token (URL-safe, 256 bits)."""
    return secrets.token_urlsafe(32)


def admin_principal(principal_id: str = "admin") -> Principal:
    """A principal holding every scope (``"*"``): every route and every tool."""
    return Principal(id=principal_id, scopes=("*",))


class Auth:
    """The token table of one application, the guesses left to each client network, and the
    requests left to each principal."""

    def __init__(
        self,
        tokens: Mapping[str, Principal],
        *,
        clock: Callable[[], float] = time.monotonic,
        rate_limit: RateLimit | None = None,
        trusted_proxies: TrustedProxies | None = None,
    ) -> None:
        """Raises ConfigurationError when a token's principal has an empty id: principals are
        told apart by their id, so two such tokens would share every run and approval.
        ``clock``: seconds, for the guesses and requests given back (tests). ``rate_limit``:
        requests per principal (None: unbounded). ``trusted_proxies``: whose ``X-Forwarded-For``
        names the client (None: nobody's)."""
        if any(not p.id.strip() for p in tokens.values()):
            raise ConfigurationError("every API token's principal needs a non-empty id")
        self._tokens = [(t.encode(), p) for t, p in tokens.items() if t]
        self._guesses = Allowance(RateLimit(requests=GUESSES_PER_MINUTE), keys=_ADDRESSES, clock=clock)
        self.rate_limit = rate_limit
        self._requests = None if rate_limit is None else Allowance(rate_limit, keys=_ADDRESSES, clock=clock)
        self.trusted_proxies = trusted_proxies or TrustedProxies()

    def principal(self, token: str | None, *, client: str | None = None) -> Principal | None:
        """The principal of ``token``; None when it is missing or unknown (a guess ``client`` spent)."""
        if not token:
            return None
        given = token.encode()
        found = None
        for known, principal in self._tokens:  # no early exit: timing does not tell which token matched
            if hmac.compare_digest(known, given):
                found = principal
        if found is None and client is not None:
            self._guesses.spend(guess_key(client))
        return found

    def retry_after(self, client: str) -> float | None:
        """Seconds until ``client`` may guess again; None when it has guesses left."""
        return self._guesses.wait(guess_key(client))

    def client(self, request: Request) -> str:
        """The address ``request`` came from, as the guesses are counted by."""
        peer = request.client.host if request.client is not None else ""
        return client_address(peer, request.headers.getlist("x-forwarded-for"), self.trusted_proxies)

    def authenticate(self, token: str | None, client: str) -> Principal:
        """The principal of ``token`` sent from ``client``, with one request of its allowance spent.

        Raises HTTPException: 401 for a missing or unknown token, 429 when ``client`` spent its
        guesses or the principal its requests (``Retry-After`` says how long to wait).
        """
        if not token:
            raise _unauthorized("missing bearer token")
        wait = self.retry_after(client)
        if wait is not None:
            raise _too_many(
                "too many unknown tokens from this address (or its network); try again later", wait
            )
        principal = self.principal(token, client=client)
        if principal is None:
            raise _unauthorized("unknown or revoked token")
        if self._requests is not None:
            wait = self._requests.take((principal.tenant, principal.id))
            if wait is not None:
                limit = self.rate_limit
                raise _too_many(f"this principal's rate limit ({limit}) is spent; try again later", wait)
        return principal


class BeforeBody:
    """Authenticates a request before its body is read: answers 401 / 429 itself, or passes it on.

    Called by :class:`~actionspace.service.limits.BodyLimits` with the request's scope; reads the
    token table of ``app`` when called (tests swap ``app.state.auth``). The principal found is left
    for the route's :func:`require`, which then neither looks it up nor counts it again.
    """

    def __init__(self, app: FastAPI) -> None:
        self._app = app

    async def __call__(self, scope: Scope, send: Send) -> bool:
        """True when it answered the request (the body must then not be read)."""
        try:
            _caller(Request(scope), self._app.state.auth)
        except HTTPException as exc:
            response = error_response(exc)
            response.headers["Connection"] = "close"  # the body stays unread: the connection cannot go on
            await response(scope, _gone, send)
            return True
        return False


async def _gone() -> Message:
    return {"type": "http.disconnect"}


def _one_authorization(request: Request) -> None:
    """Raise HTTPException 400 when ``request`` carries several ``Authorization`` headers."""
    count = len(request.headers.getlist("authorization"))
    if count > 1:
        raise HTTPException(
            status_code=400, detail=f"the request carries {count} Authorization headers; send one"
        )


def authenticated(request: Request) -> Principal:
    """The caller's principal, or the 400 / 401 / 429 :func:`require` answers. Every route but the
    health one runs it first, ahead of its id and query checks and of its own dependencies
    (:func:`~actionspace.service.deps.route_checks`)."""
    return _caller(request, request.app.state.auth)


def _caller(request: Request, auth: Auth) -> Principal:
    """Who sent ``request``: the one place that decides it, for :class:`BeforeBody`,
    :func:`authenticated` and :func:`require` alike. Found once per request (left in its state),
    so a later check neither looks the token up nor counts the request again.

    Raises HTTPException 400 for several ``Authorization`` headers, 401 for no bearer token or an
    unknown one, 429 for a client network out of guesses or a principal out of requests.
    """
    state = request.scope.setdefault("state", {})
    principal: Principal | None = state.get(_AUTHENTICATED)
    if principal is None:
        _one_authorization(request)
        scheme, token = get_authorization_scheme_param(request.headers.get("authorization"))
        given = token if scheme.lower() == "bearer" and token else None  # as HTTPBearer reads it
        principal = auth.authenticate(given, auth.client(request))
        state[_AUTHENTICATED] = principal
    return principal


def _unauthorized(message: str) -> HTTPException:
    return HTTPException(status_code=401, detail=message, headers={"WWW-Authenticate": "Bearer"})


def _too_many(message: str, wait: float) -> HTTPException:
    return HTTPException(
        status_code=429, detail=message, headers={"Retry-After": str(max(1, math.ceil(wait)))}
    )


def require(scope: str) -> Callable[..., Principal]:
    """A dependency that returns the caller's principal, or answers 400 / 401 / 403 / 429."""

    def check(
        request: Request,
        _credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    ) -> Principal:
        # ``_credentials``: what names the bearer scheme in the OpenAPI document; the token is read
        # by authenticated, as for every check of the request
        principal = authenticated(request)
        if not principal.allows(scope):
            raise HTTPException(status_code=403, detail=f"principal {principal.id!r} lacks scope {scope!r}")
        return principal

    check.__name__ = f"require_{scope.replace(':', '_')}"
    return check
