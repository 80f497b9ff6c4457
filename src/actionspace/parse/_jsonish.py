"""One scanner for JSON-ish argument values: unquoted keys, delimited strings, bare words.

Gemma 4 (string delimiter ``<|"|>``) and FunctionGemma (``<escape>``) write arguments this way::

    object := "{" [member ("," member)*] "}"
    member := key ":" value
    key    := STRING | bare text without : , { } [ ] <   (may hold spaces; trimmed)
    value  := STRING | object | array | true | false | null | number | bare word
    array  := "[" [value ("," value)*] "]"
    STRING := D any text up to the next D  |  a JSON "…" string        (D = the delimiter)
    number := -?digits[.digits][(e|E)[+|-]digits]                      (1e+21, -2.5, 108.)

A delimited string is taken verbatim: it may hold ``,``, ``}``, ``<tool_call>`` or a newline.
Faults raise :class:`Malformed` with reason ``truncated`` when the text stops inside a value.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from actionspace.parse._result import Malformed
from actionspace.parse._scan import skip_ws, snippet

__all__ = ["JsonishScanner"]

_MAX_NESTING = 64
_BARE_VALUE = re.compile(r"[^,}\]<]*")
_BARE_KEY = re.compile(r"[^:,{}\[\]<\"]*")
_INTEGER = re.compile(r"-?(?:0|[1-9]\d*)")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d*)?(?:[eE][+-]?\d+)?")
_BARE_WORDS: dict[str, Any] = {"true": True, "false": False, "null": None}
_JSON_STRING = json.JSONDecoder()


def _number(token: str, pos: int) -> int | float:
    try:
        number: int | float = int(token) if _INTEGER.fullmatch(token) else float(token)
    except ValueError:  # more digits than int() accepts
        raise Malformed("invalid_number", f"number {snippet(token, 0)!r} is too long", pos=pos) from None
    if not math.isfinite(number):
        raise Malformed("invalid_number", f"number {snippet(token, 0)!r} has no finite value", pos=pos)
    return number


class JsonishScanner:
    """Reads JSON-ish values out of ``text``; ``delimiter`` opens and closes a verbatim string."""

    __slots__ = ("delimiter", "text")

    def __init__(self, text: str, delimiter: str) -> None:
        self.text = text
        self.delimiter = delimiter

    def object_at(self, pos: int, depth: int = 0) -> tuple[dict[str, Any], int]:
        """The object whose ``{`` is at ``pos``, and the offset just after its ``}``."""
        text = self.text
        result: dict[str, Any] = {}
        pos = skip_ws(text, pos + 1)
        if text.startswith("}", pos):
            return result, pos + 1
        while True:
            key, pos = self._key(pos)
            if not text.startswith(":", pos):
                reason = "truncated" if pos >= len(text) else "missing_key"
                raise Malformed(reason, "expected 'key:' inside the arguments", pos=pos)
            if key in result:
                raise Malformed("duplicate_key", f"argument {key!r} is given twice", pos=pos)
            result[key], pos = self.value_at(pos + 1, depth)
            pos = self._separator(pos, "}")
            if text.startswith("}", pos):
                return result, pos + 1
            pos += 1

    def value_at(self, pos: int, depth: int = 0) -> tuple[Any, int]:
        """The value starting at ``pos`` (after whitespace), and the offset just after it."""
        text = self.text
        pos = skip_ws(text, pos)
        if depth > _MAX_NESTING:
            raise Malformed("too_deep", "arguments are nested too deeply", pos=pos)
        if text.startswith(self.delimiter, pos):
            return self._delimited(pos)
        if text.startswith('"', pos):
            return self._json_string(pos)
        if text.startswith("{", pos):
            return self.object_at(pos, depth + 1)
        if text.startswith("[", pos):
            return self._array(pos, depth + 1)
        match = _BARE_VALUE.match(text, pos)
        end = match.end() if match else pos
        token = text[pos:end].strip()
        if not token:
            reason = "truncated" if end >= len(text) else "missing_value"
            raise Malformed(reason, "expected a value", pos=pos)
        if token in _BARE_WORDS:
            return _BARE_WORDS[token], end
        if _NUMBER.fullmatch(token):
            return _number(token, pos), end
        return token, end

    def _key(self, pos: int) -> tuple[str, int]:
        text = self.text
        pos = skip_ws(text, pos)
        if text.startswith(self.delimiter, pos):
            key, pos = self._delimited(pos)
        elif text.startswith('"', pos):
            key, pos = self._json_string(pos)
        else:
            match = _BARE_KEY.match(text, pos)
            end = match.end() if match else pos
            key, pos = text[pos:end].strip(), end
        pos = skip_ws(text, pos)
        if not key:
            reason = "truncated" if pos >= len(text) else "missing_key"
            raise Malformed(reason, "expected 'key:' inside the arguments", pos=pos)
        return key, pos

    def _delimited(self, pos: int) -> tuple[str, int]:
        start = pos + len(self.delimiter)
        close = self.text.find(self.delimiter, start)
        if close < 0:
            raise Malformed("truncated", f"string opened with {self.delimiter} is never closed", pos=pos)
        return self.text[start:close], close + len(self.delimiter)

    def _json_string(self, pos: int) -> tuple[str, int]:
        try:
            value, end = _JSON_STRING.raw_decode(self.text, pos)
        except json.JSONDecodeError as exc:
            raise Malformed("truncated", f"quoted string is not closed ({exc.msg})", pos=pos) from None
        return str(value), end

    def _array(self, pos: int, depth: int) -> tuple[list[Any], int]:
        text = self.text
        items: list[Any] = []
        pos = skip_ws(text, pos + 1)
        if text.startswith("]", pos):
            return items, pos + 1
        while True:
            item, pos = self.value_at(pos, depth)
            items.append(item)
            pos = self._separator(pos, "]")
            if text.startswith("]", pos):
                return items, pos + 1
            pos += 1

    def _separator(self, pos: int, closer: str) -> int:
        text = self.text
        pos = skip_ws(text, pos)
        if pos >= len(text):
            raise Malformed("truncated", f"arguments end before '{closer}'", pos=pos)
        if text[pos] not in ("," + closer):
            raise Malformed(
                "unexpected_text", f"expected ',' or '{closer}', found {snippet(text, pos)!r}", pos=pos
            )
        return pos
