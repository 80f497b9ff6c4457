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
    """Where the next page starts (opaque to the model); None on the last page."""
    total: int | None = None
    """How many items the whole listing holds, when the tool knows it."""
    sort_key: str | None = None
    """The order pages follow (``"id"``, ``"-created_at"``); kept in ``diagnostics["sort_key"]``."""
    after: str | None = None
    """The cursor this page was asked for (None: the first page); kept in ``diagnostics["after"]``."""
