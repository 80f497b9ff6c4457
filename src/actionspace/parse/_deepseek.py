"""DeepSeek calls: V3/R1 and V3.1 special tokens, and the DSML markup of V3.2 and V4.

V3 / R1 (a ``function`` type, the name, then a fenced JSON block)::

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather
    ```json
    {"city": "Beijing"}
    ```<｜tool▁call▁end｜><｜tool▁calls▁end｜>

V3.1 (the name, then the JSON arguments)::

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Beijing"}<｜tool▁call▁end｜>
    <｜tool▁calls▁end｜>

V3.2 (block ``function_calls``) and V4 (block ``tool_calls``), DSML::

    <｜DSML｜function_calls>
    <｜DSML｜invoke name="get_weather">
    <｜DSML｜parameter name="city" string="true">Beijing</｜DSML｜parameter>
    <｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>
    </｜DSML｜invoke>
    <｜DSML｜invoke name="get_time"/>
    </｜DSML｜function_calls>

``string="true"`` gives the text verbatim (typed by the tool's schema when ``tools`` are known:
``"42"`` for an integer parameter becomes 42); ``string="false"`` gives a JSON value. An invoke
may be empty or self-closing (no arguments). The ``｜`` (U+FF5C) of the DSML tokens is also
accepted as an ASCII ``|``. A call is added only once its invoke is closed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from actionspace.parse._result import Collector, Malformed
from actionspace.parse._scan import Finder, decode_json_at, expect_end, loads, skip_ws, snippet
from actionspace.parse._schema import coerce
from actionspace.parse._tokens import Markers, parse_sections
from actionspace.types import ToolCall

__all__ = ["DEEPSEEK", "DSML_MARKERS", "parse_deepseek", "parse_dsml"]

DEEPSEEK = Markers(
    "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>"
)
DEEPSEEK_SEP = "<｜tool▁sep｜>"


@dataclass(frozen=True, slots=True)
class Dsml:
    """The DSML tokens with one spelling of the bar."""

    prefix: str
    close_prefix: str

    def tag(self, name: str) -> str:
        return f"{self.prefix}{name}"

    def end(self, name: str) -> str:
        return f"{self.close_prefix}{name}>"


DSML_FULLWIDTH = Dsml("<｜DSML｜", "</｜DSML｜")
DSML_ASCII = Dsml("<|DSML|", "</|DSML|")
DSML_MARKERS = tuple(
    d.tag(b) + ">" for d in (DSML_FULLWIDTH, DSML_ASCII) for b in ("function_calls", "tool_calls")
)
_BLOCKS = ("function_calls", "tool_calls")
_ATTRIBUTE = re.compile(r'\s*([\w-]+)\s*=\s*"([^"]*)"')


def _deepseek_call(text: str, body: int, end: int, coll: Collector) -> ToolCall:
    sep = text.find(DEEPSEEK_SEP, body, end)
    if sep < 0:
        reason = "truncated" if end >= len(text) else "missing_separator"
        raise Malformed(reason, f"call is missing {DEEPSEEK_SEP}", pos=body)
    head = text[body:sep].strip()
    start = sep + len(DEEPSEEK_SEP)
    first = skip_ws(text, start, end)
    if text.startswith(("{", "["), first) or (head and head != "function"):
        coll.note("deepseek_v31")
        if not head:
            raise Malformed("missing_name", f"no function name before {DEEPSEEK_SEP}", pos=body)
        arguments, after = decode_json_at(text, first, end, what=f"arguments of {head}")
        expect_end(text, after, end, "the arguments")
        return ToolCall(name=head, arguments=arguments)
    coll.note("deepseek_v3")
    newline = text.find("\n", start, end)
    name = text[start : newline if newline >= 0 else end].strip()
    if not name:
        reason = "truncated" if newline < 0 and end >= len(text) else "missing_name"
        raise Malformed(reason, f"no function name after {DEEPSEEK_SEP}", pos=start)
    fence = skip_ws(text, newline if newline >= 0 else end, end)
    fence_line = text.find("\n", fence, end)
    if not text.startswith("```", fence) or fence_line < 0:
        reason = "truncated" if fence >= end or fence_line < 0 else "missing_arguments"
        raise Malformed(reason, f"{name} is not followed by a ```json block", pos=fence)
    arguments, after = decode_json_at(text, fence_line, end, what=f"arguments of {name}")
    closing = skip_ws(text, after, end)
    if not text.startswith("```", closing):
        cut = closing >= end or (end >= len(text) and "```".startswith(text[closing:end]))
        reason = "truncated" if cut else "unexpected_text"
        raise Malformed(reason, f"the ```json block of {name} is never closed", pos=closing)
    expect_end(text, closing + 3, end, "the ```json block")
    return ToolCall(name=name, arguments=arguments)


def parse_deepseek(text: str, coll: Collector) -> None:
    """DeepSeek V3/R1 and V3.1 call sections (``<｜tool▁calls▁begin｜>…``)."""
    parse_sections(text, coll, DEEPSEEK, _deepseek_call)


def parse_dsml(text: str, coll: Collector) -> None:
    """DeepSeek V3.2 / V4 DSML ``function_calls`` / ``tool_calls`` blocks, with text around them."""
    coll.note("deepseek_dsml")
    dsml = DSML_FULLWIDTH if DSML_FULLWIDTH.prefix in text else DSML_ASCII
    finder = Finder(text)
    pos = 0
    while True:
        starts = [(at, block) for block in _BLOCKS if (at := finder.find(dsml.tag(block) + ">", pos)) >= 0]
        if not starts:
            break
        start, block = min(starts)
        coll.add_content(text[pos:start])
        pos = _dsml_block(text, coll, dsml, block, start, finder)
    coll.add_content(text[pos:])


def _dsml_block(text: str, coll: Collector, dsml: Dsml, block: str, start: int, finder: Finder) -> int:
    pos = start + len(dsml.tag(block)) + 1
    invoke = dsml.tag("invoke")
    while True:
        pos = skip_ws(text, pos)
        if text.startswith(dsml.end(block), pos):
            return pos + len(dsml.end(block))
        if pos >= len(text):
            raise Malformed("unterminated_section", f"{dsml.tag(block)}> is never closed", pos=start)
        if not text.startswith(invoke, pos):
            raise Malformed("unexpected_text", f"expected {invoke}, found {snippet(text, pos)!r}", pos=pos)
        call, pos = _dsml_invoke(text, coll, dsml, pos, finder)
        coll.add_call(call)


def _attributes(text: str, start: int, tag: str, finder: Finder) -> tuple[dict[str, str], bool, int]:
    """The attributes of the tag opened at ``start``, whether it self-closes, and the offset after it."""
    gt = finder.find(">", start + len(tag))
    if gt < 0:
        raise Malformed("truncated", f"{tag} tag is never closed by '>'", pos=start)
    inside = text[start + len(tag) : gt]
    self_closing = inside.endswith("/")
    inside = inside.removesuffix("/")
    attributes: dict[str, str] = {}
    at = 0
    while (match := _ATTRIBUTE.match(inside, at)) is not None:
        attributes[match.group(1)] = match.group(2)
        at = match.end()
    if inside[at:].strip():
        raise Malformed("invalid_tag", f"{tag} tag has malformed attributes {inside!r}", pos=start)
    return attributes, self_closing, gt + 1


def _dsml_invoke(text: str, coll: Collector, dsml: Dsml, start: int, finder: Finder) -> tuple[ToolCall, int]:
    tag = dsml.tag("invoke")
    attributes, self_closing, pos = _attributes(text, start, tag, finder)
    name = attributes.get("name", "").strip()
    if not name:
        raise Malformed("missing_name", f"{tag} names no function", pos=start)
    if self_closing:
        return ToolCall(name=name, arguments={}), pos
    properties = coll.properties(name)
    parameter, parameter_end, invoke_end = dsml.tag("parameter"), dsml.end("parameter"), dsml.end("invoke")
    arguments: dict[str, Any] = {}
    while True:
        pos = skip_ws(text, pos)
        if text.startswith(invoke_end, pos):
            return ToolCall(name=name, arguments=arguments), pos + len(invoke_end)
        if pos >= len(text):
            raise Malformed("truncated", f"{tag} name={name!r} is never closed by {invoke_end}", pos=start)
        if not text.startswith(parameter, pos):
            raise Malformed(
                "unexpected_text",
                f"expected {parameter} or {invoke_end}, found {snippet(text, pos)!r}",
                pos=pos,
            )
        attrs, closed, value_start = _attributes(text, pos, parameter, finder)
        key = attrs.get("name", "").strip()
        if not key or key in arguments:
            reason = "missing_key" if not key else "duplicate_key"
            raise Malformed(reason, f"parameter name {key!r} is empty or repeated", pos=pos)
        if closed:
            arguments[key], pos = "", value_start
            continue
        value_end = finder.find(parameter_end, value_start)
        if value_end < 0:
            raise Malformed("truncated", f"parameter {key!r} is never closed by {parameter_end}", pos=pos)
        arguments[key] = _dsml_value(text[value_start:value_end], attrs.get("string"), properties.get(key))
        pos = value_end + len(parameter_end)


def _dsml_value(raw: str, string: str | None, schema: object) -> Any:
    if string == "false":
        try:
            return loads(raw)
        except (ValueError, RecursionError):
            return coerce(raw, schema)
    if string == "true":
        return coerce(raw, schema) if schema else raw
    return coerce(raw, schema)
