"""Raw model text: reasoning blocks split off, then the one call format the text uses, found by its
markers; bare JSON, JSON or ``tool_code`` fences and pythonic call lists when there are none."""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from typing import Any

from actionspace.parse._pythonic import parse_call_list, parse_statements
from actionspace.parse._result import Collector, Malformed
from actionspace.parse._scan import decode_json_at, iter_json_values, skip_ws
from actionspace.parse._structured import classify, feed, looks_like_call
from actionspace.parse._tagged import parse_function_blocks, parse_function_gemma, parse_tool_call_tags
from actionspace.parse._tokens import (
    DEEPSEEK,
    KIMI,
    parse_deepseek,
    parse_harmony,
    parse_kimi,
    parse_llama4,
    parse_llama_python_tag,
    parse_mistral,
)

__all__ = ["parse_text", "parse_text_or_bytes"]

_REASONING_TAGS = (("<think>", "</think>"), ("<thinking>", "</thinking>"), ("[THINK]", "[/THINK]"))
_TERMINATORS = (
    "<|im_end|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|eot|>",
    "<|eom|>",
    "<｜end▁of▁sentence｜>",
    "<|end|>",
    "<|call|>",
    "<|return|>",
    "<|endoftext|>",
    "<end_of_turn>",
    "</s>",
)
_PYTHONIC_START = re.compile(r"\[\s*[A-Za-z_][\w.]*\s*\(")
_CALLISH = re.compile(r'\[?\s*\{\s*"(?:name|function|type|id|tool_calls|role|choices)"\s*:')
_FENCE_OPEN = re.compile(r"```([\w-]*)[^\S\n]*\n")
_JSON_FENCES = frozenset({"", "json", "tool_call", "tool_calls"})

TextParser = Callable[[str, Collector], None]

# Checked in order; the first marker present decides the format of the whole output.
_MARKED: tuple[tuple[tuple[str, ...], str, TextParser], ...] = (
    (("<|channel|>", "<|start|>"), "harmony", parse_harmony),
    ((KIMI.section_open, KIMI.call_open), "kimi_k2", parse_kimi),
    ((DEEPSEEK.section_open, DEEPSEEK.call_open), "deepseek", parse_deepseek),
    (("[TOOL_CALLS]",), "mistral", parse_mistral),
    (("<start_function_call>",), "function_gemma", parse_function_gemma),
    (("<tool_call>",), "hermes", parse_tool_call_tags),
    (("<function=",), "qwen3_xml", parse_function_blocks),
    (("<|python_tag|>",), "llama3", parse_llama_python_tag),
    (("<|python_start|>",), "pythonic", parse_llama4),
)


class _View:
    """The visible text (reasoning removed) and the map from its offsets back to the original."""

    def __init__(self, original: str, spans: list[tuple[int, int]]) -> None:
        self.visible_starts: list[int] = []
        self.original_starts: list[int] = []
        pieces: list[str] = []
        size = 0
        for start, end in spans:
            self.visible_starts.append(size)
            self.original_starts.append(start)
            pieces.append(original[start:end])
            size += end - start
        self.text = "".join(pieces)

    def original(self, pos: int) -> int:
        i = max(bisect.bisect_right(self.visible_starts, pos) - 1, 0)
        return self.original_starts[i] + pos - self.visible_starts[i] if self.original_starts else pos


def _earliest_open(text: str, pos: int) -> tuple[int, str, str]:
    best = (-1, "", "")
    for opener, closer in _REASONING_TAGS:
        found = text.find(opener, pos)
        if found >= 0 and (best[0] < 0 or found < best[0]):
            best = (found, opener, closer)
    return best


def _split_reasoning(text: str, coll: Collector) -> tuple[_View, Malformed | None]:
    pos, spans, fault = 0, [], None
    first_open = _earliest_open(text, 0)[0]
    for _, closer in _REASONING_TAGS:
        orphan = text.find(closer)
        if orphan >= 0 and (first_open < 0 or orphan < first_open):
            coll.add_reasoning(text[:orphan])
            pos = orphan + len(closer)
            break
    while True:
        start, opener, closer = _earliest_open(text, pos)
        if start < 0:
            spans.append((pos, len(text)))
            break
        spans.append((pos, start))
        close = text.find(closer, start + len(opener))
        if close < 0:
            coll.add_reasoning(text[start + len(opener) :])
            fault = Malformed("unterminated_reasoning", f"{opener} is never closed by {closer}", pos=start)
            break
        coll.add_reasoning(text[start + len(opener) : close])
        pos = close + len(closer)
    return _View(text, spans), fault


def _strip_terminators(text: str) -> str:
    while True:
        trimmed = text.rstrip()
        for marker in _TERMINATORS:
            if trimmed.endswith(marker):
                text = trimmed[: -len(marker)]
                break
        else:
            return text


def parse_text_or_bytes(
    raw: str | bytes | bytearray | memoryview, coll: Collector, *, strict: bool, path: str
) -> None:
    """Decode bytes as UTF-8 (a bad byte is a ``parse_error`` at its offset), then :func:`parse_text`."""
    if isinstance(raw, str):
        parse_text(raw, coll, strict=strict, path=path)
        return
    try:
        text = bytes(raw).decode("utf-8")
    except UnicodeDecodeError as exc:
        fault = Malformed("invalid_utf8", f"byte {exc.start} is not valid UTF-8 ({exc.reason})", path=path)
        coll.fail(fault, "bytes", pos=exc.start)
        return
    parse_text(text, coll, strict=strict, path=path)


def parse_text(text: str, coll: Collector, *, strict: bool = True, path: str = "$") -> None:
    """Add the calls, content and reasoning of one model output to ``coll``.

    ``strict`` (a top-level string) treats JSON that is not a call as a fault; otherwise (message
    content) such JSON is plain content.
    """
    view, reasoning_fault = _split_reasoning(text, coll)
    visible = _strip_terminators(view.text)
    fmt, parser = _detect(visible, strict)
    coll.recent = None
    try:
        parser(visible, coll)
    except Malformed as fault:
        if path != "$":
            fault.details.setdefault("path", path)
        pos = view.original(fault.pos) if fault.pos is not None and fault.source is None else None
        coll.fail(fault, coll.recent or fmt, text=text, pos=pos)
    if reasoning_fault is not None:
        coll.fail(reasoning_fault, coll.format or "text", text=text, pos=reasoning_fault.pos)


def _detect(text: str, strict: bool) -> tuple[str, TextParser]:
    for markers, fmt, parser in _MARKED:
        if any(marker in text for marker in markers):
            return fmt, parser
    start = skip_ws(text, 0)
    if text.startswith("{", start) or (
        text.startswith("[", start) and not _PYTHONIC_START.match(text, start)
    ):
        return "json", lambda t, c: _bare_json(t, c, start, strict)
    if _PYTHONIC_START.match(text, start):
        return "pythonic", _pythonic_list
    if "```" in text:
        return "text", _fences
    return "text", _plain


def _plain(text: str, coll: Collector) -> None:
    coll.note("text")
    coll.add_content(text)


def _pythonic_list(text: str, coll: Collector) -> None:
    coll.note("pythonic")
    start = skip_ws(text, 0)
    for call in parse_call_list(text[start:].rstrip(), start):
        coll.add_call(call)


def _json_format(value: object) -> str | None:
    if isinstance(value, list):
        return _json_format(value[0]) if value else "json"
    if isinstance(value, dict) and classify(value) == "generic":
        return "llama3_json" if "parameters" in value else "json"
    return None


def _check_shape(value: object, at: int) -> None:
    items = value if isinstance(value, list) else [value]
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            kind = type(item).__name__
            raise Malformed("not_a_call", f"JSON value {i} is a {kind}, not a call object", pos=at)


def _json_is_calls(text: str, start: int, strict: bool) -> bool:
    """Whether JSON-looking text should be read as calls rather than kept as plain text.

    Text that starts like a call object is always read as calls (a broken one is a fault). Other
    JSON is read as calls only when it is made of call objects, or, at top level, when the whole
    output is JSON (then a non-call is a fault); ``[1] Smith et al.`` stays prose.
    """
    try:
        values = list(iter_json_values(text, start))
    except Malformed:
        return _CALLISH.match(text, start) is not None
    if all(_callish_value(value) for value, _, _ in values):
        return True
    return strict and values[-1][2] >= len(text)


def _bare_json(text: str, coll: Collector, start: int, strict: bool) -> None:
    if (not strict or text.startswith("[", start)) and not _json_is_calls(text, start, strict):
        _plain(text, coll)
        return
    rest = start
    for value, at, after in iter_json_values(text, start):
        rest = after
        fmt = _json_format(value)
        if fmt is not None:
            coll.note(fmt)
        _check_shape(value, at)
        try:
            feed(value, coll, path="$", strict=True)
        except Malformed as fault:
            raise fault.at(at) from None
        if fmt is not None:
            coll.note(fmt)
    coll.add_content(text[rest:])


def _callish_value(value: object) -> bool:
    if isinstance(value, list):
        return bool(value) and all(looks_like_call(item) for item in value)
    return looks_like_call(value)


def _fence_payload(text: str, lang: str, body: int, end: int) -> Any:
    start = skip_ws(text, body, end)
    if lang == "tool_code":
        return parse_statements(text[start:end].rstrip(), start)
    if lang not in _JSON_FENCES or start >= end:
        return None
    try:
        value, after = decode_json_at(text, start, end, what="fenced JSON")
    except Malformed:
        if _CALLISH.match(text, start):
            raise
        return None
    if skip_ws(text, after, end) < end or not _callish_value(value):
        return None
    return value


def _fences(text: str, coll: Collector) -> None:
    pos = last = 0
    found = False
    while (tick := text.find("```", pos)) >= 0:
        opener = _FENCE_OPEN.match(text, tick)
        if opener is None:
            pos = tick + 3
            continue
        lang = opener.group(1).lower()
        fmt = "gemma_tool_code" if lang == "tool_code" else "fenced_json"
        close = text.find("```", opener.end())
        end = len(text) if close < 0 else close
        pos = end + 3
        try:
            payload = _fence_payload(text, lang, opener.end(), end)
            if payload is None:
                continue
            if close < 0:
                raise Malformed("unterminated_fence", "``` fence is never closed", pos=tick)
            coll.note(fmt)
            coll.add_content(text[last:tick])
            found, last = True, pos
            feed(payload, coll, path="$", strict=True)
        except Malformed as fault:
            fault.fmt = fault.fmt or fmt
            raise fault.at(skip_ws(text, opener.end())) from None
    if not found:
        _plain(text, coll)
        return
    coll.add_content(text[last:])
