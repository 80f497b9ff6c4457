"""What a tool may return besides its plain value: :class:`~actionspace.types.ToolResult`.

Defined in :mod:`actionspace.types` (the ledger's recovery reads it too); kept here for imports.
"""

from __future__ import annotations

from actionspace.types import ToolResult

__all__ = ["ToolResult"]
