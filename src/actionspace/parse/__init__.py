"""Provider formats in, :class:`~actionspace.types.ToolCall` out.

:func:`parse` reads whatever a model or a provider SDK produced — a ``ToolCall``, provider objects
(OpenAI chat and Responses, Anthropic, Gemini, MCP ``tools/call``), their JSON text, or raw model text in
the formats open-weight models emit without a server-side tool parser (Hermes/Qwen, Qwen3-Coder XML,
Llama 3.x/4, pythonic lists, Mistral, DeepSeek V3/V3.1 and the DSML of V3.2/V4, GLM-4.5–4.7,
Kimi K2, gpt-oss harmony, Gemma 4, Gemma ``tool_code``, FunctionGemma, Seed-OSS, MiniMax-M1/M2,
Jamba, Granite, InternLM2, Phi-4-mini, JSON and fenced JSON) — and
returns a :class:`ParseResult`. It never raises: anything malformed comes back as ``error`` with
category ``parse_error``. Each text format is written out in its module's docstring.

:class:`StreamParser` reads the same outputs delta by delta (raw text, or OpenAI / Responses /
Anthropic stream events, Gemini's streamed chunks) and reports each call only once it is
complete. :func:`call_ids` finds the call ids of a provider message whose calls do not all parse.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from actionspace.errors import ActionError
from actionspace.parse._events import event_stream
from actionspace.parse._fast import (
    fast_anthropic_message,
    fast_openai_entry,
    fast_openai_message,
    fast_responses_items,
    loads_object,
)
from actionspace.parse._ids import call_ids, ids_apart
from actionspace.parse._result import Collector, ParseResult, checked_ids
from actionspace.parse._stream import StreamParser, StreamProgress
from actionspace.parse._structured import add_value
from actionspace.parse._user import user_text
from actionspace.types import ToolCall

__all__ = ["ParseResult", "StreamParser", "StreamProgress", "call_ids", "ids_apart", "parse", "user_text"]


def parse(raw: object, tools: Sequence[Mapping[str, Any]] | None = None) -> ParseResult:
    """Every tool call in ``raw``, with the text and reasoning around them.

    ``raw`` may be a ``ToolCall``; a provider dict (or its JSON text, or a pydantic SDK object);
    raw model text (``str`` or UTF-8 ``bytes``); a list/tuple of any of these, whose calls are
    concatenated in order; or the list of a streamed output's provider events, read as
    :class:`StreamParser` reads them (a stream the provider cut off is ``cut_off``). ``tools``
    (OpenAI tool dicts, ``{"name", "input_schema"}`` dicts or ``ToolSpec`` objects) types the
    text-valued arguments of Qwen3 XML and GLM-4.5 by schema.

    Never raises. A fault ends parsing at that point: ``calls`` keeps the well-formed calls before
    it, and ``error`` is a ``parse_error`` whose ``details`` carry ``format``, ``reason``,
    ``position`` (character offset) with ``line``/``column`` for text, ``path`` for objects, and
    the call ``index`` / ``id`` when known. A call is never guessed: a truncated call is dropped.
    Two calls carrying one call id are a fault at the second (reason ``duplicate_call_id``):
    providers refuse such a message, and an answer per id could not say which call it answers. A
    ``ToolCall`` whose id is not a string is a fault too (reason ``invalid_id``), and one whose name
    is not a string (reason ``invalid_name``).
    """
    try:
        if isinstance(raw, ToolCall):
            one = ParseResult(calls=(raw,), content=None, reasoning=None, error=None, format="toolcall")
            well = type(raw.name) is str and (raw.id is None or type(raw.id) is str)
            return one if well else checked_ids(one)
        if isinstance(raw, str) and raw[:1] == "{":
            value = loads_object(raw)
            if value is not None:
                fast = fast_openai_entry(value) or fast_openai_message(value)
                if fast is not None:
                    return fast
        elif type(raw) is dict:
            fast = fast_openai_message(raw) or fast_anthropic_message(raw)
            if fast is not None:
                return fast
        elif type(raw) is list:
            fast = fast_responses_items(raw)
            if fast is not None:
                return fast
        if type(raw) is list or type(raw) is tuple:
            stream = event_stream(raw, tools)  # a streamed output's events, handed over whole
            if stream is not None:
                return stream.finish()
        coll = Collector(tools)
        add_value(raw, coll)
        return coll.result()
    except Exception as exc:  # a bug here must not take the runtime down; report it instead
        error = ActionError.of(
            "internal",
            f"parse failed unexpectedly ({type(exc).__name__}: {str(exc)[:200]})",
            details={"reason": "internal", "exception": type(exc).__name__},
        )
        return ParseResult(calls=(), content=None, reasoning=None, error=error, format="unknown")
