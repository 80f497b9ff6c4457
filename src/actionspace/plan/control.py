"""What a caller controls while a plan runs: per-tool limits and cancellation, and how a
cancelled node is reported (never as undone)."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping
from typing import Any

from actionspace.errors import ActionError, ConfigurationError
from actionspace.types import Observation

__all__ = ["CancelScope", "ToolLimit", "abort_outcome", "named_blocker", "tool_limits_of"]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ToolLimit:
    """Per-tool limits inside one plan. Both apply when both are set."""

    max_concurrent: int | None = None
    """Most calls of the tool running at once; None = only the plan's limit."""
    per_second: float | None = None
    """Most call starts per second (a sliding one-second window); None = unlimited."""

    def __post_init__(self) -> None:
        # a limit that admits no call would leave a plan waiting for ever: refused when made
        most = self.max_concurrent
        if most is not None and not (isinstance(most, int | float) and most >= 1):
            raise ConfigurationError(f"ToolLimit.max_concurrent must be at least 1 (or None), got {most!r}")
        rate = self.per_second
        if rate is not None and not (isinstance(rate, int | float) and rate > 0):
            raise ConfigurationError(f"ToolLimit.per_second must be above 0 (or None), got {rate!r}")


def tool_limits_of(limits: Mapping[str, int | ToolLimit] | None) -> dict[str, ToolLimit]:
    """Per tool name, its :class:`ToolLimit` (an int is a concurrency cap); raises
    ConfigurationError, naming the tool, for a limit that admits no call."""
    out: dict[str, ToolLimit] = {}
    for name, limit in (limits or {}).items():
        try:
            out[name] = limit if isinstance(limit, ToolLimit) else ToolLimit(max_concurrent=limit)
        except ConfigurationError as exc:
            raise ConfigurationError(f"tool_limits[{name!r}]: {exc}") from None
    return out


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

    def _pending(self) -> bool:
        with self._lock:
            return bool(self._requests)

    def _take(self) -> list[tuple[tuple[str, ...] | None, str]]:
        with self._lock:
            out, self._requests = self._requests, []
            return out


def named_blocker(inherited: tuple[str, str] | None, predecessor: str) -> str:
    """The node a cancelled waiter names: its predecessor's own blocker, else the predecessor."""
    return predecessor if inherited is None or inherited[0] == predecessor else inherited[0]


def abort_outcome(obs: Observation, answer: str) -> Observation:
    """A write asked to abort, reported as it ended: cancelled, committed anyway, or unknown_commit."""
    cancel = {"phase": "running", "hook": answer, "undone": False}
    if obs.status == "ok":  # committed anyway, whatever the hook said
        diagnostics = {**obs.diagnostics, "cancel": {**cancel, "phase": "committed"}}
        return dataclasses.replace(obs, diagnostics=diagnostics)
    assert obs.error is not None
    if answer == "cancelled":
        error = ActionError.of(
            "cancelled",
            f"{obs.tool} stopped before committing: its cancel hook confirmed the abort",
            details={**obs.error.details, "phase": "running", "hook": answer, "committed": False},
        )
    elif answer == "committed" or obs.error.category == "unknown_commit":
        error = ActionError.of(
            "unknown_commit",
            f"{obs.tool} was asked to abort and its outcome is not established; query its status",
            details={**obs.error.details, "phase": "running", "hook": answer},
        )
    else:
        return obs  # a definite failure of the tool stays what it was
    return dataclasses.replace(obs, error=error, diagnostics={**obs.diagnostics, "cancel": cancel})
