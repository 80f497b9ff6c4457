"""Read isolation and write modes shared by the resource stores, and the transaction protocol.

Write modes (pass one as ``mode=`` to a store's ``write``):

* :class:`Overwrite` — replace whatever is there; the last writer wins. Only for resources
  that nobody else edits.
* :class:`Conditional` — write only if the resource is still at the version (or content hash)
  the caller based its change on. A mismatch is reported as one of two errors, and the
  difference matters to whoever acts on it:

  - ``stale_reference`` (with ``current_version``): the caller's base is outdated. Someone
    committed a newer version *before* this write was checked; the caller must observe again
    and rebuild its change on ``current_version``.
  - ``conflict``: the caller's base was current when checked, but a concurrent writer holds the
    resource (its lock could not be taken in time) or changed it *in the same instant* (between
    the check and the switch). Re-reading may show the same version a moment later; the caller
    re-reads, merges and acts again.

* :class:`Append` — add to the end (bytes for files, an item for a JSON list record) under the
  store's write lock; concurrent appends are never lost and need no base.

Read isolation (pass as ``mode=`` to ``read``): :class:`Latest` (the committed version now) or
:class:`AtVersion` (exactly that version; when it is not available the read is a
``stale_reference`` naming the current version). Several reads that must see one consistent
version set go through a store's ``snapshot()`` context manager.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol, runtime_checkable

from actionspace.errors import ConfigurationError, ToolError

__all__ = [
    "ABSENT",
    "LATEST",
    "Append",
    "AtVersion",
    "Conditional",
    "EnvironmentMode",
    "Latest",
    "Overwrite",
    "ReadMode",
    "Transaction",
    "Transactional",
    "WriteMode",
    "conflict",
    "sha256_hex",
    "stale",
    "version_matches",
]

ABSENT: Final = "absent"
"""The version/hash of a resource that does not exist: ``Conditional(content_hash=ABSENT)`` creates
a resource only if nobody created it first."""


def sha256_hex(data: bytes) -> str:
    """Hex sha256 of ``data``: the content hash stores report and conditional writes compare."""
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True, slots=True, kw_only=True)
class Overwrite:
    """Replace the resource unconditionally (last writer wins)."""

    kind: Literal["overwrite"] = "overwrite"


@dataclass(frozen=True, slots=True, kw_only=True)
class Conditional:
    """Write only if the resource is still at ``version`` or has ``content_hash`` (give exactly one).

    A mismatch raises ``ToolError("stale_reference", current_version=...)``; a concurrent writer
    holding or changing the resource at that instant raises ``ToolError("conflict")``.
    """

    version: int | str | None = None
    """The version the caller read (an int for records, a version token for files); None = unused."""
    content_hash: str | None = None
    """The sha256 hex the caller read, or :data:`ABSENT`; None = unused."""
    kind: Literal["conditional"] = "conditional"

    def __post_init__(self) -> None:
        if (self.version is None) == (self.content_hash is None):
            raise ConfigurationError("Conditional needs exactly one of version= or content_hash=")


@dataclass(frozen=True, slots=True, kw_only=True)
class Append:
    """Append to the resource under the store's write lock (no base needed, never loses an append)."""

    kind: Literal["append"] = "append"


WriteMode = Overwrite | Conditional | Append

EnvironmentMode = Literal["transaction", "switch"]
"""How a :class:`Transactional` makes writes visible together (the plan group's ``mode``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Latest:
    """Read the latest committed version."""

    kind: Literal["latest"] = "latest"


@dataclass(frozen=True, slots=True, kw_only=True)
class AtVersion:
    """Read exactly ``version``; when it is not available the read is a ``stale_reference``."""

    version: int | str
    """An int version (records), or a version token or content hash (files)."""
    kind: Literal["at_version"] = "at_version"


ReadMode = Latest | AtVersion

LATEST: Final = Latest()
"""The default read mode."""


def stale(resource_id: str, message: str, current_version: str | int | None, **details: Any) -> ToolError:
    """The ``stale_reference`` error of a write or read whose base is outdated."""
    current = ABSENT if current_version is None else str(current_version)
    return ToolError(
        "stale_reference",
        message,
        current_version=current,
        resource_ids=[resource_id],
        details={"resource_id": resource_id, "current_version": current, **details},
    )


def conflict(resource_id: str, message: str, **details: Any) -> ToolError:
    """The ``conflict`` error of a write that met a concurrent writer at the same instant."""
    return ToolError(
        "conflict", message, resource_ids=[resource_id], details={"resource_id": resource_id, **details}
    )


@runtime_checkable
class Transaction(Protocol):
    """An open transaction: writes made through it become visible together at ``commit``."""

    def commit(self) -> None:
        """Make every write visible at once. Raising means the outcome must be established by
        ``Transactional.committed(key)``."""

    def rollback(self) -> None:
        """Discard every write; nothing of this transaction becomes visible."""


@runtime_checkable
class Transactional(Protocol):
    """What a tool that "declares a transaction" writes through (``ToolSpec.transaction``).

    Register an object of this shape with ``rt.environment(name, env)``; a plan group of
    ``mode`` ``"transaction"`` (the environment's own transaction, :class:`RecordStore`) or
    ``"switch"`` (temporaries switched in at commit, :class:`FileSwitchEnvironment`) then runs
    its members inside one ``begin(key)`` and commits only when all of them succeeded. It is
    structurally the runtime's ``actionspace.plan.groups.Environment``.
    """

    mode: EnvironmentMode
    """How writes become visible together."""

    def begin(self, key: str) -> Transaction:
        """Open a transaction; committing it must record ``key`` durably with the writes."""

    def committed(self, key: str) -> bool | None:
        """Was the transaction for ``key`` committed? None when this cannot be told."""


def version_matches(mode: Conditional, version: int | str | None, content_hash: str | None) -> bool:
    """True when a resource at ``version``/``content_hash`` (None = absent) satisfies ``mode``."""
    if mode.content_hash is not None:
        return mode.content_hash == (content_hash if content_hash is not None else ABSENT)
    if version is None:
        return mode.version in (0, ABSENT)
    return str(mode.version) == str(version)
