"""What the special-token formats share: sections of calls delimited by four tokens, and JSON items.

Kimi K2 and DeepSeek V3/V3.1 wrap calls as ``SECTION_OPEN (CALL_OPEN … CALL_CLOSE)* SECTION_CLOSE``;
:func:`parse_sections` reads every section of an output (text may stand before, between and after
them) and hands each call body to a format's own reader.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from actionspace.parse._result import Collector, Malformed
from actionspace.parse._scan import Finder, skip_ws, snippet
from actionspace.parse._structured import call_from_generic
from actionspace.types import ToolCall

__all__ = ["CallReader", "Markers", "generic_items", "parse_sections"]


@dataclass(frozen=True, slots=True)
class Markers:
    """The four tokens of a sectioned format: a section of calls, and each call."""

    section_open: str
    section_close: str
    call_open: str
    call_close: str


CallReader = Callable[[str, int, int, Collector], ToolCall]
"""Reads the call whose body lies between two offsets; raises :class:`Malformed` at a fault."""


def parse_sections(text: str, coll: Collector, marks: Markers, read_call: CallReader) -> None:
    """Every section (or run of bare calls) in ``text``, with the text around them as content."""
    finder = Finder(text)
    pos = 0
    while True:
        section = finder.find(marks.section_open, pos)
        bare = finder.find(marks.call_open, pos)
        if section < 0 and bare < 0:
            break
        has_section = section >= 0 and (bare < 0 or section < bare)
        start = section if has_section else bare
        coll.add_content(text[pos:start])
        pos = _section(text, coll, marks, read_call, finder, start, has_section)
    coll.add_content(text[pos:])


def _section(
    text: str,
    coll: Collector,
    marks: Markers,
    read_call: CallReader,
    finder: Finder,
    opened: int,
    has_section: bool,
) -> int:
    pos = opened + len(marks.section_open) if has_section else opened
    while True:
        pos = skip_ws(text, pos)
        if has_section and text.startswith(marks.section_close, pos):
            return pos + len(marks.section_close)
        if not text.startswith(marks.call_open, pos):
            if not has_section:
                return pos
            if pos >= len(text):
                raise Malformed("unterminated_section", f"{marks.section_open} is never closed", pos=opened)
            raise Malformed(
                "unexpected_text", f"expected {marks.call_open}, found {snippet(text, pos)!r}", pos=pos
            )
        body = pos + len(marks.call_open)
        close = finder.find(marks.call_close, body)
        following = finder.find(marks.call_open, body)
        end = len(text) if close < 0 else close
        if 0 <= following < end:
            end = following
        call = read_call(text, body, end, coll)
        if end != close:
            raise Malformed(
                "unterminated_call", f"{marks.call_open} is never closed by {marks.call_close}", pos=pos
            )
        coll.add_call(call)
        pos = close + len(marks.call_close)


def generic_items(value: object, at: int, where: str, coll: Collector) -> None:
    """Add a JSON ``{"name", "arguments"}`` object, or each one of a list, as calls."""
    items = value if isinstance(value, list) else [value]
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise Malformed("not_an_object", f"{where} item {i} is not a JSON object", pos=at)
        try:
            coll.add_call(call_from_generic(item, f"{where}[{i}]"))
        except Malformed as fault:
            raise fault.at(at) from None
