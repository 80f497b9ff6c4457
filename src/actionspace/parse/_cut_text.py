"""What raw model text reads as once its server said it was cut off (a finish reason apart from it).

A cut output may hold less of any call than the model meant to send, so it keeps none of its
calls, however whole they look; with no call read, text that stops as one began (``…<tool_ca``,
``{"na``) is ``cut_off`` too, not an answer. Read as :meth:`StreamParser.output` hands the text on
(a cut chunk's content, where JSON that is no call is words), so that both, and a completion
holding the same text, give one verdict.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from actionspace.parse._result import Collector, Malformed, ParseResult, parse_error
from actionspace.parse._structured import cut_off_fault
from actionspace.parse._text import begun_call, parse_text
from actionspace.parse._text_ids import text_call_ids

__all__ = ["cut_text"]


def cut_text(text: str, tools: Sequence[Mapping[str, Any]] | None, why: str, path: str) -> ParseResult:
    """``text`` read as cut off (``why``, at ``path``): a ``cut_off`` parse error keeping no call
    when it holds a call (or a fault) or stops as one began; else what it reads as."""
    coll = Collector(tools)
    parse_text(text, coll, strict=False)
    result = coll.result()
    if result.calls or result.error:
        fault: Malformed | None = cut_off_fault(why, path, ids=text_call_ids(text, strict=False))
    else:
        fault = begun_call(text, why, path)
    if fault is None:
        return result
    error = parse_error(
        result.format, fault.reason, fault.message, pos=fault.pos, text=fault.source, **fault.details
    )
    return ParseResult(
        calls=(),
        content=result.content,
        reasoning=result.reasoning,
        error=error,
        format=result.format,
        refusal=result.refusal,
    )
