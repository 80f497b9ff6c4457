"""What a tool may return besides its plain value: :class:`~actionspace.outcomes.ToolResult`.

Defined in :mod:`actionspace.types` (the ledger's recovery reads it too); kept here for imports.
"""

from __future__ import annotations

from actionspace.outcomes import ToolResult

__all__ = ["ToolResult"]
