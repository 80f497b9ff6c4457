"""The versions of one MCP server's tools: one per definition, reused when it comes back, bounded.

A server may change its tool list forever (a list that flips, a schema field that changes on
every listing, names that never repeat). Each distinct definition of a remote tool gets a version
once: a definition listed again after it was retired is the same version, made active again.
Retired versions are kept, for reuse and for the ``version_mismatch`` that names an earlier
version, only up to :data:`RETIRED_PER_TOOL` per tool and :data:`RETIRED_TOTAL` per server; older
ones are dropped from the catalog. What holds only their key (a run's pin, an approval request, a
ledger entry) keeps working as for any retired version. Version numbers only grow: a name seen
again after its history was dropped continues above every number given before, so a key never
names two definitions.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from actionspace.adapters._mcp_errors import ToolChanged
from actionspace.catalog.spec import ToolSpec

__all__ = ["RETIRED_PER_TOOL", "RETIRED_TOTAL", "ToolVersions"]

RETIRED_PER_TOOL = 8
"""Most retired versions kept per remote tool."""
RETIRED_TOTAL = 256
"""Most retired versions kept per server, over all its tools."""


class ToolVersions:
    """Current and retired versions by remote tool name and definition fingerprint (not thread-safe)."""

    def __init__(self) -> None:
        self.current: dict[str, tuple[str, ToolSpec]] = {}
        """Remote tool name → (fingerprint, registered spec)."""
        self._retired: OrderedDict[tuple[str, str], ToolSpec] = OrderedDict()
        """(remote name, fingerprint) → the retired spec, oldest retirement first."""
        self._retired_count: dict[str, int] = {}
        self._last: dict[str, int] = {}
        """Remote tool name → the last version number given, while the name is current or kept."""
        self._floor = 0
        """The highest number given to a name since forgotten."""

    def unchanged(self, remote: str, digest: str, key: str) -> Callable[[], None]:
        """What raises :class:`ToolChanged` unless ``digest`` is still the current definition of
        ``remote``: checked just before a call of version ``key`` is sent (``Connection.call_tool``)."""

        def check() -> None:
            now = self.current.get(remote)
            if now is None or now[0] != digest:
                current = "it is no longer offered" if now is None else f"it is now {now[1].key}"
                raise ToolChanged(
                    f"{key} changed on the server before the call was sent ({current}); nothing was sent: "
                    "read the tool's current definition and call it again"
                )

        return check

    def next_number(self, remote: str) -> int:
        """The version number a new definition of ``remote`` gets."""
        return self._last.get(remote, self._floor) + 1

    def numbered(self, remote: str, number: int) -> None:
        """Note that ``number`` was given to a definition of ``remote``."""
        self._last[remote] = number

    def take(self, remote: str, digest: str) -> ToolSpec | None:
        """The retired version of ``remote`` with this definition, no longer counted as retired."""
        spec = self._retired.pop((remote, digest), None)
        if spec is not None:
            self._retired_count[remote] -= 1
        return spec

    def keep(self, remote: str, digest: str, spec: ToolSpec) -> list[ToolSpec]:
        """Keep a just retired version; returns the versions beyond the bounds, to drop."""
        self._retired[(remote, digest)] = spec
        self._retired_count[remote] = self._retired_count.get(remote, 0) + 1
        evicted: list[ToolSpec] = []
        if self._retired_count[remote] > RETIRED_PER_TOOL:
            oldest = next(k for k in self._retired if k[0] == remote)
            evicted.append(self._evict(oldest))
        while len(self._retired) > RETIRED_TOTAL:
            evicted.append(self._evict(next(iter(self._retired))))
        return evicted

    def _evict(self, entry: tuple[str, str]) -> ToolSpec:
        remote = entry[0]
        spec = self._retired.pop(entry)
        self._retired_count[remote] -= 1
        if not self._retired_count[remote]:
            del self._retired_count[remote]
            if remote not in self.current:  # nothing of the name is left: forget its numbers
                self._floor = max(self._floor, self._last.pop(remote, 0))
        return spec
