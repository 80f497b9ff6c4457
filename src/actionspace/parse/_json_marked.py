"""JSON calls behind a marker token: Jamba, MiniMax-M1, Granite, Phi-4-mini and InternLM2.

Jamba (one JSON list of calls in a ``<tool_calls>`` block)::

    <tool_calls>[{"name": "get_weather", "arguments": {"city": "Paris"}}]</tool_calls>

MiniMax-M1 (the same block, one JSON call object a line)::

    <tool_calls>
    {"name": "get_weather", "arguments": {"city": "Paris"}}
    {"name": "get_time", "arguments": {"zone": "CET"}}
    </tool_calls>

Granite 3.0 (``<|tool_call|>``) and 3.1 (``<tool_call>``, read in :mod:`~actionspace.parse._tagged`),
a JSON list with no closing token::

    <|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris"}}]

Phi-4-mini (``functools`` and a JSON list)::

    functools[{"name": "get_weather", "arguments": {"city": "Paris"}}]

InternLM2 / 2.5 (one call, its arguments under ``parameters``; code for its code interpreter)::

    <|action_start|><|plugin|>
    {"name": "get_weather", "parameters": {"city": "Paris"}}<|action_end|>
    <|action_start|><|interpreter|>
    ```python
    print(2 ** 10)
    ```<|action_end|>

A block's first character decides between Jamba and MiniMax-M1 (``[`` or ``{``). A call object is
``{"name", "arguments"}`` (or ``parameters``); text around the calls is content. A block that stops
before its end is ``truncated``; an InternLM2 call whose whole JSON stands at the end of the output
counts without ``<|action_end|>`` (servers that skip special tokens drop it). An InternLM2
interpreter action asks to run code: a call of the tool named ``interpreter`` (its argument
``code`` the code as written) when ``tools`` offers one, else an ``unsupported_recipient`` fault,
never words shown as the answer.
"""

from __future__ import annotations

from actionspace.parse._result import Collector, Malformed
from actionspace.parse._scan import Finder, decode_json_at, iter_json_values, skip_ws, snippet
from actionspace.parse._tokens import generic_items
from actionspace.types import ToolCall

__all__ = [
    "GRANITE_CALL",
    "INTERNLM_ACTION",
    "INTERNLM_INTERPRETER",
    "PHI4_CALLS",
    "TOOL_CALLS_OPEN",
    "json_list_call",
    "parse_granite",
    "parse_internlm",
    "parse_phi4",
    "parse_tool_calls_block",
    "unexpected",
]

TOOL_CALLS_OPEN, TOOL_CALLS_CLOSE = "<tool_calls>", "</tool_calls>"
GRANITE_CALL = "<|tool_call|>"
PHI4_CALLS = "functools["
INTERNLM_ACTION, INTERNLM_END = "<|action_start|><|plugin|>", "<|action_end|>"
INTERNLM_INTERPRETER, INTERPRETER = "<|action_start|><|interpreter|>", "interpreter"


def unexpected(text: str, pos: int, expected: tuple[str, ...], where: str) -> Malformed:
    """The fault of text at ``pos`` that is none of the ``expected`` tokens: ``truncated`` when the
    output stops inside one of them (``…}</tool_ca``), else ``unexpected_text``."""
    rest = text[pos:]
    if rest and any(token.startswith(rest) for token in expected):
        return Malformed("truncated", f"the output stops inside {rest!r} {where}", pos=pos)
    return Malformed("unexpected_text", f"unexpected text {snippet(text, pos)!r} {where}", pos=pos)


def parse_tool_calls_block(text: str, coll: Collector) -> None:
    """Every ``<tool_calls>`` block: a JSON list (Jamba) or JSON objects a line (MiniMax-M1)."""
    finder = Finder(text)
    pos = 0
    while (start := finder.find(TOOL_CALLS_OPEN, pos)) >= 0:
        coll.add_content(text[pos:start])
        body = start + len(TOOL_CALLS_OPEN)
        close = finder.find(TOOL_CALLS_CLOSE, body)
        first = skip_ws(text, body)
        if text.startswith("[", first):
            coll.note("jamba")
            value, after = decode_json_at(text, first, what="<tool_calls> JSON list")
            generic_items(value, first, TOOL_CALLS_OPEN, coll)
        else:
            coll.note("minimax")
            after = _json_lines(text, body, len(text) if close < 0 else close, coll)
        end = skip_ws(text, after)
        if not text.startswith(TOOL_CALLS_CLOSE, end):
            if end >= len(text):
                raise Malformed(
                    "truncated", f"{TOOL_CALLS_OPEN} is never closed by {TOOL_CALLS_CLOSE}", pos=start
                )
            raise unexpected(text, end, (TOOL_CALLS_CLOSE,), f"in {TOOL_CALLS_OPEN}")
        pos = end + len(TOOL_CALLS_CLOSE)
    coll.add_content(text[pos:])


def _json_lines(text: str, body: int, end: int, coll: Collector) -> int:
    """The JSON call objects of a MiniMax-M1 block up to ``end``; the offset after the last."""
    after = body
    if skip_ws(text, body, end) >= end:
        return after  # an empty block: no call
    for value, at, stop in iter_json_values(text, body, end):
        after = stop
        if not isinstance(value, dict):
            kind = type(value).__name__
            raise Malformed("not_an_object", f"{TOOL_CALLS_OPEN} holds a {kind}, not a call", pos=at)
        generic_items(value, at, TOOL_CALLS_OPEN, coll)
    return after


def json_list_call(text: str, first: int, marker: str, coll: Collector) -> int:
    """The JSON list of calls at ``first`` (after ``marker``); the offset after it."""
    if not text.startswith("[", skip_ws(text, first)):
        at = skip_ws(text, first)
        reason = "truncated" if at >= len(text) else "not_a_list"
        raise Malformed(reason, f"{marker} is not followed by a JSON list of calls", pos=at)
    value, after = decode_json_at(text, first, what=f"{marker} JSON list")
    generic_items(value, skip_ws(text, first), marker, coll)
    return after


def _marked_lists(text: str, coll: Collector, marker: str, fmt: str, body_at: int) -> None:
    coll.note(fmt)
    finder = Finder(text)
    pos = 0
    while (start := finder.find(marker, pos)) >= 0:
        coll.add_content(text[pos:start])
        pos = json_list_call(text, start + body_at, marker, coll)
    coll.add_content(text[pos:])


def parse_granite(text: str, coll: Collector) -> None:
    """Granite 3.0: ``<|tool_call|>`` and a JSON list of calls."""
    _marked_lists(text, coll, GRANITE_CALL, "granite", len(GRANITE_CALL))


def parse_phi4(text: str, coll: Collector) -> None:
    """Phi-4-mini: ``functools`` and a JSON list of calls."""
    _marked_lists(text, coll, PHI4_CALLS, "phi4_mini", len(PHI4_CALLS) - 1)


def parse_internlm(text: str, coll: Collector) -> None:
    """InternLM2: ``<|action_start|><|plugin|>``, one JSON call, ``<|action_end|>``."""
    coll.note("internlm")
    finder = Finder(text)
    pos = 0
    while starts := [
        (at, m) for m in (INTERNLM_ACTION, INTERNLM_INTERPRETER) if (at := finder.find(m, pos)) >= 0
    ]:
        start, marker = min(starts)
        coll.add_content(text[pos:start])
        if marker == INTERNLM_INTERPRETER:
            pos = _interpreter(text, start, coll, finder)
            continue
        first = skip_ws(text, start + len(INTERNLM_ACTION))
        value, after = decode_json_at(text, first, what=f"{INTERNLM_ACTION} JSON call")
        if not isinstance(value, dict):
            raise Malformed(
                "not_an_object", f"{INTERNLM_ACTION} is not followed by a JSON call object", pos=first
            )
        end = skip_ws(text, after)
        if text.startswith(INTERNLM_END, end):
            pos = end + len(INTERNLM_END)
        elif end >= len(text):
            pos = end
        else:
            raise unexpected(text, end, (INTERNLM_END,), "after the call")
        generic_items(value, first, INTERNLM_ACTION, coll)
    coll.add_content(text[pos:])


def _interpreter(text: str, start: int, coll: Collector, finder: Finder) -> int:
    """The code of the interpreter action at ``start`` as a call of the offered ``interpreter`` tool;
    the offset after it. Code is never whole before ``<|action_end|>``."""
    if not coll.offers(INTERPRETER):
        raise Malformed(
            "unsupported_recipient",
            f"{INTERNLM_INTERPRETER} asks to run code in a code interpreter, which is not a function "
            f"(no tool named {INTERPRETER!r} is offered): call a function with <|plugin|>",
            pos=start,
        )
    body = start + len(INTERNLM_INTERPRETER)
    close = finder.find(INTERNLM_END, body)
    if close < 0:
        raise Malformed("truncated", f"{INTERNLM_INTERPRETER} is never closed by {INTERNLM_END}", pos=start)
    coll.add_call(ToolCall(name=INTERPRETER, arguments={"code": text[body:close].strip()}))
    return close + len(INTERNLM_END)
