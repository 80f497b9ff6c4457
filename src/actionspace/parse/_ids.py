"""The call ids a provider message proposes, read without parsing its calls.

A message whose calls do not all parse still owes the provider one result per call id it holds (the
next request is refused otherwise): :func:`call_ids` finds those ids in the same shapes
:mod:`actionspace.parse._structured` reads — OpenAI chat ``tool_calls`` entries (``id``), Responses
``function_call`` / ``custom_tool_call`` items (``call_id``, else ``id``), Anthropic ``tool_use``
blocks (``id``), Gemini ``functionCall`` parts (``id``), generic ``{"name", "id"}`` calls, a
completion's first choice, a Responses object's ``output``, their JSON text and SDK objects —
whatever else the call holds (a missing name, cut-off arguments, a wrong type). Raw model text,
alone, as a message's content or streamed, holds the ids its format writes (Kimi K2
``functions.NAME:INDEX``, Mistral ``[CALL_ID]``, a JSON call's ``"id"``), past a fault too. Of a
``ParseResult`` (what a stream's ``finish()`` gives), the ids it still knows: its calls', the call's
at its fault, and those of the calls a cut voided.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping
from typing import Any

from actionspace._encoder import dump_within
from actionspace._placeholders import is_model
from actionspace.parse._events import event_stream
from actionspace.parse._gemini_shapes import field, gemini_parts
from actionspace.parse._result import READ_UNITS, ParseResult, known_ids
from actionspace.parse._structured import classify
from actionspace.parse._text_ids import text_call_ids

__all__ = ["call_ids", "ids_apart"]

_MAX_DEPTH = 32


def call_ids(raw: object) -> tuple[str, ...]:
    """The ids of the calls ``raw`` proposes, in its order (an integer id as its digits, as
    ``parse`` reads it); empty for raw text in a format that writes no ids, for anything that
    holds none, and for an object that cannot be read (an SDK object whose ``model_dump``
    raises). Never raises."""
    if isinstance(raw, ParseResult):
        return known_ids(raw)
    found: list[str] = []
    try:
        _walk(raw, found, 0, [READ_UNITS])
    except Exception:  # a foreign object's failure, or one past the bound: no id is known, not some
        return ()
    return tuple(found)


def ids_apart(parsed: ParseResult, prefix: str, numbers: Iterator[int]) -> ParseResult:
    """``parsed`` with an id for each of its calls that has none (or an empty one), when an id the
    model gave could be one a runtime mints for such a call (``prefix`` followed by ``n`` and the
    next of ``numbers``): each minted id skips every id the message holds, so no two calls of it
    answer under one id and a result never reaches the model under the id of another of its calls.
    An id that is no string (a number, ``true``, an object: a ``ParseResult`` built by hand; every
    provider's call id is a string) is no id: the call is given one as a call without one is, and
    no result is ever answered under it. ``parsed`` itself when every id it holds is a string and
    none starts with ``prefix``, or every call has its own (nothing can collide then)."""
    calls = parsed.calls
    taken = {c.id for c in calls if type(c.id) is str and c.id}
    if len(taken) == len(calls) or (
        all([c.id is None or type(c.id) is str for c in calls])
        and not any(i.startswith(prefix) for i in taken)
    ):
        return parsed
    out = []
    for call in calls:
        if type(call.id) is not str or not call.id:  # none, empty or no string: it is given one
            minted = f"{prefix}n{next(numbers)}"
            while minted in taken:
                minted = f"{prefix}n{next(numbers)}"
            taken.add(minted)
            call = dataclasses.replace(call, id=minted)
        out.append(call)
    return dataclasses.replace(parsed, calls=tuple(out))


def _walk(value: object, found: list[str], depth: int, left: list[int]) -> None:
    """The ids in ``value``; ``left``: the parts it may still read (:data:`READ_UNITS`, what is
    shared counted each time), past which it raises ``ValueError``."""
    if depth > _MAX_DEPTH:
        return
    left[0] -= 1 + (len(value) if isinstance(value, list | tuple | Mapping) else 0)
    left[0] -= len(value) // 16 if isinstance(value, str) else 0
    if left[0] < 0:
        raise ValueError("the output is too large to read")
    if isinstance(value, str):
        try:
            decoded = json.loads(value) if value.lstrip()[:1] in ("{", "[") else None
        except (ValueError, RecursionError):
            decoded = None
        if decoded is None:
            found.extend(text_call_ids(value))
        else:
            _walk(decoded, found, depth + 1, left)
    elif isinstance(value, (list, tuple)):
        stream = event_stream(value)
        if stream is not None:  # a streamed output's events: each call id once
            found.extend(stream.call_ids())
            return
        for item in value:
            _walk(item, found, depth + 1, left)
    elif isinstance(value, Mapping):
        _mapping(value, found, depth, left)
    elif callable(getattr(value, "model_dump", None)):
        if is_model(value) and not dump_within(value, left[0]):
            raise ValueError("the output is too large to read")
        _walk(value.model_dump(), found, depth + 1, left)  # type: ignore[attr-defined]


def _mapping(value: Mapping[Any, Any], found: list[str], depth: int, left: list[int]) -> None:
    kind = classify(value)
    if kind == "completion":
        choices = value.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
            _walk(choices[0].get("message"), found, depth + 1, left)
    elif kind == "responses":
        _walk(value.get("output"), found, depth + 1, left)
    elif kind in ("function_call", "custom_tool_call"):
        _add(value.get("call_id", value.get("id")), found)
    elif kind == "generic":
        _add(value.get("id", value.get("call_id")), found)
    elif kind in ("tool_use", "entry", "custom", "jsonrpc"):
        _add(value.get("id"), found)
    elif kind == "gemini":
        parts = gemini_parts(value)
        left[0] -= len(parts or ())
        for part in parts or ():
            call = field(part, "functionCall", "function_call") if isinstance(part, Mapping) else None
            if isinstance(call, Mapping):
                _add(call.get("id"), found)
    elif kind in ("message", "reasoning", "block"):
        content = value.get("content")
        entries = value.get("tool_calls")
        if isinstance(content, list):
            _walk(content, found, depth + 1, left)
        elif isinstance(content, str) and kind == "message" and not (entries or value.get("function_call")):
            found.extend(text_call_ids(content, strict=False))  # raw model calls in the content
        if isinstance(entries, list):
            for entry in entries:
                if isinstance(entry, Mapping):
                    _add(entry.get("id"), found)


def _add(ident: object, found: list[str]) -> None:
    if isinstance(ident, str) and ident:
        found.append(ident)
    elif isinstance(ident, int) and not isinstance(ident, bool):
        found.append(str(ident))
