"""Gemma 4 and FunctionGemma calls: ``call:NAME{…}`` between special tokens, JSON-ish arguments.

Gemma 4 (strings delimited by ``<|"|>``; reasoning in ``<|channel>thought … <channel|>`` is split
off before this parser runs)::

    Let me check.<|tool_call>call:get_weather{city:<|"|>Paris<|"|>,unit:<|"|>c<|"|>}<tool_call|>
    <|tool_call>call:set{nested:{my key:[1,2.5,1e+21,true,null]}}<tool_call|>

FunctionGemma (strings delimited by ``<escape>``)::

    <start_function_call>call:get_weather{city:<escape>Tokyo<escape>,days:3}<end_function_call>

Gemma 4 may also close its thought channel straight into a call without the opening token
(``<|channel>thought\n…<channel|>call:bash{command:<|"|>ls<|"|>}``); that call is read too.

Each call is ``OPEN call:NAME ARGS CLOSE`` where ARGS is read by
:class:`~actionspace.parse._jsonish.JsonishScanner`; several calls may follow one another with
text between them. A call is added only once its CLOSE token is read.
"""

from __future__ import annotations

from dataclasses import dataclass

from actionspace.parse._jsonish import JsonishScanner
from actionspace.parse._result import Collector, Malformed
from actionspace.parse._scan import skip_ws, snippet
from actionspace.types import ToolCall

__all__ = ["FUNCTION_GEMMA", "GEMMA4", "parse_function_gemma", "parse_gemma4", "parse_gemma4_after_thought"]


@dataclass(frozen=True, slots=True)
class GemmaTokens:
    """The tokens of one Gemma call format."""

    fmt: str
    open: str
    close: str
    delimiter: str


GEMMA4 = GemmaTokens("gemma4", "<|tool_call>", "<tool_call|>", '<|"|>')
FUNCTION_GEMMA = GemmaTokens("function_gemma", "<start_function_call>", "<end_function_call>", "<escape>")
_NAME_STOPS = "{<>\n"


def parse_gemma4(text: str, coll: Collector) -> None:
    """Gemma 4 ``<|tool_call>call:NAME{…}<tool_call|>`` calls, with text around them."""
    _parse(text, coll, GEMMA4)


def parse_gemma4_after_thought(text: str, coll: Collector) -> None:
    """Gemma 4 output whose thought channel closed straight into ``call:NAME{…}`` without
    ``<|tool_call>`` (the closing ``<tool_call|>`` may be missing too); then any further calls."""
    coll.note(GEMMA4.fmt)
    scanner = JsonishScanner(text, GEMMA4.delimiter)
    head = skip_ws(text, 0)
    call, pos = _call(text, head, scanner, GEMMA4, bare=True)
    coll.add_call(call)
    _parse(text, coll, GEMMA4, pos)


def parse_function_gemma(text: str, coll: Collector) -> None:
    """FunctionGemma ``<start_function_call>call:NAME{…}<end_function_call>`` calls."""
    _parse(text, coll, FUNCTION_GEMMA)


def _parse(text: str, coll: Collector, tokens: GemmaTokens, pos: int = 0) -> None:
    coll.note(tokens.fmt)
    scanner = JsonishScanner(text, tokens.delimiter)
    while (start := text.find(tokens.open, pos)) >= 0:
        coll.add_content(text[pos:start])
        call, pos = _call(text, start, scanner, tokens)
        coll.add_call(call)
    coll.add_content(text[pos:])


def _call(
    text: str, start: int, scanner: JsonishScanner, tokens: GemmaTokens, *, bare: bool = False
) -> tuple[ToolCall, int]:
    head = start if bare else skip_ws(text, start + len(tokens.open))
    if not text.startswith("call:", head):
        reason = "truncated" if head >= len(text) or "call:".startswith(text[head:]) else "missing_call"
        raise Malformed(reason, f"{tokens.open} is not followed by 'call:'", pos=head)
    name_start = head + len("call:")
    brace = name_start
    while brace < len(text) and text[brace] not in _NAME_STOPS:
        brace += 1
    name = text[name_start:brace].strip()
    if brace >= len(text):
        raise Malformed("truncated", "call:NAME is not followed by '{'", pos=head)
    if text[brace] != "{":
        raise Malformed("missing_arguments", f"call:{name} is not followed by '{{'", pos=brace)
    if not name:
        raise Malformed("missing_name", "call: names no function", pos=head)
    arguments, after = scanner.object_at(brace)
    if bare:
        close = skip_ws(text, after)
        end = close + len(tokens.close) if text.startswith(tokens.close, close) else after
        return ToolCall(name=name, arguments=arguments), end
    after = skip_ws(text, after)
    if not text.startswith(tokens.close, after):
        if after >= len(text) or tokens.close.startswith(text[after:]):
            raise Malformed(
                "unterminated_block", f"{tokens.open} is never closed by {tokens.close}", pos=start
            )
        raise Malformed(
            "unexpected_text", f"unexpected text {snippet(text, after)!r} after the arguments", pos=after
        )
    return ToolCall(name=name, arguments=arguments), after + len(tokens.close)
