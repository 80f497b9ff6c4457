"""What business validators read: resource versions and the runtime's state, as a ValidationContext."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from actionspace.errors import ConfigurationError
from actionspace.validation.validator import ValidationContext

__all__ = ["ResourceVersions"]

VersionReader = Callable[[str], str | None]
"""``id -> current version`` of one kind of resource, or None when it no longer exists."""


class _Run(Protocol):
    @property
    def run_id(self) -> str: ...


class _HoldsState(Protocol):
    @property
    def state(self) -> Mapping[str, Any]: ...


class _Principal(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def scopes(self) -> Sequence[str]: ...


class ResourceVersions:
    """The resource-version readers by kind; builds each call's context with ``holder.state``.

    ``holder`` is the runtime: its ``state`` (handles to live services) is read at every context built,
    so a mapping assigned to ``rt.state`` later is the one validators see.
    """

    __slots__ = ("holder", "readers")

    def __init__(self, holder: _HoldsState) -> None:
        self.holder = holder
        self.readers: dict[str, VersionReader] = {}

    def add(self, kind: str, current_version: VersionReader) -> None:
        """Read the current version of resources of ``kind`` with ``current_version`` (replaces any)."""
        self.readers[kind] = current_version

    def version(self, kind: str, rid: str) -> str | None:
        """The current version of resource ``rid`` of ``kind``; ConfigurationError for a kind unknown."""
        fn = self.readers.get(kind)
        if fn is None:
            raise ConfigurationError(f"no resource version reader for kind {kind!r}; call rt.resource()")
        return fn(rid)

    def context(self, run: _Run, node: str, call_id: str, principal: _Principal) -> ValidationContext:
        """The context a validator of ``call_id`` (node ``node`` of ``run``) reads."""
        return ValidationContext(
            run_id=run.run_id,
            node_id=node,
            call_id=call_id,
            principal_id=principal.id,
            scopes=tuple(principal.scopes),
            resource_version=self.version,
            state=self.holder.state,
        )
