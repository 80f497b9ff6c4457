"""The toolsets a runtime opened (MCP servers): their tools registered, all closed together."""

from __future__ import annotations

from typing import Any

from actionspace.catalog.functions import TS, Toolset, ToolSource

__all__ = ["Toolsets"]


class Toolsets:
    """Opens toolsets from their sources, registers their tools in ``rt`` and closes them on ``close``."""

    __slots__ = ("_open", "_rt")

    def __init__(self, rt: Any) -> None:
        self._rt = rt
        self._open: list[Toolset] = []

    def add(self, source: ToolSource[TS]) -> TS:
        """Open ``source``'s toolset and register its tools; whatever ``register`` raises propagates."""
        toolset = source.toolset()
        toolset.register(self._rt)
        self._open.append(toolset)
        return toolset

    async def aadd(self, source: ToolSource[TS]) -> TS:
        """Async :meth:`add`."""
        toolset = source.toolset()
        await toolset.aregister(self._rt)
        self._open.append(toolset)
        return toolset

    def close(self) -> None:
        """Close every toolset opened here, in the order they were opened."""
        for toolset in self._open:
            toolset.close()
        self._open.clear()
