"""Bearer-token authentication and per-route scopes.

Each token maps to a :class:`Principal`; a route names the scope it needs and the principal must
hold it (glob patterns, ``"*"`` allows everything). No token or an unknown token is 401; a known
token without the scope is 403. Tokens are compared in constant time.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Callable, Mapping
from typing import Annotated, Final

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from actionspace.errors import ConfigurationError
from actionspace.policy.principal import Principal

__all__ = ["SCOPES", "Auth", "admin_principal", "new_token", "require"]

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

_bearer = HTTPBearer(auto_error=False, description="An API token: `Authorization: Bearer <token>`.")


def new_token() -> str:
    """A fresh random API token (URL-safe, 256 bits)."""
    return secrets.token_urlsafe(32)


def admin_principal(principal_id: str = "admin") -> Principal:
    """A principal holding every scope (``"*"``): every route and every tool."""
    return Principal(id=principal_id, scopes=("*",))


class Auth:
    """The token table of one application."""

    def __init__(self, tokens: Mapping[str, Principal]) -> None:
        """Raises ConfigurationError when a token's principal has an empty id: principals are
        told apart by their id, so two such tokens would share every run and approval."""
        if any(not p.id.strip() for p in tokens.values()):
            raise ConfigurationError("every API token's principal needs a non-empty id")
        self._tokens = [(t.encode(), p) for t, p in tokens.items() if t]

    def principal(self, token: str | None) -> Principal | None:
        """The principal of ``token``; None when it is missing or unknown."""
        if not token:
            return None
        given = token.encode()
        found = None
        for known, principal in self._tokens:  # no early exit: timing does not tell which token matched
            if hmac.compare_digest(known, given):
                found = principal
        return found


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
        principal = auth.principal(credentials.credentials)
        if principal is None:
            raise _unauthorized("unknown or revoked token")
        if not principal.allows(scope):
            raise HTTPException(status_code=403, detail=f"principal {principal.id!r} lacks scope {scope!r}")
        return principal

    check.__name__ = f"require_{scope.replace(':', '_')}"
    return check
