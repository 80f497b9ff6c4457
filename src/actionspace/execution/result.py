"""What a tool may return besides its plain value."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from actionspace.types import Effect

__all__ = ["ToolResult"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResult:
    """A tool's result with the facts the observation needs beyond the data.

    A tool may return a plain value (it becomes ``data``) or this, to report effects and versions::

        return ToolResult(data={"id": eid}, effects=[Effect(resource_id=f"event:{eid}", kind="created")])
    """

    data: Any = None
    effects: tuple[Effect, ...] = ()
    resource_version: str | None = None
    """Version of the resource the data describes (for later ``ResourceRef`` checks)."""
    remote_id: str | None = None
    """The service's own id of the transaction, kept in diagnostics and (later) the ledger."""
    complete: bool = True
    """False when the tool itself returned a page or a partial answer."""
    cursor: str | None = None
    total: int | None = None
