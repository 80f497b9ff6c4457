"""Mistral calls after ``[TOOL_CALLS]``: a JSON list (v0.3), ``NAME{…}`` (v11+), ``NAME[ARGS]{…}``.

::

    [TOOL_CALLS][{"name": "add", "arguments": {"a": 3.5, "b": 4}}]</s>
    [TOOL_CALLS]get_weather{"city": "Paris"}[TOOL_CALLS]get_time{"tz": "CET"}
    [THINK]…[/THINK][TOOL_CALLS]search[ARGS]{"query": "x"}
    [TOOL_CALLS]get_weather[CALL_ID]a1B2c3D4e[ARGS]{"city": "Bern"}

Calls follow one another, each after its own ``[TOOL_CALLS]`` or, in the named forms, directly
after the previous call's arguments. Text after the last call is content.
"""

from __future__ import annotations

import re

from actionspace.parse._result import Collector, Malformed
from actionspace.parse._scan import decode_json_at, skip_ws
from actionspace.parse._tokens import generic_items
from actionspace.types import ToolCall

__all__ = ["MISTRAL_ARGS", "MISTRAL_CALLS", "MISTRAL_CALL_ID", "parse_mistral"]

MISTRAL_CALLS, MISTRAL_ARGS, MISTRAL_CALL_ID = "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"
_MISTRAL_NAME = re.compile(r"[A-Za-z0-9_.\-]+")
_MISTRAL_NEXT = re.compile(r"[A-Za-z0-9_.\-]+(?:\[CALL_ID\]|\[ARGS\]|\{)")


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
            generic_items(value, pos, MISTRAL_CALLS, coll)
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
