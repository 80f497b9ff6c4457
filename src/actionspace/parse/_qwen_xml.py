"""Qwen3-Coder XML calls: ``<function=NAME>`` with one ``<parameter=KEY>`` element per argument.

::

    <tool_call>
    <function=run_shell>
    <parameter=command>
    pytest -q tests/test_api.py
    </parameter>
    <parameter=config>
    {"retries": 2, "env": {"CI": "1"}}
    </parameter>
    </function>
    </tool_call>

The ``<tool_call>`` wrapper may be missing. A parameter's text (one leading and one trailing
newline removed) is typed by the tool's schema when ``tools`` are known, else read as JSON when it
is JSON (``{…}``, ``3``, ``true``) and kept as text otherwise. Llama 3.1's
``<function=NAME>{json}</function>`` is read here too.
"""

from __future__ import annotations

from typing import Any

from actionspace.parse._result import Collector, Malformed
from actionspace.parse._scan import TOOL_NAME, decode_json_at, skip_ws, snippet
from actionspace.parse._schema import coerce
from actionspace.types import ToolCall

__all__ = ["FUNCTION_OPEN", "parse_function_blocks", "value_end", "xml_function"]

FUNCTION_OPEN, FUNCTION_CLOSE = "<function=", "</function>"
PARAMETER_OPEN, PARAMETER_CLOSE = "<parameter=", "</parameter>"


def parse_function_blocks(text: str, coll: Collector) -> None:
    """Bare ``<function=NAME>…</function>`` blocks (Qwen3-Coder without the ``<tool_call>`` wrapper,
    and Llama 3.1's ``<function=NAME>{json}</function>``)."""
    coll.note("qwen3_xml")
    pos = 0
    while (start := text.find(FUNCTION_OPEN, pos)) >= 0:
        coll.add_content(text[pos:start])
        call, pos = xml_function(text, start, len(text), coll)
        coll.add_call(call)
    coll.add_content(text[pos:])


def xml_function(text: str, start: int, end: int, coll: Collector) -> tuple[ToolCall, int]:
    gt = text.find(">", start, end)
    if gt < 0:
        raise Malformed("truncated", f"{FUNCTION_OPEN}NAME> tag is never closed", pos=start)
    name = text[start + len(FUNCTION_OPEN) : gt].strip()
    if not name:
        raise Malformed("missing_name", "<function=> names no function", pos=start)
    if not TOOL_NAME.fullmatch(name):
        raise Malformed("invalid_name", f"<function={snippet(name, 0)}> does not name a function", pos=start)
    first = skip_ws(text, gt + 1, end)
    if text.startswith("{", first):
        coll.note("llama3_function_tag")
        body, after = decode_json_at(text, first, end, what=f"<function={name}> JSON body")
        close = skip_ws(text, after, end)
        if not text.startswith(FUNCTION_CLOSE, close):
            raise _unclosed_function(text, close, end, start)
        return ToolCall(name=name, arguments=body), close + len(FUNCTION_CLOSE)
    properties = coll.properties(name)
    arguments: dict[str, Any] = {}
    pos = gt + 1
    while True:
        pos = skip_ws(text, pos, end)
        if text.startswith(FUNCTION_CLOSE, pos):
            return ToolCall(name=name, arguments=arguments), pos + len(FUNCTION_CLOSE)
        if not text.startswith(PARAMETER_OPEN, pos):
            raise _unclosed_function(text, pos, end, start)
        key_end = text.find(">", pos, end)
        if key_end < 0:
            raise Malformed("truncated", f"{PARAMETER_OPEN}NAME> tag is never closed", pos=pos)
        value_stop = value_end(text, key_end, end, PARAMETER_CLOSE, (PARAMETER_OPEN, FUNCTION_CLOSE), pos)
        key = text[pos + len(PARAMETER_OPEN) : key_end].strip()
        if not key or key in arguments:
            reason = "missing_key" if not key else "duplicate_key"
            raise Malformed(reason, f"parameter name {key!r} is empty or repeated", pos=pos)
        value = text[key_end + 1 : value_stop]
        value = value.removeprefix("\n").removesuffix("\n")
        arguments[key] = coerce(value, properties.get(key))
        pos = value_stop + len(PARAMETER_CLOSE)


def value_end(
    text: str, start: int, end: int, closer: str, intruders: tuple[str, ...], opened_at: int
) -> int:
    """Offset of ``closer`` after ``start``; a fault when it is missing or another tag comes first."""
    close = text.find(closer, start, end)
    stop = end if close < 0 else close
    for tag in intruders:
        found = text.find(tag, start + 1, stop)
        if found >= 0:
            raise Malformed(
                "unterminated_value", f"value is not closed by {closer} before {tag}", pos=opened_at
            )
    if close < 0:
        raise Malformed("truncated", f"value is never closed by {closer}", pos=opened_at)
    return close


def _unclosed_function(text: str, pos: int, end: int, start: int) -> Malformed:
    rest = text[pos:end]
    if pos >= end or text.startswith("</tool_call>", pos) or (end == len(text) and _cut_tag(rest)):
        return Malformed("truncated", f"{FUNCTION_OPEN}…> is never closed by {FUNCTION_CLOSE}", pos=start)
    return Malformed(
        "unexpected_text", f"unexpected text {snippet(text, pos)!r} inside <function=…>", pos=pos
    )


def _cut_tag(rest: str) -> bool:
    """Whether ``rest``, the end of the output, is the start of a tag a function may hold next: the
    output was cut inside it (``…</funct``)."""
    return any(tag.startswith(rest) for tag in (FUNCTION_CLOSE, PARAMETER_OPEN))
