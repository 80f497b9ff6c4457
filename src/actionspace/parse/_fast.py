"""Fast readings of the commonest provider shapes, with plain checks only.

``parse`` tries these before the full path (:mod:`actionspace.parse._structured`): one OpenAI
``tool_calls`` entry, a Chat Completions or an Anthropic assistant message, a list of Responses
items. Each returns exactly what the full path returns, or None for anything it does not read
(``tests/parse/test_fast_shapes.py`` holds them equal over generated shapes, well-formed or not).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic_core import from_json

from actionspace.parse._result import ParseResult, checked_ids
from actionspace.parse._scan import DECODER, DuplicateKey, loads
from actionspace.parse._structured import CUT_OFF_STATUSES as _CUT_OFF_STATUSES
from actionspace.parse._structured import CUT_OFF_STOP_REASONS as _CUT_OFF_STOP_REASONS
from actionspace.parse._structured import REASONING_FIELDS as _REASONING_FIELDS
from actionspace.types import ToolCall

__all__ = [
    "fast_anthropic_message",
    "fast_openai_entry",
    "fast_openai_message",
    "fast_responses_items",
    "loads_object",
    "openai_entry_parts",
    "repeats_a_key",
]

_scan_once = DECODER.scan_once  # type: ignore[attr-defined]


def loads_object(text: str) -> Any:
    """``json.loads`` of text starting with ``{`` without the decoder's regex passes; None if invalid.

    The fast path only: any failure returns None and the full parser reports it with its position.
    """
    try:
        value, end = _scan_once(text, 0)
    except (StopIteration, ValueError, RecursionError):
        return None
    if end != len(text) and not text[end:].isspace():
        return None
    return value


def openai_entry_parts(raw: str) -> tuple[str, str | None, Any, bool] | None:
    """(name, id, arguments, escaped) of one OpenAI ``tool_calls`` entry in JSON text, as ``parse``
    reads it (None: anything else, a key given twice included), read with ``pydantic_core.from_json``
    (the precompiled call path; the arguments are not checked here). ``escaped``: the text holds a
    ``\\u`` escape (so its strings may hold what it does not show, such as U+0000)."""
    try:
        value = from_json(raw, allow_inf_nan=False)
    except ValueError:
        return None
    if type(value) is not dict:
        return None
    function = value.get("function")
    if type(function) is not dict or value.get("type", "function") != "function":
        return None
    name = function.get("name")
    call_id = value.get("id")
    if type(name) is not str or (call_id is not None and type(call_id) is not str):
        return None
    # A key given twice is read as one here; the parser refuses it (``duplicate_key``). Each key
    # is followed by one colon, written as such; a colon inside a string adds one, or none when
    # escaped. So in text without an escape, as many colons as the keys read at the top levels
    # means no key was given twice (and no nested object has keys); else the parser's own reading
    # decides (:func:`repeats_a_key`).
    text = function.get("arguments")
    if type(text) is str:
        if text[:1] != "{":
            return None
        try:
            arguments = from_json(text, allow_inf_nan=False)
        except ValueError:
            return None
        if (
            type(arguments) is dict
            and raw.count(":") == len(value) + len(function) + len(arguments)
            and "\\u" not in raw
        ):
            return name.strip(), call_id or None, arguments, False  # an empty id is no id, as parse reads it
    else:
        arguments, text = {} if text is None else text, ""
    if repeats_a_key(raw, text):
        return None
    return name.strip(), call_id or None, arguments, "\\u" in raw


def repeats_a_key(raw: str, arguments: str) -> bool:
    """Whether the entry ``raw`` or its ``arguments`` text gives a key twice in one object (as
    :data:`~actionspace.parse._scan.DECODER` reads JSON; any other fault is the parser's to report)."""
    for text in (raw, arguments) if arguments else (raw,):
        try:
            _scan_once(text, 0)
        except DuplicateKey:
            return True
        except (StopIteration, ValueError, RecursionError):
            return False
    return False


def fast_openai_entry(value: object) -> ParseResult | None:
    """The benchmark's shape, one OpenAI ``tool_calls`` entry, built with plain dict checks only."""
    if type(value) is not dict:
        return None
    function = value.get("function")
    if type(function) is not dict or value.get("type", "function") != "function":
        return None
    name = function.get("name")
    call_id = value.get("id")
    if (
        type(name) is not str
        or not (name := name.strip())
        or (call_id is not None and type(call_id) is not str)
    ):
        return None
    if not call_id:
        call_id = None  # an empty id is no id, as the full path reads it
    arguments = function.get("arguments")
    if type(arguments) is str:
        if arguments[:1] == "{":
            arguments = loads_object(arguments)
            if arguments is None:
                return None  # the full path reports it with its position
        else:
            try:
                arguments = loads(arguments)
            except (ValueError, RecursionError):
                return None  # the full path reports it with its position (or reads "" as no arguments)
    elif arguments is None:
        arguments = {}
    call = ToolCall(name=name, arguments=arguments, id=call_id)
    return ParseResult(calls=(call,), content=None, reasoning=None, error=None, format="openai_chat")


def fast_openai_message(value: object) -> ParseResult | None:
    """An OpenAI Chat Completions assistant message whose every ``tool_calls`` entry
    :func:`fast_openai_entry` reads, with no content or plain text content, no reasoning, no
    refusal and no legacy ``function_call``: what the full path gives, with plain dict checks only (None: take
    the full path)."""
    if type(value) is not dict or value.get("role", "assistant") != "assistant" or "type" in value:
        return None
    stop = value.get("stop_reason")
    if _cut_off(stop, _CUT_OFF_STOP_REASONS):
        return None  # cut off: the full path refuses its calls
    entries = value.get("tool_calls")
    content = value.get("content")
    if (
        type(entries) is not list
        or not entries
        or (content is not None and type(content) is not str)
        or value.get("function_call") is not None
        or value.get("refusal") is not None
        or any(value.get(key) is not None for key in _REASONING_FIELDS)
    ):
        return None
    calls: list[ToolCall] = []
    for entry in entries:
        one = fast_openai_entry(entry)
        if one is None:
            return None
        calls.append(one.calls[0])
    text = content.strip() if content else None
    if stop is not None:  # a chat message seldom says (its completion's choice does)
        return checked_ids(
            ParseResult(
                calls=tuple(calls),
                content=text or None,
                reasoning=None,
                error=None,
                format="openai_chat",
                stop_reason=_stop(stop),
            )
        )
    return checked_ids(
        ParseResult(
            calls=tuple(calls), content=text or None, reasoning=None, error=None, format="openai_chat"
        )
    )


def fast_anthropic_message(value: object) -> ParseResult | None:
    """An Anthropic assistant message (``{"role": "assistant", "content": [blocks]}``) whose
    blocks are ``text`` and at least one ``tool_use`` with a string name and id and an object
    ``input``, without reasoning fields: what the full path gives, with plain dict checks only
    (None: take the full path)."""
    if type(value) is not dict or value.get("role") != "assistant" or not _plain_message(value):
        return None
    stop = value.get("stop_reason")
    if _cut_off(stop, _CUT_OFF_STOP_REASONS):
        return None  # cut off: the full path refuses its calls
    blocks = value.get("content")
    if (
        type(blocks) is not list
        or value.get("tool_calls") is not None
        or value.get("function_call") is not None
        or value.get("refusal") is not None
        or any(value.get(key) is not None for key in _REASONING_FIELDS)
    ):
        return None
    calls: list[ToolCall] = []
    texts: list[str] = []
    for block in blocks:
        if type(block) is not dict:
            return None
        kind = block.get("type")
        if kind == "tool_use":
            call = _fast_call(block.get("name"), block.get("input"), block.get("id"))
            if call is None:
                return None
            calls.append(call)
        elif kind == "text":
            text = block.get("text")
            if type(text) is not str:
                return None
            if text := text.strip():
                texts.append(text)
        else:
            return None
    if not calls:
        return None
    content = "\n".join(texts) if texts else None
    return checked_ids(
        ParseResult(
            calls=tuple(calls),
            content=content,
            reasoning=None,
            error=None,
            format="anthropic",
            stop_reason=stop if type(stop) is str and stop else _stop(stop),
        )
    )


def fast_responses_items(value: object) -> ParseResult | None:
    """A list of Responses output items holding ``function_call`` items (string name and call
    id, JSON object text as arguments) and reasoning items without text: what the full path
    gives, with plain checks only (None: take the full path)."""
    if type(value) is not list or not value:
        return None
    calls: list[ToolCall] = []
    for item in value:
        if type(item) is not dict:
            return None
        kind = item.get("type")
        if kind == "function_call":
            if not _plain_message(item, "type") or _cut_off(item.get("status"), _CUT_OFF_STATUSES):
                return None
            arguments = item.get("arguments")
            if type(arguments) is not str or arguments[:1] != "{":
                return None
            decoded = loads_object(arguments)
            if type(decoded) is not dict:
                return None
            call = _fast_call(item.get("name"), decoded, item.get("call_id", item.get("id")))
            if call is None:
                return None
            calls.append(call)
        elif kind == "reasoning":
            if set(item) - {"type", "id", "summary", "encrypted_content", "status"} or item.get("summary"):
                return None  # any text in it is the reasoning the full path collects
        else:
            return None
    if not calls:
        return None
    return checked_ids(
        ParseResult(calls=tuple(calls), content=None, reasoning=None, error=None, format="openai_responses")
    )


def _cut_off(value: object, marks: frozenset[str]) -> bool:
    """Whether ``value`` (a ``stop_reason`` or a ``status``) says the output was cut off."""
    return type(value) is str and value in marks


def _stop(stop: object) -> str | None:
    """A ``stop_reason`` that is not a plain non-empty string as the full path keeps it: a string
    as ``str``, anything else as None."""
    return str(stop) if isinstance(stop, str) and stop else None


def _plain_message(value: Mapping[Any, Any], allowed: str | None = None) -> bool:
    """No key that makes :func:`classify` read ``value`` as another shape (``allowed`` aside)."""
    return not any(
        key in value for key in ("choices", "output", "jsonrpc", "method", "type") if key != allowed
    )


def _fast_call(name: object, arguments: object, call_id: object) -> ToolCall | None:
    """A call from a name, an object of arguments and an id, as ``_call`` makes it; None for
    anything ``_call`` would read otherwise or refuse."""
    if (
        type(name) is not str
        or type(arguments) is not dict
        or (call_id is not None and type(call_id) is not str)
    ):
        return None
    name = name.strip()
    if not name:
        return None
    return ToolCall(name=name, arguments=arguments, id=call_id or None)
