"""Text every store can hold, and the text a proposal's arguments may hold.

A Python ``str`` may hold code points UTF-8 cannot encode: unpaired surrogates (U+D800–U+DFFF).
They are common enough in the wild: ``os.fsdecode`` makes them of a file name's undecodable bytes
(``b"caf\\xe9"`` → ``"caf\\udce9"``), and a JSON escape such as ``"\\ud83d"`` without its pair —
half an emoji, which a model cut between two tokens emits — decodes to one. SQLite's driver
refuses to write them; PostgreSQL refuses them and U+0000 too, in ``text`` and in ``jsonb``.

- **Arguments** (:func:`unfit_text`): a proposal whose arguments hold either is refused as
  ``invalid_arguments`` (RFC 7493, I-JSON, §2.1: strings MUST NOT hold surrogates; U+0000 has no
  use in a tool's arguments and no PostgreSQL column holds it). Refused, they never reach a
  tool, a digest or a ledger row.
- **What a store writes** (a tool's result, a model's call id, the user's words, an error naming
  what the model sent): the JSON a store keeps in a UTF-8 text column carries an unpaired
  surrogate as its ``\\uXXXX`` escape (:func:`json_for_utf8`, read back exactly); a plain text
  column, and PostgreSQL's ``jsonb``, which accepts neither, get U+FFFD in its place
  (:func:`text_for_utf8`, :func:`text_for_postgres`, :func:`json_for_postgres`). Never an error,
  never a lost row.

Each check costs one ``str.isascii()`` (a flag read) for ASCII text, plus a search for U+0000
where PostgreSQL is the reader.

:func:`loose_table` is the table of the loose reading that finds a disguised copy of untrusted
text (:func:`actionspace.policy.matching.fold`): invisible characters and accents dropped,
compatibility characters decomposed, lookalike letters of other scripts (Unicode TR39
confusables) read as the letters they imitate.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections import defaultdict
from functools import cache
from importlib import resources
from typing import Any, Final, TypeVar, cast

__all__ = [
    "INVISIBLE",
    "REPLACEMENT",
    "json_for_postgres",
    "json_for_utf8",
    "loose_table",
    "nfc_form",
    "text_for_postgres",
    "text_for_utf8",
    "unfit_text",
    "value_for_utf8",
]

INVISIBLE: Final = re.compile(
    "[\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u115f\u1160\u17b4\u17b5"
    "\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0"
    "\ufff0-\ufffb\U000110bd\U000110cd\U00013430-\U0001345f\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0000-\U000e0fff]"
)
"""Format characters (Unicode category Cf) and default-ignorable code points (fillers, joiners,
variation selectors, tags): text a reader does not see, which can hide words or smuggle bytes."""
REPLACEMENT: Final = "\ufffd"
"""What stands in for a code point a store cannot hold (U+FFFD REPLACEMENT CHARACTER)."""

_T = TypeVar("_T")
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_SURROGATE_OR_NUL: Final = re.compile("[\x00\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def json_for_utf8(text: str) -> str:
    """JSON ``text`` with each surrogate code point written as its escape: UTF-8 encodes the
    result, and ``json.loads`` reads it back as ``json.loads(text)`` — but for a high surrogate
    directly followed by a low one, which JSON (like UTF-16) reads as the one character the two
    encode together.

    JSON text written with ``ensure_ascii=False`` holds a surrogate only inside a string, where
    its ``\\uXXXX`` escape means the same code point.
    """
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub(_escape, text)


def text_for_utf8(text: str) -> str:
    """``text`` with each unpaired surrogate replaced by U+FFFD (a plain text column)."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub(REPLACEMENT, text)


def text_for_postgres(text: str) -> str:
    """``text`` with each unpaired surrogate and each U+0000 replaced by U+FFFD."""
    if text.isascii():
        return text.replace("\x00", REPLACEMENT) if "\x00" in text else text
    return _SURROGATE_OR_NUL.sub(REPLACEMENT, text)


def json_for_postgres(text: str) -> str:
    """JSON ``text`` as ``jsonb`` takes it: strings and keys holding an unpaired surrogate or
    U+0000 (which JSON writes as ``\\u0000``) get U+FFFD in its place; other text unchanged. Two
    keys of one object that become the same (``"\\ud800"`` and ``"\\udfff"``) are both kept, the
    later one with a U+FFFD more for each earlier one it would replace: nothing is dropped."""
    if "\\u0000" not in text and (text.isascii() or _SURROGATE.search(text) is None):
        return text
    # rare: read it back and clean each string (a "\\u0000" may also be an escaped backslash)
    return json.dumps(_clean(json.loads(text)), ensure_ascii=False, allow_nan=False)


def _clean(value: Any) -> Any:
    if type(value) is str:
        return text_for_postgres(value)
    if type(value) is dict:
        out: dict[str, Any] = {}
        for k, v in value.items():
            key = text_for_postgres(k)
            while key in out:  # keys that differ only where jsonb refuses: each kept, told apart
                key += REPLACEMENT
            out[key] = _clean(v)
        return out
    if type(value) is list:
        return [_clean(v) for v in value]
    return value


def value_for_utf8(value: _T) -> _T:
    """``value`` (plain JSON) with each unpaired surrogate in its strings and keys replaced by
    U+FFFD, for an answer UTF-8 must carry whole (an HTTP response)."""
    return cast(_T, _for_utf8(value))


def _for_utf8(value: Any) -> Any:
    if isinstance(value, str):
        return text_for_utf8(value)
    if isinstance(value, dict):
        return {text_for_utf8(k) if isinstance(k, str) else k: _for_utf8(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_for_utf8(v) for v in value]
    return value


def nfc_form(value: _T) -> _T:
    """``value`` (plain JSON) with each string and key in Unicode NFC: ``"cafe\u0301"`` (NFD)
    becomes ``"caf\u00e9"``, the same text canonically (Unicode's canonical equivalence: one
    reading, one rendering; compatibility forms such as ``"\ufb01"`` for ``"fi"`` stay apart).
    ``value`` itself when every string already is NFC (ASCII always is); an object two of whose
    keys would become one stays as it is, so no two different objects read as one."""
    return cast(_T, _nfc(value))


def _nfc(value: Any) -> Any:
    if isinstance(value, str):
        if value.isascii() or unicodedata.is_normalized("NFC", value):
            return value
        return unicodedata.normalize("NFC", value)
    if isinstance(value, dict):
        out = {_nfc(k) if isinstance(k, str) else k: _nfc(v) for k, v in value.items()}
        same = all(k is n and v is m for (k, v), (n, m) in zip(value.items(), out.items(), strict=False))
        return value if same or len(out) != len(value) else out
    if isinstance(value, list | tuple):
        items = [_nfc(v) for v in value]
        if all(a is b for a, b in zip(value, items, strict=True)):
            return value
        return tuple(items) if isinstance(value, tuple) else items
    return value


def _bad(text: str) -> str | None:
    """Why ``text`` may not be in arguments, or None."""
    if text.isascii():
        if "\x00" not in text:
            return None
        return "holds U+0000 (NUL), which no database text holds"
    found = _SURROGATE_OR_NUL.search(text)
    if found is None:
        return None
    point = ord(found.group())
    if point == 0:
        return "holds U+0000 (NUL), which no database text holds"
    return (
        f"holds an unpaired surrogate (U+{point:04X}) at character {found.start()}: not Unicode text "
        "(half of a character cut in two?); send the whole character"
    )


def unfit_text(value: Any, pointer: str = "") -> tuple[str, str] | None:
    """(JSON pointer, reason) of a string or key of ``value`` arguments may not hold (an unpaired
    surrogate, U+0000), else None. Walks mappings, lists and tuples, at any depth, each once."""
    if type(value) is dict:  # the usual arguments: ASCII keys, scalars and ASCII strings
        for key, child in value.items():
            if type(key) is not str or not key.isascii() or "\x00" in key:
                break
            kind = type(child)
            if kind is str:
                if not child.isascii() or "\x00" in child:
                    break
            elif kind is not int and kind is not float and kind is not bool and child is not None:
                break
        else:
            return None
    elif isinstance(value, str):
        reason = _bad(value)
        return None if reason is None else (pointer, reason)
    stack: list[tuple[Any, str]] = [(value, pointer)]
    seen: set[int] = set()
    while stack:
        item, where = stack.pop()
        if isinstance(item, dict):
            pairs: Any = item.items()
        elif isinstance(item, list | tuple):
            pairs = enumerate(item)
        else:
            continue
        for key, child in pairs:
            if isinstance(key, str):
                reason = _bad(key)
                if reason is not None:
                    return (f"{where}/{_escape_pointer(text_for_postgres(key))}", f"the key {reason}")
            if isinstance(child, str):
                reason = _bad(child)
                if reason is not None:
                    return (f"{where}/{_escape_pointer(str(key))}", reason)
            elif isinstance(child, dict | list | tuple) and id(child) not in seen:
                seen.add(id(child))
                stack.append((child, f"{where}/{_escape_pointer(str(key))}"))
    return None


def _escape_pointer(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


# ---------------------------------------------------------------------- the loose reading

_LOOKALIKE_DATA: Final = ("confusable_homoglyphs", "confusables.json")
"""Unicode's TR39 confusables (``confusables.txt``), as the ``confusable-homoglyphs`` package ships
them: each character → the characters it is confusable with, in both directions."""
_BIDI_MARK: Final = re.compile("[\u200e\u200f]")
"""What the data wraps right-to-left text in (it quotes ``confusables.txt``'s comments)."""
_PLANES: Final = (range(0x20000), range(0x2F800, 0x2FA20), range(0xE0000, 0xE1000))
"""Where the characters the loose reading changes are: the BMP, the SMP, the CJK compatibility
ideographs supplement and the tags."""
_KEPT: Final = 0x800
"""Characters below this (Latin, Greek, Cyrillic, Armenian, Hebrew, Arabic...) are in the table
even when kept as they are: a lookup that finds its key is faster than one that misses."""
_DEPTH: Final = 8
"""How deep a character's reading may recurse (a lookalike of a letter that decomposes...): a
bound the data never reaches."""


@cache
def loose_table() -> dict[int, str | int | None]:
    """The :meth:`str.translate` table of the loose reading (then NFC): each character it changes
    → what it reads as, or None to delete it (and each one below U+0800 it keeps → itself).

    A character reads as: nothing when it is invisible (:data:`INVISIBLE`) or a combining mark
    (categories Mn and Me: ``"a\u0301"`` → ``"a"``); else the reading of its canonical
    decomposition (NFD: ``"\u00e9"`` → ``"e"``); else, when its NFKD is ASCII, the reading of that
    (fullwidth and mathematical letters, ligatures: ``"\uff0d"`` → ``"-"``); else, for a
    non-ASCII lookalike of the TR39 confusables, the reading of the text it imitates (Cyrillic
    ``"\u0430"``, Greek ``"\u0391"``, Cherokee ``"\u13aa"`` → ``"a"``; the lunate sigma
    ``"\u03f2"``, whose NFKD is a final sigma, → ``"c"``); else the reading of its NFKD, else of
    its case fold. ASCII characters are only lower-cased: ``"l"``, ``"I"`` and ``"1"``, ``"0"`` and
    ``"O"``, ``"m"`` and ``"rn"`` stay apart (TR39 reads each group as one), so two distinct
    ASCII texts never fold alike; a lookalike of such a group reads as the member it resembles (a
    digit as the digit, a capital as ``"i"``). Built on first use (a few tenths of a second), then
    shared; without the ``confusable-homoglyphs`` data it raises :class:`ModuleNotFoundError`.
    """
    imitates = _lookalikes()
    table: dict[int, str | int | None] = {}
    for plane in _PLANES:
        for point in plane:
            c = chr(point)
            read = _read(c, imitates, _DEPTH)
            if read != c:
                table[point] = read or None
            elif point < _KEPT:
                table[point] = point  # found, not missed: a miss costs translate() an exception
    return table


def _read(c: str, imitates: dict[str, str], depth: int) -> str:
    """What the single character ``c`` reads as (see :func:`loose_table`), in NFC."""
    if INVISIBLE.match(c) or unicodedata.category(c) in ("Mn", "Me"):
        return ""
    text = unicodedata.normalize("NFD", c)  # as TR39 does: "\u00f6" is "o" and a mark
    if text == c:
        text = unicodedata.normalize("NFKD", c)
        if not text.isascii():  # "\uff0d" is "-", the lunate sigma "\u03f2" (NFKD "\u03c2") is "c"
            text = imitates.get(c, text)
    if text == c:
        text = c.casefold()
    if text == c or depth == 0:
        return c
    return unicodedata.normalize("NFC", "".join(_read(x, imitates, depth - 1) for x in text))


def _lookalikes() -> dict[str, str]:
    """Each non-ASCII character of the confusables → the character(s) it imitates (unfolded)."""
    raw = json.loads(resources.files(_LOOKALIKE_DATA[0]).joinpath(_LOOKALIKE_DATA[1]).read_text("utf-8"))
    near: defaultdict[str, set[str]] = defaultdict(set)
    for key, entries in raw.items():
        a = _BIDI_MARK.sub("", key)
        for entry in entries:
            b = _BIDI_MARK.sub("", entry["c"])
            if a and b and a != b:
                near[a].add(b)
                near[b].add(a)
    out: dict[str, str] = {}
    seen: set[str] = set()
    for start in sorted(near):
        if start in seen:
            continue
        group = _group(start, near)
        seen |= group
        # TR39 maps every member to one prototype: the member all the others are confusable with
        prototype = max(sorted(group), key=lambda member: len(near[member]))
        for c in group:
            if len(c) == 1 and not c.isascii() and c != prototype:
                out[c] = _imitated(c, group, prototype)
    return out


def _group(start: str, near: dict[str, set[str]]) -> set[str]:
    group = {start}
    todo = [start]
    while todo:
        for other in near[todo.pop()]:
            if other not in group:
                group.add(other)
                todo.append(other)
    return group


def _imitated(c: str, group: set[str], prototype: str) -> str:
    """What ``c`` stands for: the group's prototype, or for a group holding ASCII characters the
    ASCII character ``c`` resembles (a digit for a digit, a capital for a capital)."""
    ascii_chars = sorted(m for m in group if len(m) == 1 and m.isascii())
    if not ascii_chars:
        return prototype
    value = unicodedata.numeric(c, None)
    if value is not None and value == int(value) and str(int(value)) in ascii_chars:
        return str(int(value))
    capitals = [m for m in ascii_chars if m.isupper()]
    if c.isupper() and capitals:
        return capitals[0]
    return prototype if prototype in ascii_chars else ascii_chars[0]
