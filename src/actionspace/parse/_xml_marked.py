"""XML calls in a marked block: Seed-OSS and MiniMax-M2.

Seed-OSS (Qwen3-Coder's ``<function=…>`` elements in a ``<seed:tool_call>`` block; it reasons in
``<seed:think>…</seed:think>``)::

    <seed:tool_call>
    <function=get_weather>
    <parameter=city>Paris</parameter>
    <parameter=days>3</parameter>
    </function>
    </seed:tool_call>

MiniMax-M2 (``invoke`` elements in a ``<minimax:tool_call>`` block)::

    <minimax:tool_call>
    <invoke name="get_weather">
    <parameter name="city">Paris</parameter>
    </invoke>
    <invoke name="get_time">
    </invoke>
    </minimax:tool_call>

A block may hold several calls. Seed-OSS values are read as Qwen3-Coder's
(:mod:`~actionspace.parse._qwen_xml`); a MiniMax-M2 value is its text with the whitespace around it
removed, typed by the tool's schema when ``tools`` are known and kept as text otherwise (as
MiniMax's own parser reads it). A name may be quoted with ``"`` or ``'``. A call is added once its
element is closed; a block that stops before its end is ``truncated``.
"""

from __future__ import annotations

import re
from typing import Any

from actionspace.parse._json_marked import unexpected
from actionspace.parse._qwen_xml import FUNCTION_OPEN, xml_function
from actionspace.parse._result import Collector, Malformed
from actionspace.parse._scan import TOOL_NAME, Finder, skip_ws, snippet
from actionspace.parse._schema import coerce
from actionspace.types import ToolCall

__all__ = ["MINIMAX_M2_OPEN", "SEED_OPEN", "parse_minimax_m2", "parse_seed_oss"]

SEED_OPEN, SEED_CLOSE = "<seed:tool_call>", "</seed:tool_call>"
MINIMAX_M2_OPEN, MINIMAX_M2_CLOSE = "<minimax:tool_call>", "</minimax:tool_call>"
INVOKE_OPEN, INVOKE_CLOSE = "<invoke name=", "</invoke>"
PARAMETER_OPEN, PARAMETER_CLOSE = "<parameter name=", "</parameter>"


def parse_seed_oss(text: str, coll: Collector) -> None:
    """Every ``<seed:tool_call>`` block, with the text around them as content."""
    coll.note("seed_oss")
    _blocks(
        text, coll, SEED_OPEN, SEED_CLOSE, FUNCTION_OPEN, lambda at: xml_function(text, at, len(text), coll)
    )


def parse_minimax_m2(text: str, coll: Collector) -> None:
    """Every ``<minimax:tool_call>`` block, with the text around them as content."""
    coll.note("minimax_m2")
    finder = Finder(text)
    _blocks(
        text, coll, MINIMAX_M2_OPEN, MINIMAX_M2_CLOSE, INVOKE_OPEN, lambda at: _invoke(text, at, coll, finder)
    )


def _blocks(text: str, coll: Collector, opener: str, closer: str, element: str, read: Any) -> None:
    finder = Finder(text)
    pos = 0
    while (start := finder.find(opener, pos)) >= 0:
        coll.add_content(text[pos:start])
        pos = start + len(opener)
        while True:
            pos = skip_ws(text, pos)
            if text.startswith(closer, pos):
                pos += len(closer)
                break
            if pos >= len(text):
                raise Malformed("truncated", f"{opener} is never closed by {closer}", pos=start)
            if not text.startswith(element, pos):
                raise unexpected(text, pos, (element, closer), f"where {element} or {closer} belongs")
            call, pos = read(pos)
            coll.add_call(call)
    coll.add_content(text[pos:])


_ATTRIBUTE = re.compile(r"""\s*[\w:-]+\s*=\s*(?:"[^"]*"|'[^']*'|[^\s"'>/]+)""")
_VALUE = re.compile(r"""\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>/]+))""")


def _name(text: str, start: int, tag: str) -> tuple[str, int]:
    """The name of the tag opened at ``start`` (``<invoke name="f">``) and the offset after it; other
    attributes (``description="…"``, ``type="string"``, which MiniMax-M2 may echo) are passed over."""
    if text.find(">", start) < 0:
        raise Malformed("truncated", f"{tag}…> tag is never closed by '>'", pos=start)
    value = _VALUE.match(text, start + len(tag))
    if value is None:
        at = skip_ws(text, start + len(tag))
        raise Malformed("invalid_tag", f"{tag}…> tag names nothing ({snippet(text, at)!r})", pos=start)
    pos = value.end()
    while (attribute := _ATTRIBUTE.match(text, pos)) is not None:
        pos = attribute.end()
    pos = skip_ws(text, pos)
    if text.startswith(">", pos):
        return next(g for g in value.groups() if g is not None).strip(), pos + 1
    raise Malformed("invalid_tag", f"{tag}…> tag is not closed by '>' ({snippet(text, pos)!r})", pos=start)


def _invoke(text: str, start: int, coll: Collector, finder: Finder) -> tuple[ToolCall, int]:
    name, pos = _name(text, start, INVOKE_OPEN)
    if not name:
        raise Malformed("missing_name", f"{INVOKE_OPEN}> names no function", pos=start)
    if not TOOL_NAME.fullmatch(name):
        raise Malformed(
            "invalid_name", f"{INVOKE_OPEN}{snippet(name, 0)!r}> does not name a function", pos=start
        )
    properties = coll.properties(name)
    arguments: dict[str, Any] = {}
    while True:
        pos = skip_ws(text, pos)
        if text.startswith(INVOKE_CLOSE, pos):
            return ToolCall(name=name, arguments=arguments), pos + len(INVOKE_CLOSE)
        if pos >= len(text) or text.startswith(MINIMAX_M2_CLOSE, pos):
            raise Malformed(
                "truncated", f"{INVOKE_OPEN}{name!r}> is never closed by {INVOKE_CLOSE}", pos=start
            )
        if not text.startswith(PARAMETER_OPEN, pos):
            raise unexpected(text, pos, (PARAMETER_OPEN, INVOKE_CLOSE), f"in {INVOKE_OPEN}{name!r}>")
        key, value_start = _name(text, pos, PARAMETER_OPEN)
        if not key or key in arguments:
            reason = "missing_key" if not key else "duplicate_key"
            raise Malformed(reason, f"parameter name {key!r} is empty or repeated", pos=pos)
        value_end = finder.find(PARAMETER_CLOSE, value_start)
        intruder = finder.find(PARAMETER_OPEN, value_start)
        if value_end < 0:
            raise Malformed("truncated", f"parameter {key!r} is never closed by {PARAMETER_CLOSE}", pos=pos)
        if 0 <= intruder < value_end:
            raise Malformed("unterminated_value", f"parameter {key!r} is not closed before the next", pos=pos)
        raw = text[value_start:value_end].strip()
        schema = properties.get(key)
        arguments[key] = coerce(raw, schema) if schema else raw
        pos = value_end + len(PARAMETER_CLOSE)
