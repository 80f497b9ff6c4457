"""Special-token formats: Kimi K2, DeepSeek V3/R1/V3.1, Mistral ``[TOOL_CALLS]``, gpt-oss harmony,
Llama 3.x ``<|python_tag|>`` and Llama 4 ``<|python_start|>``.

Each parser reads the visible text of one output, adds calls and content to the collector, and
raises :class:`Malformed` at the first fault with an offset into that text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from actionspace.parse._pythonic import parse_call_list, parse_statements
from actionspace.parse._result import Collector, Malformed
from actionspace.parse._scan import decode_json_at, expect_end, iter_json_values, skip_ws, snippet
from actionspace.parse._structured import call_from_generic
from actionspace.types import ToolCall

__all__ = [
    "DEEPSEEK",
    "KIMI",
    "parse_deepseek",
    "parse_harmony",
    "parse_kimi",
    "parse_llama4",
    "parse_llama_python_tag",
    "parse_mistral",
]


@dataclass(frozen=True, slots=True)
class Markers:
    """The four tokens of a sectioned format: a section of calls, and each call."""

    section_open: str
    section_close: str
    call_open: str
    call_close: str


KIMI = Markers(
    "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>", "<|tool_call_end|>"
)
KIMI_ARGUMENTS = "<|tool_call_argument_begin|>"
DEEPSEEK = Markers(
    "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>"
)
DEEPSEEK_SEP = "<｜tool▁sep｜>"
MISTRAL_CALLS, MISTRAL_ARGS, MISTRAL_CALL_ID = "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"
PYTHON_TAG = "<|python_tag|>"
PYTHON_START, PYTHON_END = "<|python_start|>", "<|python_end|>"
HARMONY_START, HARMONY_CHANNEL, HARMONY_MESSAGE = "<|start|>", "<|channel|>", "<|message|>"
HARMONY_CONSTRAIN = "<|constrain|>"
HARMONY_ENDS = ("<|end|>", "<|call|>", "<|return|>")

_KIMI_ID = re.compile(r"(?:functions\.)?([^\s<>]+):(\d+)")
_MISTRAL_NAME = re.compile(r"[A-Za-z0-9_.\-]+")
_MISTRAL_NEXT = re.compile(r"[A-Za-z0-9_.\-]+(?:\[CALL_ID\]|\[ARGS\]|\{)")

CallParser = Callable[[str, int, int, Collector], ToolCall]


def _sectioned(text: str, coll: Collector, marks: Markers, parse_call: CallParser) -> None:
    opened = text.find(marks.section_open)
    has_section = opened >= 0
    if not has_section:
        opened = text.find(marks.call_open)
    coll.add_content(text[:opened])
    pos = opened + len(marks.section_open) if has_section else opened
    while True:
        pos = skip_ws(text, pos)
        if has_section and text.startswith(marks.section_close, pos):
            pos += len(marks.section_close)
            break
        if not text.startswith(marks.call_open, pos):
            if not has_section:
                break
            if pos >= len(text):
                raise Malformed("unterminated_section", f"{marks.section_open} is never closed", pos=opened)
            raise Malformed(
                "unexpected_text", f"expected {marks.call_open}, found {snippet(text, pos)!r}", pos=pos
            )
        body = pos + len(marks.call_open)
        close = text.find(marks.call_close, body)
        following = text.find(marks.call_open, body)
        end = len(text) if close < 0 else close
        if 0 <= following < end:
            end = following
        call = parse_call(text, body, end, coll)
        if end != close:
            raise Malformed(
                "unterminated_call", f"{marks.call_open} is never closed by {marks.call_close}", pos=pos
            )
        coll.add_call(call)
        pos = close + len(marks.call_close)
    coll.add_content(text[pos:])


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
    """``<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{…}``."""
    coll.note("kimi_k2")
    _sectioned(text, coll, KIMI, _kimi_call)


def _deepseek_call(text: str, body: int, end: int, coll: Collector) -> ToolCall:
    sep = text.find(DEEPSEEK_SEP, body, end)
    if sep < 0:
        reason = "truncated" if end >= len(text) else "missing_separator"
        raise Malformed(reason, f"call is missing {DEEPSEEK_SEP}", pos=body)
    head = text[body:sep].strip()
    start = sep + len(DEEPSEEK_SEP)
    first = skip_ws(text, start, end)
    if text.startswith(("{", "["), first):
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
        raise Malformed("missing_name", f"no function name after {DEEPSEEK_SEP}", pos=start)
    fence = skip_ws(text, newline if newline >= 0 else end, end)
    fence_line = text.find("\n", fence, end)
    if not text.startswith("```", fence) or fence_line < 0:
        reason = "truncated" if fence >= end or fence_line < 0 else "missing_arguments"
        raise Malformed(reason, f"{name} is not followed by a ```json block", pos=fence)
    arguments, after = decode_json_at(text, fence_line, end, what=f"arguments of {name}")
    closing = skip_ws(text, after, end)
    if not text.startswith("```", closing):
        reason = "truncated" if closing >= end else "unexpected_text"
        raise Malformed(reason, f"the ```json block of {name} is never closed", pos=closing)
    expect_end(text, closing + 3, end, "the ```json block")
    return ToolCall(name=name, arguments=arguments)


def parse_deepseek(text: str, coll: Collector) -> None:
    """DeepSeek V3/R1 (``function<｜tool▁sep｜>NAME`` + fenced JSON) and V3.1 (``NAME<｜tool▁sep｜>{…}``)."""
    _sectioned(text, coll, DEEPSEEK, _deepseek_call)


def _generic_items(value: object, at: int, where: str, coll: Collector) -> None:
    items = value if isinstance(value, list) else [value]
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise Malformed("not_an_object", f"{where} item {i} is not a JSON object", pos=at)
        try:
            coll.add_call(call_from_generic(item, f"{where}[{i}]"))
        except Malformed as fault:
            raise fault.at(at) from None


def parse_mistral(text: str, coll: Collector) -> None:
    """``[TOOL_CALLS][{"name", "arguments"}]``, ``[TOOL_CALLS]NAME{…}`` and ``[TOOL_CALLS]NAME[ARGS]{…}``."""
    coll.note("mistral")
    pos = text.find(MISTRAL_CALLS)
    coll.add_content(text[:pos])
    seen = False
    while (pos := skip_ws(text, pos)) < len(text):
        if text.startswith(MISTRAL_CALLS, pos):
            marker = pos
            pos = skip_ws(text, pos + len(MISTRAL_CALLS))
            if pos >= len(text):
                raise Malformed("truncated", f"{MISTRAL_CALLS} is not followed by a call", pos=marker)
        elif not (seen and _MISTRAL_NEXT.match(text, pos)):
            break
        seen = True
        if text[pos] in "[{":
            value, after = decode_json_at(text, pos, what=f"{MISTRAL_CALLS} JSON")
            _generic_items(value, pos, MISTRAL_CALLS, coll)
            pos = after
            continue
        pos = _mistral_named(text, pos, coll)
    coll.add_content(text[pos:])


def _mistral_named(text: str, pos: int, coll: Collector) -> int:
    match = _MISTRAL_NAME.match(text, pos)
    if match is None:
        raise Malformed("missing_name", f"{MISTRAL_CALLS} is not followed by a function name", pos=pos)
    name, cursor, call_id = match.group(), match.end(), None
    if text.startswith(MISTRAL_CALL_ID, cursor):
        args_at = text.find(MISTRAL_ARGS, cursor)
        if args_at < 0:
            raise Malformed(
                "truncated", f"{MISTRAL_CALL_ID} of {name} is not followed by {MISTRAL_ARGS}", pos=cursor
            )
        call_id = text[cursor + len(MISTRAL_CALL_ID) : args_at].strip() or None
        cursor = args_at
    if text.startswith(MISTRAL_ARGS, cursor):
        cursor += len(MISTRAL_ARGS)
    elif not text.startswith("{", skip_ws(text, cursor)):
        reason = "truncated" if cursor >= len(text) else "missing_arguments"
        raise Malformed(reason, f"{name} is not followed by {MISTRAL_ARGS}", pos=cursor)
    try:
        arguments, after = decode_json_at(text, cursor, what=f"arguments of {name}")
    except Malformed as fault:
        if call_id is not None:
            fault.details["call_id"] = call_id
        raise
    coll.add_call(ToolCall(name=name, arguments=arguments, id=call_id))
    return after


def parse_llama_python_tag(text: str, coll: Collector) -> None:
    """``<|python_tag|>{"name": …, "parameters": …}`` (``;``-separated for several) or a python call."""
    coll.note("llama3")
    tag = text.find(PYTHON_TAG)
    coll.add_content(text[:tag])
    body = skip_ws(text, tag + len(PYTHON_TAG))
    if text.startswith(("{", "["), body):
        rest = body
        for value, at, after in iter_json_values(text, body):
            _generic_items(value, at, PYTHON_TAG, coll)
            rest = after
        coll.add_content(text[rest:])
        return
    source = text[body:].rstrip()
    if not source:
        raise Malformed("truncated", f"{PYTHON_TAG} is not followed by a call", pos=tag)
    for call in parse_statements(source, body):
        coll.add_call(call)


def parse_llama4(text: str, coll: Collector) -> None:
    """Llama 4 pythonic calls wrapped in ``<|python_start|>[…]<|python_end|>``."""
    coll.note("pythonic")
    pos = 0
    while (start := text.find(PYTHON_START, pos)) >= 0:
        coll.add_content(text[pos:start])
        body = skip_ws(text, start + len(PYTHON_START))
        close = text.find(PYTHON_END, body)
        end = len(text) if close < 0 else close
        source = text[body:end].rstrip()
        if not source:
            raise Malformed("truncated", f"{PYTHON_START} is not followed by a call list", pos=start)
        for call in parse_call_list(source, body):
            coll.add_call(call)
        pos = end if close < 0 else close + len(PYTHON_END)
    coll.add_content(text[pos:])


def _harmony_header(header: str) -> tuple[str, str, str, str]:
    header = header.removeprefix(HARMONY_START)
    role_part, _, channel_part = header.partition(HARMONY_CHANNEL)
    role_tokens = role_part.replace(HARMONY_CONSTRAIN, " ").split()
    channel_tokens = channel_part.replace(HARMONY_CONSTRAIN, f" {HARMONY_CONSTRAIN} ").split()
    tokens = role_tokens + channel_tokens
    recipient = next((t[3:] for t in tokens if t.startswith("to=")), "")
    role = role_tokens[0] if role_tokens and not role_tokens[0].startswith("to=") else "assistant"
    channel = channel_tokens[0] if channel_tokens and not channel_tokens[0].startswith("to=") else ""
    content_type = ""
    for i, token in enumerate(tokens):
        if token == HARMONY_CONSTRAIN and i + 1 < len(tokens):
            content_type = tokens[i + 1]
        elif token == "json":
            content_type = token
    return role, channel, recipient, content_type


def _harmony_end(text: str, body: int) -> tuple[int, int]:
    best, size = len(text), 0
    for marker in (*HARMONY_ENDS, HARMONY_START):
        found = text.find(marker, body, best)
        if found >= 0:
            best, size = found, (0 if marker == HARMONY_START else len(marker))
    return best, size


def parse_harmony(text: str, coll: Collector) -> None:
    """gpt-oss harmony messages: ``analysis`` → reasoning, ``final`` → content, ``to=functions.X`` → call.

    The stop tokens ``<|call|>`` / ``<|return|>`` may be absent at the end (servers drop them); a
    call is still only emitted when its JSON body is complete.
    """
    coll.note("harmony")
    pos = 0
    while True:
        starts = [i for i in (text.find(HARMONY_START, pos), text.find(HARMONY_CHANNEL, pos)) if i >= 0]
        if not starts:
            break
        header = min(starts)
        coll.add_content(text[pos:header])
        message = text.find(HARMONY_MESSAGE, header)
        if message < 0:
            raise Malformed("truncated", f"message header is not followed by {HARMONY_MESSAGE}", pos=header)
        role, channel, recipient, content_type = _harmony_header(text[header:message])
        body = message + len(HARMONY_MESSAGE)
        end, size = _harmony_end(text, body)
        pos = end + size
        if role != "assistant":
            continue
        if recipient:
            name = recipient.removeprefix("functions.")
            if not name:
                raise Malformed("missing_name", "recipient names no function", pos=header)
            if content_type == "json" or text.startswith(("{", "["), skip_ws(text, body, end)):
                arguments, after = decode_json_at(text, body, end, what=f"arguments to {recipient}")
                expect_end(text, after, end, "the arguments")
                coll.add_call(ToolCall(name=name, arguments=arguments))
            else:
                coll.add_call(ToolCall(name=name, arguments=text[body:end]))
        elif channel == "analysis":
            coll.add_reasoning(text[body:end])
        else:
            coll.add_content(text[body:end])
    coll.add_content(text[pos:])
