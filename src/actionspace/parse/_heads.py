"""The heads of calls written without an opening marker: a JSON call object or list, a fenced JSON
block, a pythonic call list.

Such a call is only told from words once enough of it arrived (``{"name":``, ``[f(``): an output
known to be cut off whose visible text is a proper prefix of one (``{"na``, ``[{"name"``,
```` ```json\\n{"na ````, ``[get_weather``) was cut as the model began the call. Judged
conservatively: the head must be consistent with a call the parser reads (a JSON object whose
first key is one that makes it a call, a list of such objects, a JSON fence, ``[identifier(``),
or be a JSON object still open at the cut, whatever its first key: keys come in any order, so
``{"arguments": {"city": "Pa`` may be a call cut inside its arguments.
"""

from __future__ import annotations

import re

from actionspace.parse._scan import loads
from actionspace.parse._structured import looks_like_call

__all__ = ["CALL_KEYS", "JSON_FENCES", "callish_value", "is_call_head"]

CALL_KEYS = ("name", "function", "type", "id", "tool_calls", "role", "choices")
"""First keys that make a JSON object in model text read as a call (or a message of calls)."""
JSON_FENCES = frozenset({"", "json", "tool_call", "tool_calls"})
"""Languages of a ``` fence whose JSON body is read as calls."""

_JSON_HEAD = re.compile(r'\[?\s*(?:\{\s*(?:"([a-z_]*)("\s*)?)?)?')
_FENCE_TICKS = re.compile(r"`{1,3}")
_FENCE_LANG = re.compile(r"```([\w-]*)")
_FENCE_BODY = re.compile(r"```([\w-]*)[^\S\n]*\n(.*)", re.DOTALL)
_PYTHONIC_HEAD = re.compile(r"\[\s*[A-Za-z_][\w.]*")


def callish_value(value: object) -> bool:
    """Whether a decoded JSON value is a call object or a non-empty list of them."""
    if isinstance(value, list):
        return bool(value) and all(looks_like_call(item) for item in value)
    return looks_like_call(value)


def is_call_head(text: str) -> bool:
    """Whether ``text`` (stripped, non-empty) is a proper prefix of a call written without an
    opening marker, short of the point where the parser reads it as one."""
    if not text:
        return False
    if _json_head(text) or _PYTHONIC_HEAD.fullmatch(text) or _FENCE_TICKS.fullmatch(text):
        return True
    lang = _FENCE_LANG.fullmatch(text)
    if lang is not None:
        return any(fence.startswith(lang.group(1).lower()) for fence in JSON_FENCES)
    fenced = _FENCE_BODY.fullmatch(text)
    if fenced is None or fenced.group(1).lower() not in JSON_FENCES:
        return False
    body = fenced.group(2).strip()
    return not body or _json_head(body) or _whole_call_before_close(body)


def _json_head(text: str) -> bool:
    if _open_object(text):
        return True
    head = _JSON_HEAD.fullmatch(text)
    if head is None:
        return False
    key, closed = head.group(1), head.group(2)
    if key is None:
        return True
    return key in CALL_KEYS if closed is not None else any(k.startswith(key) for k in CALL_KEYS)


def _whole_call_before_close(body: str) -> bool:
    """A fence body holding a whole call, then the start of the closing ``` (one or two ticks)."""
    inner = body.rstrip("`")
    if len(body) - len(inner) not in (1, 2) or "`" in inner:
        return False
    try:
        return callish_value(loads(inner))
    except (ValueError, RecursionError):
        return False


_OBJECT_START = re.compile(r"(\[\s*)?\{")
_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*\\?("?)|[{}\[\]]|[^"{}\[\]]+', re.DOTALL)
_BARE = re.compile(r"[,:.+\-eE0-9truefalsn \t\r\n]*")
"""What JSON holds outside strings and brackets: punctuation, numbers, ``true``/``false``/``null``."""
_CLOSERS = {"}": "{", "]": "["}


def _open_object(text: str) -> bool:
    """Whether ``text`` is an unfinished JSON object (or a list opening with one) still open at its
    end: a call cut anywhere inside, whichever key came first (JSON keys come in any order, so
    ``{"arguments": {"city": "Pa`` is a call cut inside its arguments). One pass, no decoding: a
    character JSON cannot hold there, or the value closing before the end, says it is something
    else."""
    if _OBJECT_START.match(text) is None:
        return False
    stack: list[str] = []
    for token in _TOKENS.finditer(text):
        piece = token.group()
        if piece[0] == '"':
            if not token.group(1) or len(piece) == 1:  # a string still open at the end
                return token.end() == len(text)
        elif piece in _CLOSERS:
            if not stack or stack.pop() != _CLOSERS[piece] or not stack:
                return False  # a mismatched bracket, or the whole value closed before the end
        elif piece in "{[":
            stack.append(piece)
        elif _BARE.fullmatch(piece) is None:
            return False
    return bool(stack)
