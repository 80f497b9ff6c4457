"""Small scanning helpers shared by the text formats: whitespace, bounded JSON decoding, snippets."""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Iterator
from typing import Any

from actionspace.parse._result import Malformed

__all__ = [
    "DECODER",
    "TOOL_NAME",
    "DuplicateKey",
    "Finder",
    "NonFinite",
    "decode_arguments",
    "decode_json_at",
    "expect_end",
    "iter_json_values",
    "loads",
    "skip_ws",
    "snippet",
    "unreadable",
]


class NonFinite(ValueError):
    """A number in JSON text that is not finite: ``NaN``, ``Infinity``, or a literal such as
    ``1e999`` that overflows to infinity. JSON has no such numbers and a call never carries one."""


class DuplicateKey(ValueError):
    """An object in JSON text that gives one key twice. Readers disagree on which value counts
    (Python's keeps the last, others the first), so a call never carries one."""


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise DuplicateKey(f"the key {twice[:40]!r} is given twice")
    return value


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise NonFinite(f"{text[:40]} is not a finite number")
    return value


def _constant(text: str) -> float:
    raise NonFinite(f"{text} is not a finite number")


DECODER = json.JSONDecoder(parse_float=_finite, parse_constant=_constant, object_pairs_hook=_object)
"""JSON as every format's parser reads it: a non-finite number raises :class:`NonFinite`, a key
given twice in one object :class:`DuplicateKey`."""


def loads(text: str) -> Any:
    """``json.loads(text)`` by :data:`DECODER`: raises ``JSONDecodeError``, :class:`NonFinite`,
    :class:`DuplicateKey` (all ``ValueError``) or ``RecursionError``."""
    return DECODER.decode(text)


TOOL_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:@/\-]*")
"""What a function name written in model text may look like; anything else is not a call."""
_WS = " \t\r\n"


def skip_ws(text: str, pos: int, end: int | None = None) -> int:
    """The first offset at or after ``pos`` (and before ``end``) that is not whitespace."""
    stop = len(text) if end is None else end
    while pos < stop and text[pos] in _WS:
        pos += 1
    return pos


class Finder:
    """``str.find`` for offsets that only move forward: each marker's text is scanned at most once.

    A parser that looks for several markers from an advancing position would otherwise rescan the
    rest of the text for every marker that is absent, which is quadratic on adversarial input.
    """

    __slots__ = ("_found", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self._found: dict[str, tuple[int, int]] = {}

    def find(self, marker: str, pos: int, end: int | None = None) -> int:
        """The first offset of ``marker`` at or after ``pos`` (starting before ``end``), else -1."""
        cached = self._found.get(marker)
        if cached is not None and cached[0] <= pos and (cached[1] < 0 or cached[1] >= pos):
            found = cached[1]
        else:
            found = self.text.find(marker, pos)
            self._found[marker] = (pos, found)
        if found < 0 or (end is not None and found + len(marker) > end):
            return -1
        return found


def snippet(text: str, pos: int, width: int = 24) -> str:
    """A short excerpt of ``text`` from ``pos``, for error messages."""
    piece = text[pos : pos + width]
    return piece + ("…" if len(text) > pos + width else "")


# What JSON text that stops inside a token leaves where the decoder failed: the head of a literal
# or a number's sign (``tru``, ``-``), of a number's fraction or exponent after its digits (``1.``,
# ``1e+``: the decoder stops there), of an escape (``\u00``, a high surrogate without its low half).
_CUT_VALUE = re.compile(r"t(?:r(?:u)?)?|f(?:a(?:l(?:s)?)?)?|n(?:u(?:l)?)?|-")
_CUT_NUMBER = re.compile(r"(?<=[0-9])(?:\.|[eE][+-]?)")
_CUT_ESCAPE = re.compile(r"u[0-9a-fA-F]{0,4}(?:\\(?:u[0-9a-fA-F]{0,3})?)?")


def _cut_token(exc: json.JSONDecodeError, body: str) -> bool:
    """Whether ``body`` ends inside the token at which the decoder failed."""
    if exc.msg.startswith("Expecting value"):
        return _CUT_VALUE.fullmatch(body, exc.pos) is not None
    if exc.msg.startswith("Invalid \\uXXXX"):
        return _CUT_ESCAPE.fullmatch(body, exc.pos) is not None
    return exc.msg.startswith("Expecting") and _CUT_NUMBER.fullmatch(body, exc.pos) is not None


def _json_fault(exc: json.JSONDecodeError, body: str, base: int, what: str) -> Malformed:
    truncated = (
        skip_ws(body, exc.pos) >= len(body)
        or exc.msg.startswith("Unterminated string")
        or _cut_token(exc, body)
    )
    reason = "truncated" if truncated else "invalid_json"
    detail = "is cut off before it is complete" if truncated else "is not valid JSON"
    return Malformed(reason, f"{what} {detail} ({exc.msg})", pos=base + exc.pos)


def decode_json_at(
    text: str, pos: int, end: int | None = None, *, what: str = "JSON body"
) -> tuple[Any, int]:
    """Decode one JSON value starting at ``pos`` (after whitespace), never reading past ``end``.

    Returns the value and the offset just after it. Raises :class:`Malformed` with the offset of
    the fault (reason ``truncated`` when the text stops inside the value).
    """
    stop = len(text) if end is None else end
    start = skip_ws(text, pos, stop)
    if start >= stop:
        raise Malformed("truncated", f"{what} is missing", pos=start)
    # Decode in place when the value may run to the end of the text: slicing the rest of a long
    # text for each of many values would be quadratic.
    body, base = (text, 0) if stop == len(text) else (text[start:stop], start)
    try:
        value, after = DECODER.raw_decode(body, start - base)
    except json.JSONDecodeError as exc:
        raise _json_fault(exc, body, base, what) from None
    except NonFinite as exc:
        raise Malformed(
            "invalid_number", f"{what} holds a number that is not finite ({exc})", pos=start
        ) from None
    except DuplicateKey as exc:
        raise Malformed("duplicate_key", f"{what}: {exc}", pos=start) from None
    except (ValueError, RecursionError) as exc:
        raise unreadable(exc, what).at(start) from None
    return value, base + after


def unreadable(exc: ValueError | RecursionError, what: str) -> Malformed:
    """The fault of JSON text the decoder gave up on past its own limits, worded for the model that
    wrote it: nesting past the recursion limit (``too_deep``), an integer of more digits than Python
    converts (``invalid_number``); the interpreter's words name nothing the model can change."""
    if isinstance(exc, RecursionError):
        return Malformed("too_deep", f"{what} is nested too deeply")
    if "integer string conversion" in str(exc):
        limit = sys.get_int_max_str_digits()
        return Malformed("invalid_number", f"{what} holds an integer of more than {limit} digits")
    return Malformed("invalid_json", f"{what} is not valid JSON ({type(exc).__name__})")


def expect_end(text: str, pos: int, end: int, what: str) -> None:
    """Raise unless only whitespace lies between ``pos`` and ``end``."""
    rest = skip_ws(text, pos, end)
    if rest < end:
        raise Malformed("unexpected_text", f"unexpected text {snippet(text, rest)!r} after {what}", pos=rest)


def decode_arguments(raw: object, *, path: str) -> Any:
    """Arguments as the format gave them: a JSON string is decoded, anything else is kept as-is.

    A missing value or a blank string means no arguments (``{}``). A string that is not valid JSON
    raises :class:`Malformed` positioned inside that string; one holding a non-finite number
    (``NaN``, ``Infinity``, ``1e999``) raises it with reason ``invalid_number``.
    """
    if raw is None:
        return {}
    if not isinstance(raw, str):
        return raw
    if not raw.strip():
        return {}
    try:
        return loads(raw)
    except json.JSONDecodeError as exc:
        fault = _json_fault(exc, raw, 0, f"arguments at {path}")
        fault.source = raw
        fault.details["path"] = path
        raise fault from None
    except NonFinite as exc:
        raise Malformed(
            "invalid_number", f"arguments at {path} hold a number that is not finite ({exc})", path=path
        ) from None
    except DuplicateKey as exc:
        raise Malformed("duplicate_key", f"arguments at {path}: {exc}", path=path) from None
    except (ValueError, RecursionError) as exc:
        fault = unreadable(exc, f"arguments at {path}")
        fault.details["path"] = path
        raise fault from None


def iter_json_values(text: str, pos: int, end: int | None = None) -> Iterator[tuple[Any, int, int]]:
    """Consecutive JSON values from ``pos``, separated by whitespace or ``;`` (Llama 3.x style).

    Yields each value with its start offset and the offset where the sequence stops if it ends
    there (the start of any trailing text). A broken value raises :class:`Malformed` when reached,
    so the values before it have already been yielded.
    """
    stop = len(text) if end is None else end
    start = skip_ws(text, pos, stop)
    while True:
        value, after = decode_json_at(text, start, stop, what="JSON value")
        nxt = skip_ws(text, after, stop)
        if nxt < stop and text[nxt] == ";":
            following = skip_ws(text, nxt + 1, stop)
            yield value, start, following
            if following >= stop:
                return
            start = following
            continue
        yield value, start, nxt
        if nxt < stop and text[nxt] == "{":
            start = nxt
            continue
        return
