"""Bearer-token authentication and per-route scopes.

Each token maps to a :class:`Principal`; a route names the scope it needs and the principal must
hold it (glob patterns, ``"*"`` allows everything). No token or an unknown token is 401; a known
token without the scope is 403. Tokens are compared in constant time.

Guessing is bounded: each client address has :data:`GUESSES_PER_MINUTE` unknown tokens to spend,
given back at that rate. An address that spent them is answered 429 (``rate_limited``, with
``Retry-After``) for every token, a good one too (else the one answer that is not a 429 would name
the right guess), until one comes back. A known token spends nothing.
"""

from __future__ import annotations

import hmac
import math
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Annotated, Final

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from actionspace.errors import ConfigurationError
from actionspace.policy.principal import Principal

__all__ = ["GUESSES_PER_MINUTE", "SCOPES", "Auth", "admin_principal", "new_token", "require"]

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
"""Unknown tokens one client address may send: all at once, then this many a minute."""
_ADDRESSES: Final = 10_000
"""Most client addresses whose guesses are remembered (the longest quiet go first)."""

_bearer = HTTPBearer(auto_error=False, description="An API token: `Authorization: Bearer <token>`.")


def new_token() -> str:
    """A fresh random API token (URL-safe, 256 bits)."""
    return secrets.token_urlsafe(32)


def admin_principal(principal_id: str = "admin") -> Principal:
    """A principal holding every scope (``"*"``): every route and every tool."""
    return Principal(id=principal_id, scopes=("*",))


class Auth:
    """The token table of one application, and the guesses left to each client address."""

    def __init__(
        self, tokens: Mapping[str, Principal], *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        """Raises ConfigurationError when a token's principal has an empty id: principals are
        told apart by their id, so two such tokens would share every run and approval.
        ``clock``: seconds, for the guesses given back (tests)."""
        if any(not p.id.strip() for p in tokens.values()):
            raise ConfigurationError("every API token's principal needs a non-empty id")
        self._tokens = [(t.encode(), p) for t, p in tokens.items() if t]
        self._clock = clock
        self._spent: OrderedDict[str, tuple[float, float]] = OrderedDict()
        """Client address → (guesses spent, when last counted)."""
        self._lock = threading.Lock()  # routes (and this check) run on the thread pool

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
            self._spend(client)
        return found

    def retry_after(self, client: str) -> float | None:
        """Seconds until ``client`` may guess again; None when it has guesses left."""
        with self._lock:
            spent = self._spent_now(client)
        if spent <= GUESSES_PER_MINUTE - 1:
            return None
        return (spent - (GUESSES_PER_MINUTE - 1)) * 60.0 / GUESSES_PER_MINUTE

    def _spent_now(self, client: str) -> float:
        spent, at = self._spent.get(client, (0.0, 0.0))
        return max(0.0, spent - (self._clock() - at) * GUESSES_PER_MINUTE / 60.0)

    def _spend(self, client: str) -> None:
        with self._lock:
            self._spent[client] = (self._spent_now(client) + 1, self._clock())
            self._spent.move_to_end(client)
            while len(self._spent) > _ADDRESSES:
                self._spent.popitem(last=False)


def _unauthorized(message: str) -> HTTPException:
    return HTTPException(status_code=401, detail=message, headers={"WWW-Authenticate": "Bearer"})


def require(scope: str) -> Callable[..., Principal]:
    """A dependency that returns the caller's principal, or answers 401 / 403."""

    def check(
        request: Request,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    ) -> Principal:
        auth: Auth = request.app.state.auth
        if credentials is None:
            raise _unauthorized("missing bearer token")
        client = request.client.host if request.client is not None else ""
        wait = auth.retry_after(client)
        if wait is not None:
            raise HTTPException(
                status_code=429,
                detail="too many unknown tokens from this address; try again later",
                headers={"Retry-After": str(math.ceil(wait))},
            )
        principal = auth.principal(credentials.credentials, client=client)
        if principal is None:
            raise _unauthorized("unknown or revoked token")
        if not principal.allows(scope):
            raise HTTPException(status_code=403, detail=f"principal {principal.id!r} lacks scope {scope!r}")
        return principal

    check.__name__ = f"require_{scope.replace(':', '_')}"
    return check
