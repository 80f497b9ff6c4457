"""Tag-delimited calls: Hermes/Qwen2.5 JSON, Qwen3-Coder XML and GLM-4.5 inside ``<tool_call>``,
bare ``<function=NAME>`` blocks, and FunctionGemma ``<start_function_call>``.

Every parser here reads the visible text of one output, adds calls and content to the collector,
and raises :class:`Malformed` at the first fault with an offset into that text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from actionspace.parse._result import Collector, Malformed
from actionspace.parse._scan import decode_json_at, expect_end, skip_ws, snippet
from actionspace.parse._schema import coerce
from actionspace.parse._structured import call_from_generic
from actionspace.types import ToolCall

__all__ = ["parse_function_blocks", "parse_function_gemma", "parse_tool_call_tags"]

TOOL_CALL_OPEN, TOOL_CALL_CLOSE = "<tool_call>", "</tool_call>"
FUNCTION_OPEN, FUNCTION_CLOSE = "<function=", "</function>"
PARAMETER_OPEN, PARAMETER_CLOSE = "<parameter=", "</parameter>"
ARG_KEY_OPEN, ARG_KEY_CLOSE = "<arg_key>", "</arg_key>"
ARG_VALUE_OPEN, ARG_VALUE_CLOSE = "<arg_value>", "</arg_value>"
GEMMA_OPEN, GEMMA_CLOSE, GEMMA_ESCAPE = "<start_function_call>", "<end_function_call>", "<escape>"

_MAX_NESTING = 64
_INTEGER = re.compile(r"-?(?:0|[1-9]\d*)")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_BARE_WORDS: dict[str, Any] = {"true": True, "false": False, "null": None}


def _close(text: str, opened_at: int, body_end: int, closer: str, opener: str) -> None:
    if body_end >= len(text) or not text.startswith(closer, body_end):
        raise Malformed("unterminated_block", f"{opener} is never closed by {closer}", pos=opened_at)


def parse_tool_call_tags(text: str, coll: Collector) -> None:
    """``<tool_call>…</tool_call>`` blocks; each body is Hermes JSON, Qwen3 XML or GLM-4.5 pairs."""
    pos = 0
    while (start := text.find(TOOL_CALL_OPEN, pos)) >= 0:
        coll.add_content(text[pos:start])
        body = start + len(TOOL_CALL_OPEN)
        end = text.find(TOOL_CALL_CLOSE, body)
        end = len(text) if end < 0 else end
        following = text.find(TOOL_CALL_OPEN, body, end)
        end = following if following >= 0 else end
        first = skip_ws(text, body, end)
        if text.startswith("{", first):
            coll.note("hermes")
            value, after = decode_json_at(text, first, end, what="<tool_call> JSON body")
            expect_end(text, after, end, "the <tool_call> JSON body")
            if not isinstance(value, Mapping):
                raise Malformed("not_an_object", "<tool_call> body must be a JSON object", pos=first)
            try:
                call = call_from_generic(value, "<tool_call>")
            except Malformed as fault:
                raise fault.at(first) from None
        elif text.startswith(FUNCTION_OPEN, first):
            coll.note("qwen3_xml")
            call, after = _xml_function(text, first, end, coll)
            expect_end(text, after, end, "</function>")
        else:
            coll.note("glm45")
            call = _glm(text, body, end, coll)
        _close(text, start, end, TOOL_CALL_CLOSE, TOOL_CALL_OPEN)
        coll.add_call(call)
        pos = end + len(TOOL_CALL_CLOSE)
    coll.add_content(text[pos:])


def parse_function_blocks(text: str, coll: Collector) -> None:
    """Bare ``<function=NAME>…</function>`` blocks (Qwen3-Coder without the ``<tool_call>`` wrapper,
    and Llama 3.1's ``<function=NAME>{json}</function>``)."""
    pos = 0
    while (start := text.find(FUNCTION_OPEN, pos)) >= 0:
        coll.add_content(text[pos:start])
        call, pos = _xml_function(text, start, len(text), coll)
        coll.add_call(call)
    coll.add_content(text[pos:])


def _xml_function(text: str, start: int, end: int, coll: Collector) -> tuple[ToolCall, int]:
    gt = text.find(">", start, end)
    if gt < 0:
        raise Malformed("truncated", f"{FUNCTION_OPEN}NAME> tag is never closed", pos=start)
    name = text[start + len(FUNCTION_OPEN) : gt].strip()
    if not name:
        raise Malformed("missing_name", "<function=> names no function", pos=start)
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
        value_end = _closer(text, key_end, end, PARAMETER_CLOSE, (PARAMETER_OPEN, FUNCTION_CLOSE), pos)
        key = text[pos + len(PARAMETER_OPEN) : key_end].strip()
        if not key or key in arguments:
            reason = "missing_key" if not key else "duplicate_key"
            raise Malformed(reason, f"parameter name {key!r} is empty or repeated", pos=pos)
        value = text[key_end + 1 : value_end]
        value = value.removeprefix("\n").removesuffix("\n")
        arguments[key] = coerce(value, properties.get(key))
        pos = value_end + len(PARAMETER_CLOSE)


def _closer(text: str, start: int, end: int, closer: str, intruders: tuple[str, ...], opened_at: int) -> int:
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
    if pos >= end:
        return Malformed("truncated", f"{FUNCTION_OPEN}…> is never closed by {FUNCTION_CLOSE}", pos=start)
    return Malformed(
        "unexpected_text", f"unexpected text {snippet(text, pos)!r} inside <function=…>", pos=pos
    )


def _glm(text: str, body: int, end: int, coll: Collector) -> ToolCall:
    stops = [i for i in (text.find("\n", body, end), text.find(ARG_KEY_OPEN, body, end)) if i >= 0]
    name_end = min(stops) if stops else end
    name = text[body:name_end].strip()
    if not name or "<" in name or ">" in name:
        raise Malformed("missing_name", "<tool_call> does not start with a function name", pos=body)
    properties = coll.properties(name)
    arguments: dict[str, Any] = {}
    pos = name_end
    while (pos := skip_ws(text, pos, end)) < end:
        if not text.startswith(ARG_KEY_OPEN, pos):
            raise Malformed(
                "unexpected_text", f"expected {ARG_KEY_OPEN}, found {snippet(text, pos)!r}", pos=pos
            )
        key_close = text.find(ARG_KEY_CLOSE, pos, end)
        if key_close < 0:
            raise Malformed("truncated", f"{ARG_KEY_OPEN} is never closed by {ARG_KEY_CLOSE}", pos=pos)
        key = text[pos + len(ARG_KEY_OPEN) : key_close].strip()
        value_open = skip_ws(text, key_close + len(ARG_KEY_CLOSE), end)
        if not text.startswith(ARG_VALUE_OPEN, value_open):
            reason = "truncated" if value_open >= end else "missing_value"
            raise Malformed(
                reason, f"{ARG_KEY_OPEN}{key}{ARG_KEY_CLOSE} has no {ARG_VALUE_OPEN}", pos=value_open
            )
        value_close = _closer(
            text, value_open, end, ARG_VALUE_CLOSE, (ARG_KEY_OPEN, ARG_VALUE_OPEN), value_open
        )
        if not key or key in arguments:
            raise Malformed("duplicate_key", f"argument name {key!r} is empty or repeated", pos=pos)
        arguments[key] = coerce(text[value_open + len(ARG_VALUE_OPEN) : value_close], properties.get(key))
        pos = value_close + len(ARG_VALUE_CLOSE)
    return ToolCall(name=name, arguments=arguments)


def parse_function_gemma(text: str, coll: Collector) -> None:
    """``<start_function_call>call:NAME{key:<escape>text<escape>,n:3}<end_function_call>`` blocks."""
    coll.note("function_gemma")
    pos = 0
    while (start := text.find(GEMMA_OPEN, pos)) >= 0:
        coll.add_content(text[pos:start])
        head = skip_ws(text, start + len(GEMMA_OPEN))
        if not text.startswith("call:", head):
            raise Malformed("missing_call", f"{GEMMA_OPEN} is not followed by 'call:'", pos=head)
        brace = text.find("{", head)
        closer = text.find(GEMMA_CLOSE, head)
        if brace < 0 or (0 <= closer < brace):
            raise Malformed("truncated", "call:NAME is not followed by '{'", pos=head)
        name = text[head + len("call:") : brace].strip()
        if not name:
            raise Malformed("missing_name", "call: names no function", pos=head)
        arguments, after = _gemma_object(text, brace, 0)
        after = skip_ws(text, after)
        if not text.startswith(GEMMA_CLOSE, after):
            if after >= len(text):
                raise Malformed(
                    "unterminated_block", f"{GEMMA_OPEN} is never closed by {GEMMA_CLOSE}", pos=start
                )
            raise Malformed(
                "unexpected_text", f"unexpected text {snippet(text, after)!r} after the arguments", pos=after
            )
        coll.add_call(ToolCall(name=name, arguments=arguments))
        pos = after + len(GEMMA_CLOSE)
    coll.add_content(text[pos:])


def _gemma_value(text: str, pos: int, depth: int) -> tuple[Any, int]:
    pos = skip_ws(text, pos)
    if depth > _MAX_NESTING:
        raise Malformed("too_deep", "arguments are nested too deeply", pos=pos)
    if text.startswith(GEMMA_ESCAPE, pos):
        close = text.find(GEMMA_ESCAPE, pos + len(GEMMA_ESCAPE))
        if close < 0:
            raise Malformed("truncated", f"string opened with {GEMMA_ESCAPE} is never closed", pos=pos)
        return text[pos + len(GEMMA_ESCAPE) : close], close + len(GEMMA_ESCAPE)
    if text.startswith("{", pos):
        return _gemma_object(text, pos, depth + 1)
    if text.startswith("[", pos):
        return _gemma_array(text, pos, depth + 1)
    end = pos
    while end < len(text) and text[end] not in ",}]<":
        end += 1
    token = text[pos:end].strip()
    if not token:
        reason = "truncated" if end >= len(text) else "missing_value"
        raise Malformed(reason, "expected a value", pos=pos)
    if token in _BARE_WORDS:
        return _BARE_WORDS[token], end
    if _NUMBER.fullmatch(token):
        try:
            return (int(token) if _INTEGER.fullmatch(token) else float(token)), end
        except ValueError:
            return token, end
    return token, end


def _gemma_object(text: str, pos: int, depth: int) -> tuple[dict[str, Any], int]:
    result: dict[str, Any] = {}
    pos = skip_ws(text, pos + 1)
    if text.startswith("}", pos):
        return result, pos + 1
    while True:
        pos = skip_ws(text, pos)
        if text.startswith(GEMMA_ESCAPE, pos):
            key, pos = _gemma_value(text, pos, depth)
        else:
            colon = pos
            while colon < len(text) and text[colon] not in ":,{}[]<":
                colon += 1
            key, pos = text[pos:colon].strip(), colon
        pos = skip_ws(text, pos)
        if not key or not text.startswith(":", pos):
            reason = "truncated" if pos >= len(text) else "missing_key"
            raise Malformed(reason, "expected 'key:' inside the arguments", pos=pos)
        result[str(key)], pos = _gemma_value(text, pos + 1, depth)
        pos = _gemma_separator(text, pos, "}")
        if text.startswith("}", pos):
            return result, pos + 1
        pos += 1


def _gemma_array(text: str, pos: int, depth: int) -> tuple[list[Any], int]:
    items: list[Any] = []
    pos = skip_ws(text, pos + 1)
    if text.startswith("]", pos):
        return items, pos + 1
    while True:
        item, pos = _gemma_value(text, pos, depth)
        items.append(item)
        pos = _gemma_separator(text, pos, "]")
        if text.startswith("]", pos):
            return items, pos + 1
        pos += 1


def _gemma_separator(text: str, pos: int, closer: str) -> int:
    pos = skip_ws(text, pos)
    if pos >= len(text):
        raise Malformed("truncated", f"arguments end before '{closer}'", pos=pos)
    if text[pos] not in ("," + closer):
        raise Malformed(
            "unexpected_text", f"expected ',' or '{closer}', found {snippet(text, pos)!r}", pos=pos
        )
    return pos
