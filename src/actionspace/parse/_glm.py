"""GLM-4.5 / 4.6 / 4.7 calls: the function name, then ``<arg_key>``/``<arg_value>`` pairs.

::

    <tool_call>get_weather
    <arg_key>city</arg_key>
    <arg_value>Beijing</arg_value>
    </tool_call>
    <tool_call>get_weather<arg_key>city</arg_key><arg_value>Shanghai</arg_value></tool_call>
    <tool_call>get_current_date</tool_call>

GLM-4.7 drops the newlines; a call may take no arguments. Values are typed by the tool's schema
when ``tools`` are known, else read as JSON when they are JSON and kept as text otherwise.
"""

from __future__ import annotations

from typing import Any

from actionspace.parse._qwen_xml import value_end
from actionspace.parse._result import Collector, Malformed
from actionspace.parse._scan import TOOL_NAME, Finder, skip_ws, snippet
from actionspace.parse._schema import coerce
from actionspace.types import ToolCall

__all__ = ["glm_call"]

ARG_KEY_OPEN, ARG_KEY_CLOSE = "<arg_key>", "</arg_key>"
ARG_VALUE_OPEN, ARG_VALUE_CLOSE = "<arg_value>", "</arg_value>"


def glm_call(text: str, body: int, close_tag: str, coll: Collector, finder: Finder) -> tuple[ToolCall, int]:
    """The call whose name starts at ``body``; returns it and the offset of ``close_tag``."""
    stops = [
        i
        for i in (finder.find("\n", body), finder.find(ARG_KEY_OPEN, body), finder.find(close_tag, body))
        if i >= 0
    ]
    name_end = min(stops) if stops else len(text)
    name = text[body:name_end].strip()
    if not name or not TOOL_NAME.fullmatch(name):
        reason = "truncated" if name_end >= len(text) and not stops else "missing_name"
        raise Malformed(
            reason, f"<tool_call> does not start with a function name ({snippet(text, body)!r})", pos=body
        )
    properties = coll.properties(name)
    arguments: dict[str, Any] = {}
    pos = name_end
    while True:
        pos = skip_ws(text, pos)
        if text.startswith(close_tag, pos) or pos >= len(text):
            return ToolCall(name=name, arguments=arguments), pos
        if not text.startswith(ARG_KEY_OPEN, pos):
            raise Malformed(
                "unexpected_text", f"expected {ARG_KEY_OPEN}, found {snippet(text, pos)!r}", pos=pos
            )
        key_close = finder.find(ARG_KEY_CLOSE, pos)
        if key_close < 0:
            raise Malformed("truncated", f"{ARG_KEY_OPEN} is never closed by {ARG_KEY_CLOSE}", pos=pos)
        key = text[pos + len(ARG_KEY_OPEN) : key_close].strip()
        value_open = skip_ws(text, key_close + len(ARG_KEY_CLOSE))
        if not text.startswith(ARG_VALUE_OPEN, value_open):
            reason = "truncated" if value_open >= len(text) else "missing_value"
            raise Malformed(
                reason, f"{ARG_KEY_OPEN}{key}{ARG_KEY_CLOSE} has no {ARG_VALUE_OPEN}", pos=value_open
            )
        value_close = value_end(
            text, value_open, len(text), ARG_VALUE_CLOSE, (ARG_KEY_OPEN, ARG_VALUE_OPEN), value_open
        )
        if not key or key in arguments:
            raise Malformed("duplicate_key", f"argument name {key!r} is empty or repeated", pos=pos)
        arguments[key] = coerce(text[value_open + len(ARG_VALUE_OPEN) : value_close], properties.get(key))
        pos = value_close + len(ARG_VALUE_CLOSE)
