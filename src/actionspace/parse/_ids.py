"""The call ids a provider message proposes, read without parsing its calls.

A message whose calls do not all parse still owes the provider one result per call id it holds
(the next request is refused otherwise): :func:`call_ids` finds those ids in the same shapes
:mod:`actionspace.parse._structured` reads — OpenAI chat ``tool_calls`` entries (``id``), Responses
``function_call`` / ``custom_tool_call`` items (``call_id``, else ``id``), Anthropic ``tool_use``
blocks (``id``), generic ``{"name", "id"}`` calls, a completion's first choice, a Responses
object's ``output``, their JSON text and SDK objects — whatever else the call holds (a missing
name, cut-off arguments, a wrong type). Of a ``ParseResult`` (what a stream's ``finish()`` gives),
the ids it still knows: its calls', the call's at its fault, and those of the calls a cut voided.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from actionspace.parse._events import event_stream
from actionspace.parse._result import ParseResult
from actionspace.parse._structured import classify

__all__ = ["call_ids"]

_MAX_DEPTH = 32


def call_ids(raw: object) -> tuple[str, ...]:
    """The ids of the calls ``raw`` proposes, in its order (an integer id as its digits, as
    ``parse`` reads it); empty for raw text, for anything that holds none, and for an object
    that cannot be read (an SDK object whose ``model_dump`` raises). Never raises."""
    if isinstance(raw, ParseResult):
        return _known(raw)
    found: list[str] = []
    try:
        _walk(raw, found, 0)
    except Exception:  # a foreign object's failure: no id is known rather than some of them
        return ()
    return tuple(found)


def _known(result: ParseResult) -> tuple[str, ...]:
    """The ids of ``result``'s calls, then of the call at its fault (``details["id"]``; one
    repeating an earlier id names that call's), then of the calls a cut voided (``call_ids``)."""
    details = result.error.details if result.error is not None else {}
    found: list[object] = [c.id for c in result.calls]
    if details.get("reason") != "duplicate_call_id":
        found.append(details.get("id"))
    voided = details.get("call_ids")
    found.extend(voided if isinstance(voided, list | tuple) else ())
    return tuple(dict.fromkeys(i for i in found if isinstance(i, str) and i))


def _walk(value: object, found: list[str], depth: int) -> None:
    if depth > _MAX_DEPTH:
        return
    if isinstance(value, str):
        if value.lstrip()[:1] in ("{", "["):
            try:
                value = json.loads(value)
            except ValueError:
                return
            _walk(value, found, depth + 1)
    elif isinstance(value, (list, tuple)):
        stream = event_stream(value)
        if stream is not None:  # a streamed output's events: each call id once
            found.extend(stream.call_ids())
            return
        for item in value:
            _walk(item, found, depth + 1)
    elif isinstance(value, Mapping):
        _mapping(value, found, depth)
    elif callable(getattr(value, "model_dump", None)):
        _walk(value.model_dump(), found, depth + 1)  # type: ignore[attr-defined]


def _mapping(value: Mapping[Any, Any], found: list[str], depth: int) -> None:
    kind = classify(value)
    if kind == "completion":
        choices = value.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
            _walk(choices[0].get("message"), found, depth + 1)
    elif kind == "responses":
        _walk(value.get("output"), found, depth + 1)
    elif kind in ("function_call", "custom_tool_call"):
        _add(value.get("call_id", value.get("id")), found)
    elif kind == "generic":
        _add(value.get("id", value.get("call_id")), found)
    elif kind in ("tool_use", "entry", "custom", "jsonrpc"):
        _add(value.get("id"), found)
    elif kind in ("message", "reasoning", "block"):
        content = value.get("content")
        if isinstance(content, list):
            _walk(content, found, depth + 1)
        entries = value.get("tool_calls")
        if isinstance(entries, list):
            for entry in entries:
                if isinstance(entry, Mapping):
                    _add(entry.get("id"), found)


def _add(ident: object, found: list[str]) -> None:
    if isinstance(ident, str) and ident:
        found.append(ident)
    elif isinstance(ident, int) and not isinstance(ident, bool):
        found.append(str(ident))
