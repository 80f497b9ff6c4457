"""How much structure one MCP answer may hold: its JSON objects and arrays, counted before any parse.

The byte bound on a message (32 MiB, ``_mcp_stdio`` / ``_mcp_http``) alone still lets a hostile
server send a million tiny content blocks (``{"type":"text","text":""}`` is 25 bytes): parsing
them takes about 1.5 GB and tens of seconds on the connection's thread, where every other call to
that server waits, before the SDK checks each block and the adapter summarises it. An answer with
more than :data:`MAX_CONTAINERS` objects and arrays is therefore refused unparsed, as too large.
The count skips JSON strings, so a long text full of braces (source code, a JSON document as text)
is not refused; it costs a scan only when the bytes hold more braces than the bound.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["MAX_CONTAINERS", "too_structured"]

MAX_CONTAINERS: Final = 100_000
"""Most JSON objects and arrays one answer of a server may hold."""
_BYTE_TOKENS: Final = re.compile(rb'"(?:[^"\\]++|\\.)*+"|[{\[]')
_TEXT_TOKENS: Final = re.compile(r'"(?:[^"\\]++|\\.)*+"|[{\[]')
"""A JSON string (skipped whole) or the opening of an object or array (counted)."""


def too_structured(raw: bytes | str, limit: int = MAX_CONTAINERS) -> bool:
    """Whether the JSON text ``raw`` opens more than ``limit`` objects and arrays outside its strings.

    Stops counting at the bound, so a refused answer costs a scan of its first part only.
    """
    if isinstance(raw, bytes):
        if raw.count(b"{") + raw.count(b"[") <= limit:
            return False
        tokens = _BYTE_TOKENS.finditer(raw)
    else:
        if raw.count("{") + raw.count("[") <= limit:
            return False
        tokens = _TEXT_TOKENS.finditer(raw)  # type: ignore[assignment]
    opened = 0
    for token in tokens:
        if token.end() - token.start() == 1:  # a string token has its two quotes at least
            opened += 1
            if opened > limit:
                return True
    return False
