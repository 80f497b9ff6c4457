"""What a caller controls while a plan runs: per-tool limits and cancellation."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

__all__ = ["CancelScope", "ToolLimit"]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ToolLimit:
    """Per-tool limits inside one plan. Both apply when both are set."""

    max_concurrent: int | None = None
    """Most calls of the tool running at once; None = only the plan's limit."""
    per_second: float | None = None
    """Most call starts per second (a sliding one-second window); None = unlimited."""


class CancelScope:
    """Cancel a running plan (all of it, or some nodes and their descendants); thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: list[tuple[tuple[str, ...] | None, str]] = []
        self._wake: Any = None

    def cancel(self, nodes: list[str] | tuple[str, ...] | None = None, *, reason: str = "cancelled") -> None:
        """Request cancellation of ``nodes`` (None = the whole plan)."""
        with self._lock:
            self._requests.append((tuple(nodes) if nodes is not None else None, reason))
            wake = self._wake
        if wake is not None:
            wake()

    def _bind(self, wake: Any) -> list[tuple[tuple[str, ...] | None, str]]:
        with self._lock:
            self._wake = wake
            return list(self._requests)

    def _take(self) -> list[tuple[tuple[str, ...] | None, str]]:
        with self._lock:
            out, self._requests = self._requests, []
            return out
