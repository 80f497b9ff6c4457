"""``<tool_call>…</tool_call>`` blocks: Hermes / Qwen2.5 JSON, or a Qwen3-Coder or GLM body.

Hermes::

    <tool_call>
    {"name": "get_weather", "arguments": {"city": "Paris"}}
    </tool_call>

The body's first character decides: ``{`` is Hermes JSON, ``[`` a Granite 3.1 list of calls
(``<tool_call>[{"name": …, "arguments": …}]``, its closing tag optional), ``<function=`` is
Qwen3-Coder XML (:mod:`~actionspace.parse._qwen_xml`), anything else a GLM name and argument pairs
(:mod:`~actionspace.parse._glm`). Each body is read to its own end before ``</tool_call>`` is
expected, so a marker inside a string argument stays part of the argument.
"""

from __future__ import annotations

from collections.abc import Mapping

from actionspace.parse._glm import glm_call
from actionspace.parse._json_marked import json_list_call
from actionspace.parse._qwen_xml import FUNCTION_OPEN, xml_function
from actionspace.parse._result import Collector, Malformed
from actionspace.parse._scan import Finder, decode_json_at, skip_ws, snippet
from actionspace.parse._structured import call_from_generic
from actionspace.types import ToolCall

__all__ = ["TOOL_CALL_OPEN", "parse_tool_call_tags"]

TOOL_CALL_OPEN, TOOL_CALL_CLOSE = "<tool_call>", "</tool_call>"


def parse_tool_call_tags(text: str, coll: Collector) -> None:
    """Every ``<tool_call>`` block in ``text``, with the text around them as content."""
    finder = Finder(text)
    pos = 0
    while (start := finder.find(TOOL_CALL_OPEN, pos)) >= 0:
        coll.add_content(text[pos:start])
        body = start + len(TOOL_CALL_OPEN)
        first = skip_ws(text, body)
        if text.startswith("[", first):  # Granite 3.1: a JSON list of calls, no closing tag
            coll.note("granite")
            end = skip_ws(text, json_list_call(text, first, TOOL_CALL_OPEN, coll))
            if text.startswith(TOOL_CALL_CLOSE, end):
                end += len(TOOL_CALL_CLOSE)
            elif end < len(text) and not text.startswith(TOOL_CALL_OPEN, end):
                raise Malformed(
                    "unexpected_text", f"unexpected text {snippet(text, end)!r} after the calls", pos=end
                )
            pos = end
            continue
        if text.startswith("{", first):
            coll.note("hermes")
            call, after = _hermes(text, first)
        elif text.startswith(FUNCTION_OPEN, first):
            coll.note("qwen3_xml")
            call, after = xml_function(text, first, len(text), coll)
        else:
            coll.note("glm45")
            call, after = glm_call(text, body, TOOL_CALL_CLOSE, coll, finder)
        close = skip_ws(text, after)
        if not text.startswith(TOOL_CALL_CLOSE, close):
            if close >= len(text) or text.startswith(TOOL_CALL_OPEN, close):
                raise Malformed(
                    "unterminated_block", f"{TOOL_CALL_OPEN} is never closed by {TOOL_CALL_CLOSE}", pos=start
                )
            raise Malformed(
                "unexpected_text", f"unexpected text {snippet(text, close)!r} in {TOOL_CALL_OPEN}", pos=close
            )
        coll.add_call(call)
        pos = close + len(TOOL_CALL_CLOSE)
    coll.add_content(text[pos:])


def _hermes(text: str, first: int) -> tuple[ToolCall, int]:
    value, after = decode_json_at(text, first, what="<tool_call> JSON body")
    if not isinstance(value, Mapping):
        raise Malformed("not_an_object", "<tool_call> body must be a JSON object", pos=first)
    try:
        return call_from_generic(value, "<tool_call>"), after
    except Malformed as fault:
        raise fault.at(first) from None
