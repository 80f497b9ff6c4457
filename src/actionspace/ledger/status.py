"""What a status query can answer about an action whose outcome was lost, and asking it: the
answers, the query itself, whether the tool still dedupes a key, and the ``unknown_commit`` error
when nothing can be established (the commit protocol and recovery both decide with these)."""

from __future__ import annotations

import inspect
import time
from dataclasses import dataclass
from typing import Any

from actionspace.catalog.spec import ToolSpec
from actionspace.errors import ActionError, said_safely
from actionspace.ledger.entries import LedgerEntry

__all__ = [
    "Committed",
    "NotCommitted",
    "StatusAnswer",
    "StillUnknown",
    "query_status",
    "unknown_commit_error",
    "within_window",
]


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


def unknown_commit_error(spec: ToolSpec, key: str, why: str) -> ActionError:
    return ActionError.of(
        "unknown_commit",
        f"{spec.name} may or may not have committed ({why}); it will not be sent again blindly",
        resource_ids=(key,),
        details={"idempotency_key": key, "idempotency": spec.idempotency, "reason": why},
    )


def within_window(spec: ToolSpec, entry: LedgerEntry, now: float | None = None) -> bool:
    """True while the tool still dedupes ``entry``'s key (its ``dedupe_window_s`` from the entry's
    creation; no declared window: always). Past it, the same key is a new request to the tool."""
    window = spec.dedupe_window_s
    return window is None or (time.time() if now is None else now) - entry.created_at < window


def query_status(spec: ToolSpec, entry: LedgerEntry) -> StatusAnswer:
    """Ask the tool's status query about ``entry``; any failure of the query itself is StillUnknown."""
    if spec.status_query is None:
        return StillUnknown("the tool has no status query")
    try:
        answer = spec.status_query(key=entry.key, arguments=dict(entry.arguments))
        if inspect.isawaitable(answer):
            return StillUnknown("async status queries are answered by recover()")
    except Exception as exc:
        return StillUnknown(f"status query failed: {type(exc).__name__}: {said_safely(exc)}")
    if isinstance(answer, Committed | NotCommitted | StillUnknown):
        return answer
    return StillUnknown(f"status query returned {type(answer).__name__}, not a status answer")
