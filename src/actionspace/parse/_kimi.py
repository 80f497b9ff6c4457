"""Kimi K2 calls: sections of ``functions.NAME:INDEX`` ids with JSON arguments.

::

    I'll check both.<|tool_calls_section_begin|>
    <|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{"city": "Bern"}<|tool_call_end|>
    <|tool_call_begin|>functions.get_weather:1 <|tool_call_argument_begin|>{"city": "Oslo"}<|tool_call_end|>
    <|tool_calls_section_end|>

The section tokens may also be spelled ``<|tool_call_section_begin|>`` / ``…_end|>``; the id may
omit ``functions.``; several sections may appear with text between them. The id names the
function: an id that does not (a bare counter such as ``0``) is a ``parse_error``, never a guess
from the offered tools.
"""

from __future__ import annotations

import re

from actionspace.parse._result import Collector, Malformed
from actionspace.parse._scan import decode_json_at, expect_end
from actionspace.parse._tokens import Markers, parse_sections
from actionspace.types import ToolCall

__all__ = ["KIMI", "KIMI_ARGUMENTS", "KIMI_SINGULAR", "parse_kimi"]

KIMI = Markers(
    "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>", "<|tool_call_end|>"
)
KIMI_SINGULAR = Markers(
    "<|tool_call_section_begin|>", "<|tool_call_section_end|>", "<|tool_call_begin|>", "<|tool_call_end|>"
)
KIMI_ARGUMENTS = "<|tool_call_argument_begin|>"
_KIMI_ID = re.compile(r"(?:functions\.)?([^\s<>]+):(\d+)")


def _kimi_call(text: str, body: int, end: int, coll: Collector) -> ToolCall:
    marker = text.find(KIMI_ARGUMENTS, body, end)
    if marker < 0:
        reason = "truncated" if end >= len(text) else "missing_arguments"
        raise Malformed(reason, f"call id is not followed by {KIMI_ARGUMENTS}", pos=body)
    call_id = text[body:marker].strip()
    match = _KIMI_ID.fullmatch(call_id)
    if match is None:
        raise Malformed("invalid_call_id", f"call id {call_id!r} is not functions.NAME:INDEX", pos=body)
    try:
        arguments, after = decode_json_at(text, marker + len(KIMI_ARGUMENTS), end, what="arguments")
        expect_end(text, after, end, "the arguments")
    except Malformed as fault:
        fault.details["call_id"] = call_id
        raise
    return ToolCall(name=match.group(1), arguments=arguments, id=call_id)


def parse_kimi(text: str, coll: Collector) -> None:
    """Every Kimi K2 call section in ``text``."""
    coll.note("kimi_k2")
    singular = KIMI_SINGULAR.section_open in text and KIMI.section_open not in text
    parse_sections(text, coll, KIMI_SINGULAR if singular else KIMI, _kimi_call)
