"""Provider objects: OpenAI chat and Responses, Anthropic, MCP, generic ``{"name", "arguments"}``;
Gemini's shapes are read by :mod:`actionspace.parse._gemini`."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from actionspace._encoder import dump_within
from actionspace._placeholders import bounded_repr, is_model, type_name
from actionspace.parse._gemini_shapes import is_gemini
from actionspace.parse._result import Collector, Malformed
from actionspace.parse._scan import decode_arguments
from actionspace.types import ToolCall

__all__ = [
    "CUT_OFF_FINISH_REASONS",
    "CUT_OFF_STATUSES",
    "CUT_OFF_STOP_REASONS",
    "REASONING_FIELDS",
    "add_value",
    "call_from_generic",
    "classify",
    "cut_off_fault",
    "feed",
    "looks_like_call",
    "responses_stop",
]

MAX_DEPTH = 32
_ARGUMENT_KEYS = ("arguments", "parameters", "args", "input")
_CONTENT_BLOCKS = {"text": "text", "output_text": "text", "refusal": "refusal"}
_REASONING_BLOCKS = {"thinking": "thinking", "reasoning_text": "text", "summary_text": "text"}
REASONING_FIELDS = ("reasoning_content", "reasoning", "thinking")
"""Fields of a message holding the model's reasoning beside its calls."""
CUT_OFF_STOP_REASONS = frozenset({"max_tokens", "model_context_window_exceeded", "refusal"})
"""Anthropic ``stop_reason`` values of a message stopped before its end: by the token limit, or by
the provider's classifiers (``refusal``), which may stop it inside a call's input."""
CUT_OFF_STATUSES = frozenset({"incomplete", "in_progress", "failed", "cancelled"})
"""Responses ``status`` values of an output (or an output item) not emitted to its end."""
CUT_OFF_FINISH_REASONS = frozenset({"length", "content_filter"})
"""OpenAI chat ``finish_reason`` values of a choice stopped before its end: by the token limit, or
by the provider's content filter, which omits what it flagged."""


_STOPPED_BY_PROVIDER: tuple[str, ...] = (
    *("content_filter", "refusal", "failed", "cancelled", "SAFETY", "RECITATION", "LANGUAGE"),
    *("BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT"),
    *("IMAGE_RECITATION", "MODEL_ARMOR"),
)
"""Of the values above, those that say the provider stopped the output, not the token limit: a
shorter output would not help."""


def _name(value: object, path: str) -> str:
    if isinstance(value, str) and value.strip():
        return value.strip()
    if value is None:
        raise Malformed("missing_name", f"{path} has no tool name", path=path)
    raise Malformed(
        "invalid_name", f"{path} must be a non-empty string, got {type(value).__name__}", path=path
    )


def _id(value: object, path: str) -> str | None:
    if value is None or isinstance(value, str):
        return value or None
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise Malformed("invalid_id", f"{path} must be a string, got {type(value).__name__}", path=path)


def _call(
    name: object, arguments: object, call_id: object, path: str, prefix: str = "", args_key: str = "arguments"
) -> ToolCall:
    ident = _id(call_id, f"{path}.id")
    try:
        return ToolCall(
            name=_name(name, f"{path}.{prefix}name"),
            arguments=decode_arguments(arguments, path=f"{path}.{prefix}{args_key}"),
            id=ident,
        )
    except Malformed as fault:
        if ident is not None:
            fault.details.setdefault("call_id", ident)
        raise


def call_from_generic(value: Mapping[Any, Any], path: str) -> ToolCall:
    """``{"name", "arguments" | "parameters" | "args" | "input", "id"?}`` as one call."""
    present = [key for key in _ARGUMENT_KEYS if key in value]
    if len(present) > 1:
        raise Malformed(
            "ambiguous_arguments", f"{path} has both {present[0]!r} and {present[1]!r}", path=path
        )
    arguments = value.get(present[0]) if present else None
    return _call(value.get("name"), arguments, value.get("id", value.get("call_id")), path)


def _type(value: Mapping[Any, Any]) -> str | None:
    kind = value.get("type")
    return kind if isinstance(kind, str) else None


_CALL_KINDS = frozenset(
    {"function_call", "custom_tool_call", "tool_use", "entry", "custom", "generic", "jsonrpc"}
)


def looks_like_call(value: object) -> bool:
    """True for a mapping shaped like one call (used where JSON in text might just be data)."""
    return isinstance(value, Mapping) and classify(value) in _CALL_KINDS


def classify(value: Mapping[Any, Any]) -> str:
    """The shape of a provider object: ``completion``, ``responses``, ``message``, ``generic``, …"""
    kind = _type(value)
    if "choices" in value:
        return "completion"
    if isinstance(value.get("output"), list):
        return "responses"
    if "jsonrpc" in value or "method" in value:
        return "jsonrpc"
    if kind is not None:
        if kind in ("function_call", "custom_tool_call", "tool_use", "reasoning", "message"):
            return kind
        if kind in _CONTENT_BLOCKS or kind in _REASONING_BLOCKS:
            return "block"
        if kind == "custom" and "custom" in value:
            return "custom"
    if "role" in value or "tool_calls" in value or "function_call" in value:
        gemini = kind is None and ("parts" in value or "function_call" in value) and is_gemini(value)
        return "gemini" if gemini else "message"  # a Gemini Content has a role, its SDK part function_call
    if "function" in value:
        return "entry"
    if "name" in value:
        return "generic"
    return "gemini" if kind is None and is_gemini(value) else "unknown"


def add_value(value: object, coll: Collector, *, path: str = "$", strict: bool = True) -> None:
    """Add whatever ``value`` holds to ``coll``; faults are recorded there, never raised."""
    try:
        feed(value, coll, path=path, strict=strict)
    except Malformed as fault:
        coll.fail(fault, coll.recent or coll.format or "unknown")


def feed(value: object, coll: Collector, *, path: str = "$", strict: bool = True) -> None:
    """Add whatever ``value`` holds to ``coll``; raises :class:`Malformed` at the first fault."""
    _add(value, coll, path, 0, strict)


def _add(value: object, coll: Collector, path: str, depth: int, strict: bool) -> None:
    if depth > MAX_DEPTH:
        raise Malformed("too_deep", f"{path} is nested more than {MAX_DEPTH} levels", path=path)
    if isinstance(value, ToolCall):
        coll.note("toolcall")
        coll.add_call(value)
    elif isinstance(value, Mapping):
        coll.spend(1, path)
        _mapping(value, coll, path, depth)
    elif isinstance(value, (str, bytes, bytearray, memoryview)):
        from actionspace.parse._text import parse_text_or_bytes

        if depth:  # what a text inside costs to read: what it holds, each place it is held
            coll.spend(1 + len(value) // 16, path)
        parse_text_or_bytes(value, coll, strict=strict, path=path)
    elif isinstance(value, (list, tuple)):
        coll.spend(1 + len(value), path)
        try:
            for i, item in enumerate(value):
                if coll.error is not None:
                    return
                _add(item, coll, f"{path}[{i}]", depth + 1, strict)
        except Malformed as fault:
            if "function_calls" in fault.details:  # a Gemini item's: name the calls of every item
                from actionspace.parse._gemini import name_listed

                name_listed(fault, value)
            raise
    elif value is None:
        coll.note("empty")
    else:
        _add(_dump(value, path, coll), coll, path, depth + 1, strict)


def _dump(value: object, path: str, coll: Collector) -> object:
    """A pydantic model (an SDK response object) as plain data: a model whose dump would cost more
    than ``coll`` may still read is refused (pydantic's dump cannot be stopped once it runs)."""
    dump = getattr(value, "model_dump", None)
    if not callable(dump):
        raise Malformed("unsupported_type", f"{path} is a {type_name(value)}, not a tool call", path=path)
    if is_model(value) and not dump_within(value, coll.left):
        coll.spend(coll.left + 1, path)
    try:
        return dump()
    except Exception as exc:
        raise Malformed(
            "unsupported_type", f"{path}.model_dump() failed ({type(exc).__name__})", path=path
        ) from None


def _mapping(value: Mapping[Any, Any], coll: Collector, path: str, depth: int) -> None:
    kind = classify(value)
    if kind == "completion":
        coll.note("openai_chat")
        _completion(value, coll, path, depth)
    elif kind == "responses":
        coll.note("openai_responses")
        start = len(coll.calls)
        status = value.get("status")
        coll.stopped(responses_stop(value, status))  # before the items: a fault in them keeps it
        _items(value.get("output"), coll, f"{path}.output", depth)
        if isinstance(status, str) and status in CUT_OFF_STATUSES:
            _cut_off(coll, start, f"status {status!r}", f"{path}.status")
    elif kind == "jsonrpc":
        coll.note("mcp")
        _jsonrpc(value, coll, path)
    elif kind in ("message", "reasoning", "block"):
        _message(value, coll, path, depth)
    elif kind in ("function_call", "custom_tool_call", "tool_use"):
        coll.note("anthropic" if kind == "tool_use" else "openai_responses")
        coll.add_call(_item_call(value, kind, path))
    elif kind in ("entry", "custom"):
        coll.note("openai_chat")
        coll.add_call(_entry(value, path))
    elif kind == "generic":
        coll.note("generic")
        coll.add_call(call_from_generic(value, path))
    elif kind == "gemini":
        from actionspace.parse._gemini import read_gemini

        read_gemini(value, coll, path)
    else:
        keys = ", ".join(bounded_repr(k, 40) for k in itertools.islice(value, 6)) or "no keys"
        raise Malformed(
            "unrecognized_object", f"{path} is not a known call or message shape ({keys})", path=path
        )


def _completion(value: Mapping[Any, Any], coll: Collector, path: str, depth: int) -> None:
    choices = value.get("choices")
    if not isinstance(choices, Sequence) or isinstance(choices, str) or not choices:
        raise Malformed("missing_choices", f"{path}.choices is empty or not a list", path=path)
    choice = choices[0]
    message = choice.get("message") if isinstance(choice, Mapping) else None
    if not isinstance(message, Mapping):
        raise Malformed("missing_message", f"{path}.choices[0] has no message object", path=path)
    start = len(coll.calls)
    finish = choice.get("finish_reason")
    coll.stopped(finish)  # before the message: a call cut off inside it still says why it stopped
    _message(message, coll, f"{path}.choices[0].message", depth + 1)
    if isinstance(finish, str) and finish in CUT_OFF_FINISH_REASONS:
        where = f"{path}.choices[0]"
        _cut_off(
            coll, start, f"finish_reason {finish!r}", f"{where}.finish_reason", message, f"{where}.message"
        )


def responses_stop(response: Mapping[Any, Any], status: object) -> object:
    """A Responses response's stop reason: its ``status``, or for an ``incomplete`` one the
    ``incomplete_details.reason`` it gives (``max_output_tokens``, ``content_filter``)."""
    details = response.get("incomplete_details")
    reason = details.get("reason") if status == "incomplete" and isinstance(details, Mapping) else None
    return reason if isinstance(reason, str) and reason else status


def _cut_off(
    coll: Collector,
    start: int,
    why: str,
    path: str,
    message: Mapping[Any, Any] | None = None,
    where: str = "$",
) -> None:
    """Raise ``cut_off`` when calls were read (from ``start`` on) out of an output whose provider
    says it was cut off: any of them may hold less than the model meant to send; the cut says more
    than a fault its text recorded (where the text stops). With none read, raise it when the text
    content of ``message`` (at ``where``) stops inside the opening marker of a call: the cut came
    as the model began it."""
    content = message.get("content") if message is not None else None
    if len(coll.calls) > start or coll.error is not None:
        coll.error = None
        ids = [c.id for c in coll.calls if type(c.id) is str and c.id]
        written = message is not None and not (message.get("tool_calls") or message.get("function_call"))
        if written and isinstance(content, str):  # calls written as text: ids past a fault too
            from actionspace.parse._text_ids import text_call_ids

            ids.extend(text_call_ids(content, strict=False))
        raise cut_off_fault(why, path, list(dict.fromkeys(ids)))
    if isinstance(content, str):
        from actionspace.parse._text import begun_call

        fault = begun_call(content, why, f"{where}.content")
        if fault is not None:
            raise fault


def cut_off_fault(why: str, path: str, ids: Sequence[str] = ()) -> Malformed:
    """The ``cut_off`` fault of an output the provider says it cut off (``why``), with calls in it;
    ``ids``: the call ids those calls carry (``details["call_ids"]``, each to be answered)."""
    if any(repr(stop) in why for stop in _STOPPED_BY_PROVIDER):  # a filter, not the length
        message = f"the provider stopped the output before its end ({why}); none of its calls ran"
    else:
        message = (
            f"the output was cut off before its end ({why}); none of its calls ran: emit them again, "
            "whole (fewer calls per message, or shorter arguments)"
        )
    fault = Malformed("cut_off", message, path=path)
    if ids:
        fault.details["call_ids"] = list(ids)
    return fault


def _entry(value: Mapping[Any, Any], path: str) -> ToolCall:
    kind = value.get("type", "function")
    if kind == "custom":
        custom = value.get("custom")
        if not isinstance(custom, Mapping):
            raise Malformed("missing_function", f"{path}.custom is not an object", path=path)
        ident = _id(value.get("id"), f"{path}.id")
        return ToolCall(
            name=_name(custom.get("name"), f"{path}.custom.name"), arguments=custom.get("input"), id=ident
        )
    if kind != "function":
        raise Malformed(
            "unsupported_call_type",
            f"{path}.type is {bounded_repr(kind, 80)}, expected 'function'",
            path=path,
        )
    function = value.get("function")
    if not isinstance(function, Mapping):
        raise Malformed("missing_function", f"{path}.function is not an object", path=path)
    return _call(function.get("name"), function.get("arguments"), value.get("id"), path, "function.")


def _item_call(value: Mapping[Any, Any], kind: str, path: str) -> ToolCall:
    if kind == "tool_use":
        return _call(value.get("name"), value.get("input"), value.get("id"), path, args_key="input")
    call_id = value.get("call_id", value.get("id"))
    status = value.get("status")
    if isinstance(status, str) and status in CUT_OFF_STATUSES:
        raise Malformed(
            "cut_off",
            f"{path} has status {status!r}: it was not emitted to its end; emit the call again, whole",
            path=f"{path}.status",
            call_id=_id(call_id, f"{path}.call_id"),
        )
    if kind == "custom_tool_call":
        ident = _id(call_id, f"{path}.call_id")
        return ToolCall(name=_name(value.get("name"), f"{path}.name"), arguments=value.get("input"), id=ident)
    return _call(value.get("name"), value.get("arguments"), call_id, path)


def _jsonrpc(value: Mapping[Any, Any], coll: Collector, path: str) -> None:
    method = value.get("method")
    if type(method) is not str or method != "tools/call":  # never the value's own __eq__
        raise Malformed(
            "unsupported_method",
            f"{path}.method is {bounded_repr(method, 80)}, expected 'tools/call'",
            path=path,
        )
    params = value.get("params")
    if not isinstance(params, Mapping):
        raise Malformed("missing_params", f"{path}.params is not an object", path=path)
    coll.add_call(_call(params.get("name"), params.get("arguments"), value.get("id"), f"{path}.params"))


def _message(value: Mapping[Any, Any], coll: Collector, path: str, depth: int) -> None:
    role = value.get("role")
    if role is not None and (type(role) is not str or role != "assistant"):
        raise Malformed(
            "not_assistant",
            f"{path} is a {bounded_repr(role, 80)} message, not an assistant proposal",
            path=path,
        )
    kind = _type(value)
    if kind == "reasoning" or kind in _REASONING_BLOCKS or kind in _CONTENT_BLOCKS:
        coll.note("openai_responses" if kind in ("reasoning", "output_text") else "anthropic")
        _block(value, coll, path, depth)
        return
    for key in REASONING_FIELDS:
        coll.add_reasoning(value.get(key))
    calls = value.get("tool_calls")
    legacy = value.get("function_call")
    start = len(coll.calls)
    stop = value.get("stop_reason")
    coll.stopped(stop)  # before the content and calls: a call cut off in them still says why
    _message_content(value, coll, path, depth, has_calls=bool(calls or legacy))
    coll.add_refusal(value.get("refusal"))
    coll.note(_message_format(value))
    if calls is not None:
        if not isinstance(calls, list):
            raise Malformed("invalid_tool_calls", f"{path}.tool_calls is not a list", path=path)
        for i, entry in enumerate(calls):
            if not isinstance(entry, Mapping):
                raise Malformed("invalid_tool_calls", f"{path}.tool_calls[{i}] is not an object", path=path)
            coll.add_call(_entry(entry, f"{path}.tool_calls[{i}]"))
    if isinstance(legacy, Mapping):
        coll.add_call(_call(legacy.get("name"), legacy.get("arguments"), None, f"{path}.function_call"))
    elif legacy is not None:
        raise Malformed("invalid_function_call", f"{path}.function_call is not an object", path=path)
    if isinstance(stop, str) and stop in CUT_OFF_STOP_REASONS:
        try:
            _cut_off(coll, start, f"stop_reason {stop!r}", f"{path}.stop_reason", value, path)
        except Malformed as fault:  # ``stop_reason`` is Anthropic's: the fault names that format
            fault.fmt = fault.fmt or "anthropic"
            raise


def _message_format(value: Mapping[Any, Any]) -> str:
    """The format an assistant message is written in, as its own fields tell: Anthropic's blocks
    or ``stop_reason``, a Responses part, else OpenAI chat (an error names the format it read)."""
    content = value.get("content")
    if isinstance(content, list):
        return _list_format(value, content)
    return "anthropic" if "stop_reason" in value else "openai_chat"


def _message_content(
    value: Mapping[Any, Any], coll: Collector, path: str, depth: int, *, has_calls: bool
) -> None:
    """Content beside structured calls is plain text; content alone may hold raw model calls."""
    content = value.get("content")
    if isinstance(content, str):
        if has_calls:
            coll.note("openai_chat")
            coll.add_content(content)
        else:
            from actionspace.parse._text import parse_text_or_bytes

            parse_text_or_bytes(content, coll, strict=False, path=f"{path}.content")
    elif isinstance(content, list):
        coll.note(_list_format(value, content))
        _blocks(content, coll, f"{path}.content", depth)
    elif content is not None:
        raise Malformed("invalid_content", f"{path}.content is a {type(content).__name__}", path=path)


def _list_format(message: Mapping[Any, Any], blocks: list[Any]) -> str:
    kinds = {_type(b) for b in blocks if isinstance(b, Mapping)}
    if "output_text" in kinds:
        return "openai_responses"
    if message.get("type") == "message" or kinds & {"tool_use", "thinking", "redacted_thinking"}:
        return "anthropic"
    return "openai_chat"


def _blocks(blocks: Sequence[Any], coll: Collector, path: str, depth: int) -> None:
    for i, block in enumerate(blocks):
        _block(block, coll, f"{path}[{i}]", depth)


def _block(block: object, coll: Collector, where: str, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise Malformed("too_deep", f"{where} is nested more than {MAX_DEPTH} levels", path=where)
    if isinstance(block, str):
        coll.add_content(block)
        return
    if not isinstance(block, Mapping):
        raise Malformed("invalid_block", f"{where} is a {type(block).__name__}, not a block", path=where)
    kind = _type(block)
    if kind == "refusal":
        coll.add_refusal(block.get("refusal"))
    elif kind in _CONTENT_BLOCKS:
        coll.add_content(block.get(_CONTENT_BLOCKS[kind]))
    elif kind in _REASONING_BLOCKS:
        coll.add_reasoning(block.get(_REASONING_BLOCKS[kind]))
    elif kind == "reasoning":
        parts = block.get("content") or block.get("summary")
        if isinstance(parts, list):
            _blocks(parts, coll, f"{where}.content", depth + 1)
    elif kind == "message":
        content = block.get("content")
        if isinstance(content, list):
            _blocks(content, coll, f"{where}.content", depth + 1)
        else:
            coll.add_content(content)
    elif kind in ("tool_use", "function_call", "custom_tool_call"):
        coll.add_call(_item_call(block, kind, where))


def _items(items: object, coll: Collector, path: str, depth: int) -> None:
    if not isinstance(items, list):
        raise Malformed("invalid_output", f"{path} is not a list", path=path)
    coll.spend(1 + len(items), path)
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise Malformed("invalid_item", f"{path}[{i}] is not an object", path=f"{path}[{i}]")
        _block(item, coll, f"{path}[{i}]", depth + 1)
