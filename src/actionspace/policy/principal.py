"""Principals, scopes, and the authorize stage."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import translate
from typing import Any

from actionspace.catalog.spec import ToolSpec
from actionspace.errors import ActionError
from actionspace.validation.verdicts import ACCEPTED, Accepted, Rejected

__all__ = ["Principal", "authorize"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Principal:
    """Who a call acts for, and what it may do.

    Scopes are glob patterns over ``<effect>:<tool>`` style names (or whatever a tool declares):
    ``"*"`` allows everything, ``"read:*"`` every read, ``"write:create_event"`` one tool.
    """

    id: str
    scopes: Sequence[str] = ()
    """Glob patterns; stored as a tuple."""
    tenant: str | None = None
    _matcher: re.Pattern[str] | None = field(init=False, repr=False, compare=False, default=None)
    _cache: dict[str, bool] = field(init=False, repr=False, compare=False, default_factory=dict)
    allowed_event: dict[str, str] = field(init=False, repr=False, compare=False, default_factory=dict)
    """The trace payload of an allowed call (shared: never mutated)."""

    def __post_init__(self) -> None:
        allowed = {"verdict": "allowed", "principal": self.id}
        if self.tenant is not None:  # whose budget a call spends is (id, tenant): replay charges it so
            allowed["tenant"] = self.tenant
        object.__setattr__(self, "allowed_event", allowed)
        scopes = (self.scopes,) if isinstance(self.scopes, str) else tuple(self.scopes)
        object.__setattr__(self, "scopes", scopes)
        if scopes:
            pattern = "|".join(f"(?:{translate(s)})" for s in scopes)
            object.__setattr__(self, "_matcher", re.compile(pattern))

    def allows(self, scope: str) -> bool:
        """True when one of the principal's scope patterns matches ``scope``."""
        hit = self._cache.get(scope)
        if hit is None:
            hit = self._matcher is not None and self._matcher.match(scope) is not None
            if len(self._cache) < 4096:
                self._cache[scope] = hit
        return hit

    def missing(self, scopes: Iterable[str]) -> list[str]:
        """The scopes of ``scopes`` this principal lacks."""
        return [s for s in scopes if not self.allows(s)]

    def to_dict(self) -> dict[str, Any]:
        """``{"id", "scopes", "tenant"}``: how a run's state and an approval request record it."""
        return {"id": self.id, "scopes": list(self.scopes), "tenant": self.tenant}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, allow_empty_id: bool = False) -> Principal:
        """The principal :meth:`to_dict` recorded.

        Raises ``ValueError`` when the id is missing or blank: principals are told apart by their
        id, so two of them without one would share every run and approval. ``allow_empty_id``
        reads such an id back as it was recorded (for what this runtime recorded itself, of a
        ``Principal(id="")`` made in code), never as another principal's. Scopes are a list of
        strings (one string is one scope, as in the constructor: ``"read:*"`` never becomes its
        characters, among them ``"*"``) and a tenant is a string or None; anything else raises
        ``ValueError``.
        """
        raw = data.get("id")
        ident = "" if raw is None else str(raw)
        if not ident.strip() and not allow_empty_id:
            raise ValueError(f"a principal needs a non-empty id, got {raw!r}")
        tenant = data.get("tenant")
        if tenant is not None and not isinstance(tenant, str):
            raise ValueError(f"a principal's tenant must be a string, got {tenant!r}")
        return cls(id=ident, scopes=_scopes(data.get("scopes")), tenant=tenant)


def _scopes(raw: Any) -> tuple[str, ...]:
    if raw is None:
        return ()
    if isinstance(raw, str):
        return (raw,)
    if not isinstance(raw, list | tuple) or not all(isinstance(s, str) for s in raw):
        raise ValueError(f"a principal's scopes must be a list of strings, got {raw!r}"[:200])
    return tuple(raw)


def authorize(spec: ToolSpec, principal: Principal) -> Accepted | Rejected:
    """Check the principal holds every scope the tool requires (reads included)."""
    scopes = spec.scopes or ()
    if len(scopes) == 1 and principal.allows(scopes[0]):
        return ACCEPTED
    missing = principal.missing(scopes)
    if not missing:
        return ACCEPTED
    error = ActionError.of(
        "permission_denied",
        f"principal {principal.id!r} lacks scope {missing[0]!r} for {spec.name}",
        details={"missing_scopes": missing, "principal": principal.id, "tool": spec.name},
    )
    return Rejected(error)
