"""The ids JSON calls written in model text carry, read however the text fails to parse.

A JSON call in raw text (a Hermes ``<tool_call>`` body, Llama ``<|python_tag|>`` JSON, bare JSON
objects or lists, fenced JSON, a Mistral ``[TOOL_CALLS][…]`` list, a Jamba or MiniMax-M1
``<tool_calls>`` block, a Granite or Phi-4-mini list, an InternLM2 action) may hold an ``"id"`` (or a
``"call_id"``); a provider that read the text holds one call per id and wants each answered, even
when the text as a whole does not parse. Each call object is read member by member up to its first
fault, so a broken call still names the id it wrote before the break; only a call object's own
top-level member counts (an ``"id"`` inside its arguments names no call). Where a marker starts
each call (``<tool_call>``, a fence, ``[TOOL_CALLS]``, ``<tool_calls>``, ``<|tool_call|>``,
``functools``, ``<|action_start|><|plugin|>``), the calls after a fault are read too; a
run of bare JSON values stops at its first fault, where the next call cannot be told to begin.
Every region is scanned once, so the time stays linear however hostile the text.
"""

from __future__ import annotations

import json
import re

from actionspace.parse._heads import JSON_FENCES
from actionspace.parse._json_marked import (
    GRANITE_CALL,
    INTERNLM_ACTION,
    PHI4_CALLS,
    TOOL_CALLS_CLOSE,
    TOOL_CALLS_OPEN,
)
from actionspace.parse._llama import PYTHON_TAG
from actionspace.parse._mistral import MISTRAL_CALLS
from actionspace.parse._scan import skip_ws
from actionspace.parse._tagged import TOOL_CALL_OPEN

__all__ = ["json_call_ids"]

_DECODER = json.JSONDecoder()
_ID_KEYS = ("id", "call_id")
_FENCE = "```"
# The markers that start each JSON call (or list of calls) of a format, where its ids are read again
# past a fault. Granite 3.1 writes its list after a Hermes tag; Phi-4-mini's list is ``functools[``.
_STARTS = {
    "hermes": (TOOL_CALL_OPEN,),
    "qwen3_xml": (TOOL_CALL_OPEN,),
    "glm45": (TOOL_CALL_OPEN,),
    "mistral": (MISTRAL_CALLS,),
    "jamba": (TOOL_CALLS_OPEN,),
    "granite": (GRANITE_CALL, TOOL_CALL_OPEN),
    "internlm": (INTERNLM_ACTION,),
    "phi4_mini": (PHI4_CALLS[:-1],),
}


def json_call_ids(text: str, fmt: str) -> list[str]:
    """The ids the JSON calls of ``text`` (visible model text whose format is ``fmt``) carry, in
    its order; empty for a format whose calls are not JSON objects."""
    if fmt == "minimax":
        return _blocks_of_lines(text)
    if fmt in _STARTS:  # hermes, qwen3_xml and glm45 share one <tool_call> tag for their bodies
        return _after_each(text, _STARTS[fmt])
    if fmt == "llama3":
        tag = text.find(PYTHON_TAG)
        return _values(text, tag + len(PYTHON_TAG), len(text)) if tag >= 0 else []
    if fmt in ("json", "llama3_json"):
        return _values(text, 0, len(text))
    if fmt == "fenced_json":
        return _fences(text)
    return []


def _after_each(text: str, markers: tuple[str, ...]) -> list[str]:
    """The ids of the calls after each of ``markers``, each region read up to the next marker."""
    found: list[str] = []
    starts = [(m.start(), m.end()) for m in re.finditer("|".join(map(re.escape, markers)), text)]
    for i, (_, body) in enumerate(starts):
        found.extend(_values(text, body, starts[i + 1][0] if i + 1 < len(starts) else len(text)))
    return found


def _fences(text: str) -> list[str]:
    found: list[str] = []
    pos = text.find(_FENCE)
    while pos >= 0:
        line_end = text.find("\n", pos + len(_FENCE))
        if line_end < 0:
            break
        close = text.find(_FENCE, line_end)
        end = len(text) if close < 0 else close
        if text[pos + len(_FENCE) : line_end].strip().lower() in JSON_FENCES:
            found.extend(_values(text, line_end + 1, end))
        pos = -1 if close < 0 else text.find(_FENCE, close + len(_FENCE))
    return found


def _values(text: str, pos: int, end: int) -> list[str]:
    """The ids of the call objects (alone, or in lists) from ``pos`` on, up to ``end``: ``;``,
    ``,`` or whitespace between them, until one breaks or something else begins."""
    return _read(text[pos:end])[0]  # each region copied once: no decoding runs past it


def _read(region: str) -> tuple[list[str], int]:
    """The ids of the call objects at the start of ``region`` and the offset where they stop."""
    found: list[str] = []
    pos = skip_ws(region, 0)
    while pos < len(region):
        char = region[pos]
        if char == "{":
            ident, after = _object(region, pos)
            found.extend(ident)
        elif char == "[":
            after = _list(region, pos, found)
        else:
            break
        if after is None:
            break
        pos = skip_ws(region, after)
        while pos < len(region) and region[pos] in ";,":
            pos = skip_ws(region, pos + 1)
    return found, pos


def _blocks_of_lines(text: str) -> list[str]:
    """The ids of a MiniMax-M1 output: one call a line in each ``<tool_calls>`` block, so a call
    that breaks hides none of the lines after it (each read on its own, each line copied once)."""
    found: list[str] = []
    start = text.find(TOOL_CALLS_OPEN)
    while start >= 0:
        body = start + len(TOOL_CALLS_OPEN)
        start = text.find(TOOL_CALLS_OPEN, body)
        close = text.find(TOOL_CALLS_CLOSE, body, len(text) if start < 0 else start)
        region = text[body : (len(text) if start < 0 else start) if close < 0 else close]
        ids, stop = _read(region)
        found.extend(ids)
        if stop < len(region):  # read on past the broken call, a line at a time
            for line in region[stop:].split("\n")[1:]:
                found.extend(_read(line)[0])
    return found


def _list(text: str, pos: int, found: list[str]) -> int | None:
    pos = skip_ws(text, pos + 1)
    if text.startswith("]", pos):
        return pos + 1
    while text.startswith("{", pos):
        ident, after = _object(text, pos)
        found.extend(ident)
        if after is None:
            return None
        pos = skip_ws(text, after)
        if text.startswith("]", pos):
            return pos + 1
        if not text.startswith(",", pos):
            return None
        pos = skip_ws(text, pos + 1)
    return None


def _object(text: str, pos: int) -> tuple[list[str], int | None]:
    """The id of the JSON object at ``pos`` (``"id"``, else ``"call_id"``, as a call reads it) as
    far as its members are whole, and the offset past it (None when it breaks)."""
    members: dict[str, object] = {}
    end: int | None = None
    pos = skip_ws(text, pos + 1)
    if text.startswith("}", pos):
        end = pos + 1
    while end is None and text.startswith('"', pos):
        try:
            key, pos = _DECODER.raw_decode(text, pos)
            pos = skip_ws(text, pos)
            if not text.startswith(":", pos):
                break
            value, pos = _DECODER.raw_decode(text, skip_ws(text, pos + 1))
        except (ValueError, RecursionError):
            break
        if key in _ID_KEYS:
            members[key] = value
        pos = skip_ws(text, pos)
        if text.startswith("}", pos):
            end = pos + 1
        elif text.startswith(",", pos):
            pos = skip_ws(text, pos + 1)
        else:
            break
    ident = members.get("id", members.get("call_id"))
    if isinstance(ident, int) and not isinstance(ident, bool):
        ident = str(ident)
    return ([ident] if isinstance(ident, str) and ident else []), end
