"""What makes a server's message a malformed answer, and how a line glued to junk is read again.

JSON-RPC 2.0 lets an answer hold ``result`` or ``error``, never both, and a ``result`` that is
an object. The SDK reads an answer holding both as an error (its code, often one no table knows,
so ``unclassified``), and refuses one whose ``result`` is not an object as a line it cannot read:
the call then waits for its timeout. Both are answers that break the protocol: the transports end
the request they name with ``MALFORMED_ANSWER`` at once (``_mcp_errors`` maps it).

A stdio line can also begin with junk: bytes of a line the server left unended (a call cancelled
while its answer was being written, a log line without its newline) followed by the next message.
:func:`glued_starts` finds where that message starts, so it is read whole instead of being lost
with the junk, and its call answered instead of timed out.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from mcp_types import JSONRPCError, JSONRPCMessage, JSONRPCResponse

__all__ = ["MAX_GLUED_TRIES", "answered_id", "glued_starts", "holds_both"]

MAX_GLUED_TRIES: Final = 16
"""Most starts tried in one unreadable line: each costs a parse up to where it breaks, so it is bounded."""
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


def answered_id(raw: bytes | str) -> int | str | None:
    """The request id of ``raw`` if it is a JSON object shaped as an answer (an id, a ``result`` or
    an ``error``, no ``method``) that the protocol's types refused, else None."""
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
    request_id = members.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, int | str):
        return None  # a null id names no request: that call ends at its timeout
    return request_id


def glued_starts(line: bytes) -> list[int]:
    """Offsets after the line's start where a message glued to junk may begin, first first (bounded)."""
    starts: list[int] = []
    for found in _START.finditer(line, 1):
        starts.append(found.start())
        if len(starts) == MAX_GLUED_TRIES:
            break
    return starts
