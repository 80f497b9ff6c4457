"""What a status query can answer about an action whose outcome was lost, and asking it: the
answers, the query itself, whether the tool still dedupes a key, and the ``unknown_commit`` error
when nothing can be established (the commit protocol and recovery both decide with these)."""

from __future__ import annotations

import contextvars
import inspect
import threading
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


MAX_STATUS_WAIT_S = 300.0
"""The longest a status query is waited for, whatever the tool's ``timeout_s``."""
_MAX_REMOTE_ID = 1000
"""Characters a remote id may have."""


def query_status(spec: ToolSpec, entry: LedgerEntry) -> StatusAnswer:
    """Ask the tool's status query about ``entry``; any failure of the query itself is StillUnknown.

    The query is waited for at most the tool's ``timeout_s`` (capped at :data:`MAX_STATUS_WAIT_S`);
    one that does not answer by then is StillUnknown (its thread is left to end by itself), as is an
    answer that is not a status answer, or a ``Committed`` whose ``remote_id`` is neither text nor
    an integer (an integer is kept as its text).
    """
    if spec.status_query is None:
        return StillUnknown("the tool has no status query")
    ask = spec.status_query
    arguments = dict(entry.arguments)
    answers: list[Any] = []
    done = threading.Event()

    def run() -> None:
        try:
            answers.append(ask(key=entry.key, arguments=arguments))
        except BaseException as exc:  # on a thread of its own: nothing above it to stop
            answers.append(StillUnknown(f"status query failed: {type(exc).__name__}: {said_safely(exc)}"))
        finally:
            done.set()

    wait_s = min(spec.timeout_s, MAX_STATUS_WAIT_S)
    context = contextvars.copy_context()
    threading.Thread(target=context.run, args=(run,), name=f"status-query-{spec.name}", daemon=True).start()
    if not done.wait(wait_s):
        return StillUnknown(f"status query did not answer within {wait_s:g} s")
    return _checked(answers[0])


def _checked(answer: Any) -> StatusAnswer:
    if inspect.isawaitable(answer):
        close = getattr(answer, "close", None)
        if callable(close):  # a coroutine never awaited: closed, so it does not warn
            close()
        return StillUnknown("async status queries are answered by recover()")
    if isinstance(answer, Committed):
        remote: object = answer.remote_id  # typed text, yet whatever the query put there
        if type(remote) is int and -(2**63) <= remote < 2**63:
            return Committed(answer.result, str(remote))
        if remote is not None and not _fit_remote_id(remote):
            return StillUnknown(
                f"status query answered Committed with an unusable remote id ({_kind(remote)})"
            )
        return answer
    if isinstance(answer, NotCommitted | StillUnknown):
        return answer
    return StillUnknown(f"status query returned {type(answer).__name__}, not a status answer")


def _fit_remote_id(remote: object) -> bool:
    """True for text every store keeps as it is: no NUL, no unpaired surrogate, bounded."""
    if type(remote) is not str or len(remote) > _MAX_REMOTE_ID or "\x00" in remote:
        return False
    try:
        remote.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _kind(value: object) -> str:
    return type(value).__name__
