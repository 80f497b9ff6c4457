"""What makes a server's message a malformed answer, and how a line glued to junk is read again.

JSON-RPC 2.0 lets an answer hold ``result`` or ``error``, never both, and a ``result`` that is
an object. The SDK reads an answer holding both as an error (its code, often one no table knows,
so ``unclassified``), and refuses one whose ``result`` is not an object as a line it cannot read:
the call then waits for its timeout. Both are answers that break the protocol: the transports end
the request they name with ``MALFORMED_ANSWER`` at once (``_mcp_errors`` maps it).

A stdio line can also begin with junk: bytes of a line the server left unended (a call cancelled
while its answer was being written, a log line without its newline) followed by the next message.
:func:`glued_starts` finds where that message may start, so it is read whole instead of being lost
with the junk, and its call answered instead of timed out. Each start tried costs a parse of the rest
of the line, so the tries of one line are bounded by the bytes they may parse together
(:func:`glued_budget`: twice the line and 64 KiB), not by their number: a hostile line of 30 MiB
holding 30 starts, each the head of an array running to the line's end, took 16 tries, 4.8 s of the
connection's thread and lost the answer behind them; now it takes 2.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Final

from mcp.shared.message import SessionMessage
from mcp_types import ErrorData, JSONRPCError, JSONRPCMessage, JSONRPCResponse, RequestId

if TYPE_CHECKING:  # only the HTTP transport's answers are written to one (the stdio reader imports this too)
    from actionspace.adapters._mcp_streams import Writing

__all__ = [
    "GLUED_BUDGET_BYTES",
    "GLUED_BUDGET_LINES",
    "answer_members",
    "error_answer",
    "glued_budget",
    "glued_starts",
    "holds_both",
    "other_id",
    "same_id",
]

GLUED_BUDGET_LINES: Final = 2
"""The tries of one unreadable line parse at most this many times its length in all (each try costs
the length of the line from its start), plus :data:`GLUED_BUDGET_BYTES`."""
GLUED_BUDGET_BYTES: Final = 64 * 1024
"""What a short line's tries may parse on top: a few tries however short the line."""
_START: Final = re.compile(rb'\{\s*"(?:jsonrpc|id|result|error|method|params)"\s*:')
"""Where a JSON-RPC message can start: an object whose first member is one of a message's own."""


def holds_both(raw: bytes | str, message: JSONRPCMessage) -> bool:
    """Whether the answer ``message``, read from ``raw``, holds both a result and an error."""
    if not isinstance(message, JSONRPCResponse | JSONRPCError):
        return False
    text = raw.encode() if isinstance(raw, str) else raw
    if b'"result"' not in text or b'"error"' not in text:  # the common case costs two scans, no parse
        return False
    try:
        members = json.loads(text)
    except (ValueError, RecursionError):  # nested deeper than Python parses: not the answer's members
        return False
    return isinstance(members, dict) and "result" in members and "error" in members


def answer_members(raw: bytes | str) -> dict[str, Any] | None:
    """The members of ``raw`` if it is a JSON object shaped as an answer (a ``result`` or an ``error``,
    no ``method``), else None. Its ``id`` may be missing, null, or of any JSON type."""
    text = raw.encode() if isinstance(raw, str) else raw
    if b'"result"' not in text and b'"error"' not in text:  # the common case costs two scans, no parse
        return None
    try:
        members: Any = json.loads(text)
    except (ValueError, RecursionError):  # nested deeper than Python parses: garbage, not an answer
        return None
    if not isinstance(members, dict) or "method" in members:
        return None
    if "result" not in members and "error" not in members:
        return None
    return members


def glued_budget(line: bytes) -> int:
    """How many bytes the tries of glued messages in ``line`` may parse together."""
    return GLUED_BUDGET_LINES * len(line) + GLUED_BUDGET_BYTES


def glued_starts(line: bytes) -> Iterator[int]:
    """Offsets after the line's start where a message glued to junk may begin, first first."""
    for found in _START.finditer(line, 1):
        yield found.start()


def same_id(answered: RequestId | None, asked: RequestId) -> bool:
    """Whether an answer's id names the request: the same value of the same type, as JSON-RPC asks (the
    SDK would take the string ``"1"``, or ``" 1"``, for request ``1``; ``_mcp_inflight`` does the same
    check over stdio)."""
    return answered is not None and type(answered) is type(asked) and answered == asked


def other_id(answered: RequestId | None) -> str:
    """What a malformed answer's message says of an answer naming another request."""
    return f"it answers another request id ({str(answered)[:50]!r})"


async def error_answer(
    writer: Writing[SessionMessage | Exception],
    request_id: RequestId,
    code: int,
    said: str,
    data: object = None,
) -> None:
    """Answer request ``request_id`` with the client's own error ``code``."""
    error = ErrorData(code=code, message=said, data=data)
    await writer.send(SessionMessage(JSONRPCError(jsonrpc="2.0", id=request_id, error=error)))
