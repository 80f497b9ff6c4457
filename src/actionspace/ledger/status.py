"""What a status query can answer about an action whose outcome was lost."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Committed", "NotCommitted", "StatusAnswer", "StillUnknown"]


@dataclass(frozen=True, slots=True)
class Committed:
    """The action did commit; ``result`` is what the tool would have returned (value or ToolResult)."""

    result: Any = None
    remote_id: str | None = None


@dataclass(frozen=True, slots=True)
class NotCommitted:
    """The action certainly did not commit: it may be sent again with the same key."""


@dataclass(frozen=True, slots=True)
class StillUnknown:
    """The service cannot tell (yet); a person has to reconcile."""

    reason: str = ""


StatusAnswer = Committed | NotCommitted | StillUnknown
"""``status_query(key=..., arguments=...)`` returns one of these."""
