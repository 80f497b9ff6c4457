"""Finding a value in a text by meaning: the matching value-level provenance rests on.

Texts and values are normalised (:func:`norm`: lower-cased, whitespace collapsed); a string
matches as a whole token, numbers as numbers (``"$1,000.00"`` is ``1000``), dates and times by the
day and the clock they name, whatever their format. :func:`prepare` reads a text once (its
numbers, dates, times and the spans a date or a time covers); :func:`matches` then finds a value
in it. :mod:`actionspace.policy.provenance` judges the values of a call with these.

Two normalisations, one per direction of trust. :func:`norm` is the strict one, used wherever a
match *vouches* for a value (the user typed it, a trusted result or a system field holds it): it
lower-cases and collapses whitespace, and maps no character into another letter (``str.lower``
maps into ASCII only what Unicode calls canonically equivalent, such as the Kelvin sign; the
``casefold`` it replaced also turned ``"\ufb01"`` into ``"fi"`` and ``"\u017f"`` into ``"s"``).
:func:`fold` is the loose one, used where a match *taints* a value (an untrusted source holds
it): it drops invisible format characters (zero-width spaces and joiners, soft hyphens, bidi
controls, variation selectors) and combining marks (accents), reads compatibility characters by
their decomposition (fullwidth and mathematical letters, ligatures) and lookalike letters of other
scripts as the letters they imitate (Unicode TR39 confusables: Cyrillic ``"\u0430"`` is ``"a"``),
and case-folds, so that a disguised copy of an untrusted value is still found. It never maps an
ASCII character to another one, so distinct ASCII texts stay distinct. Pass ``loose=True`` to
:func:`prepare`, :func:`matches` and :func:`probe` for the loose reading.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence, Set
from dataclasses import dataclass
from datetime import date
from functools import lru_cache
from typing import Any

from actionspace._unicode import loose_table

__all__ = [
    "ENTITY",
    "Number",
    "Probe",
    "Text",
    "fold",
    "inside",
    "matches",
    "may_match",
    "norm",
    "number",
    "numeral",
    "prepare",
    "probe",
    "token_in",
]


_WS = re.compile(r"\s+")
_NUMERAL = re.compile(r"(?<![\w.])-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|(?<![\w.])-?\d+(?:\.\d+)?")
_CURRENCY = r"(?:[$€£¥]|usd|eur|gbp|chf)?"
_MONEY = re.compile(rf"^\s*{_CURRENCY}\s*(-?[\d,]*\d(?:\.\d+)?)\s*{_CURRENCY}\s*$")
_MONTHS = {
    m: i + 1
    for i, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ]
    )
    for m in names
}
_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
_ISO_DATE = re.compile(r"(?<!\d)(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})(?!\d)")
_MDY = re.compile(rf"\b({_MONTH})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b")
_DMY = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH})\.?,?\s+(\d{{4}})\b")
ENTITY = re.compile(
    r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"  # e-mail address
    r"|(?:https?://|www\.)[^\s<>\"')\]]+"  # URL
    r"|\b[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*"  # a bare domain name ...
    r"\.(?:com|org|net|io|info|biz|co|de|uk|ch)(?:/[^\s<>\"')\]]*)?"  # ... with a known ending
    r"|\b[A-Z]{2}\d{2}[A-Z0-9]{10,30}\b"  # IBAN-like account number
)
_TIME = re.compile(r"^(\d{1,2}):(\d{2})(?::\d{2})?$")
_DATE_SPAN = re.compile(
    rf"(?<!\d)\d{{4}}[-/.]\d{{1,2}}[-/.]\d{{1,2}}(?!\d)"
    rf"|\b(?:{_MONTH})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b(?:,?\s+\d{{4}}\b)?"
    rf"|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{_MONTH})\b(?:\.?,?\s+\d{{4}}\b)?"
    rf"|(?<!\d)\d{{1,2}}:\d{{2}}(?::\d{{2}})?(?!\d)"
)
_DATETIME = re.compile(r"^(\d{4}-\d{1,2}-\d{1,2})[ T](\d{1,2}:\d{2})(?::\d{2})?$")


def norm(text: str) -> str:
    """Lower-cased, with runs of whitespace collapsed to one space and the ends stripped: the
    strict reading, for matches that vouch for a value (see the module doc)."""
    return _WS.sub(" ", text.lower()).strip()


def fold(text: str) -> str:
    """:func:`norm` after dropping invisible characters and combining marks, reading lookalikes of
    other scripts as the letters they imitate, NFKD and case folding: the loose reading, for
    matches that taint a value (``"\uff45vil"``, ``"ev\u200bil"``, ``"\u00e9vil"`` and Cyrillic
    ``"\u0435vil"`` fold to ``"evil"``; see :func:`actionspace._unicode.loose_table`). ASCII text
    folds to its :func:`norm`; the result is in NFC, linear in the text's length."""
    if text.isascii():
        return norm(text)
    return _WS.sub(" ", unicodedata.normalize("NFC", text.translate(loose_table()))).strip()


Number = int | float
"""A number as :func:`number` reads it: an integer exactly (``int``), anything else as a finite
float; ``1000 == 1000.0`` and the two hash alike, ``2**64 + 1`` is not ``2**64``."""

_MAX_NUMERAL = 64
"""A longer numeral names no number (its text still matches as a token)."""


def number(value: Any) -> Number | None:
    """The number a value stands for (``"$1,000.00"`` → 1000), or None: integers exactly, so that
    two long account numbers one digit apart are two numbers (a float would make them one)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        m = _MONEY.match(value.lower())
        if m is not None:
            return numeral(m.group(1).replace(",", ""))
    return None


def numeral(text: str) -> Number | None:
    """The number of a plain numeral (``-12``, ``3.50``): an int when it has no fraction (``3.00``
    is 3), else a finite float; None when it is longer than :data:`_MAX_NUMERAL` characters."""
    if len(text) > _MAX_NUMERAL:
        return None
    whole, _, fraction = text.partition(".")
    try:
        if not fraction.strip("0"):
            return int(whole)
        amount = float(text)
    except ValueError:
        return None
    return amount if math.isfinite(amount) else None


def _iso(y: str, m: int, d: str) -> str | None:
    try:
        return date(int(y), m, int(d)).isoformat()
    except ValueError:
        return None


def _dates(text: str) -> set[str]:
    """Every date a (normalised) text names, as ISO ``YYYY-MM-DD``."""
    found: set[str | None] = set()
    for y, m, d in _ISO_DATE.findall(text):
        found.add(_iso(y, int(m), d))
    for mon, d, y in _MDY.findall(text):
        found.add(_iso(y, _MONTHS[mon], d))
    for d, mon, y in _DMY.findall(text):
        found.add(_iso(y, _MONTHS[mon], d))
    found.discard(None)
    return {f for f in found if f is not None}


def _times(text: str) -> set[str]:
    return {f"{int(h):02d}:{mi}" for h, mi in re.findall(r"(?<!\d)(\d{1,2}):(\d{2})(?!\d)", text)}


@dataclass(frozen=True, slots=True)
class Text:
    """A normalised text of the evidence, with what it names pre-extracted."""

    text: str
    numbers: frozenset[Number]
    dates: frozenset[str]
    times: frozenset[str]
    spans: tuple[tuple[int, int], ...]
    """Where the text names a date or a time: a number inside one is part of it, not a value."""


_NOTHING: frozenset[Any] = frozenset()
_SHORT = 64
"""Texts up to this long are prepared once per process (an observation's keys and short values
repeat in every row: one :class:`Text` each, not one per occurrence)."""


def prepare(text: str, *, loose: bool = False) -> Text:
    """``text`` read once for :func:`matches`: normalised (by :func:`fold` when ``loose``, else
    :func:`norm`), with what it names. An ASCII text reads the same either way."""
    loose = loose and not text.isascii()
    return _prepare_short(text, loose) if len(text) <= _SHORT else _prepare(text, loose)


@lru_cache(maxsize=16_384)
def _prepare_short(text: str, loose: bool) -> Text:
    return _prepare(text, loose)


def _prepare(text: str, loose: bool) -> Text:
    t = fold(text) if loose else norm(text)
    spans = tuple(m.span() for m in _DATE_SPAN.finditer(t))
    numbers = set()
    for m in _NUMERAL.finditer(t):
        if inside(m.start(), m.end(), spans):
            continue
        amount = numeral(m.group(0).replace(",", ""))
        if amount is not None:
            numbers.add(amount)
    dates, times = _dates(t), _times(t)
    return Text(
        t,
        frozenset(numbers) if numbers else _NOTHING,
        frozenset(dates) if dates else _NOTHING,
        frozenset(times) if times else _NOTHING,
        spans,
    )


def inside(start: int, end: int, spans: Sequence[tuple[int, int]]) -> bool:
    """True when [start, end) lies within a date span without being all of it."""
    return any(a <= start and end <= b and (a, b) != (start, end) for a, b in spans)


def token_in(needle: str, text: str, spans: Sequence[tuple[int, int]] = ()) -> int:
    """Start of ``needle`` as a whole token of ``text`` (both normalised), else -1. A token that is
    only part of a date or time (the ``13`` of ``june 13``) does not count."""
    start = text.find(needle)
    while start != -1:
        end = start + len(needle)
        before = start == 0 or not (text[start - 1].isalnum() or text[start - 1] == "_")
        after = end == len(text) or not (text[end].isalnum() or text[end] == "_")
        if before and after and not inside(start, end, spans):
            return start
        start = text.find(needle, start + 1)
    return -1


def matches(value: Any, text: Text, *, loose: bool = False) -> tuple[int, int] | None:
    """The span of ``value`` in ``text`` ((-1, -1) when matched by meaning, not by span), or
    None. ``loose``: the value is read by :func:`fold` (``text`` must be prepared loose too)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        needle = fold(value) if loose else norm(value)
        if not needle:
            return None
        at = token_in(needle, text.text, text.spans)
        if at >= 0:
            return (at, at + len(needle))
    meaning = _meaning(value, loose)
    return (-1, -1) if meaning is not None and _named(meaning, text.dates, text.times, text.numbers) else None


Meaning = tuple[str, Any, Any]
"""What a value names besides its own text: ``("datetime", iso day, clock)``, ``("day", iso day,
None)`` or ``("number", amount, None)``."""


def _meaning(value: Any, loose: bool = False) -> Meaning | None:
    """What :func:`matches` looks for in a text's dates, times and numbers (after the value's
    own text), or None."""
    if isinstance(value, str):
        needle = fold(value) if loose else norm(value)
        dt = _DATETIME.match(needle)
        if dt is not None:
            day = _ISO_DATE.match(dt.group(1))
            iso = _iso(day.group(1), int(day.group(2)), day.group(3)) if day is not None else None
            hm = _TIME.match(dt.group(2))
            clock = f"{int(hm.group(1)):02d}:{hm.group(2)}" if hm is not None else None
            return ("datetime", iso, clock)
        day = _ISO_DATE.fullmatch(needle)
        if day is not None:
            return ("day", _iso(day.group(1), int(day.group(2)), day.group(3)), None)
        if loose:
            value = needle
    amount = number(value)
    return None if amount is None else ("number", amount, None)


def _named(meaning: Meaning, dates: Set[str], times: Set[str], numbers: Set[Number]) -> bool:
    kind, first, second = meaning
    if kind == "datetime":
        return first in dates and second in times
    if kind == "day":
        return first in dates
    return first in numbers


@dataclass(frozen=True, slots=True)
class Probe:
    """A value prepared for :func:`may_match`: its normalised text and what it names."""

    needle: str | None
    meaning: Meaning | None
    never: bool


def probe(value: Any, *, loose: bool = False) -> Probe:
    """``value`` read once, for :func:`may_match` against many texts (``loose``: by :func:`fold`)."""
    if isinstance(value, bool):
        return Probe(None, None, True)
    needle = (fold(value) if loose else norm(value)) if isinstance(value, str) else None
    if needle == "":
        return Probe(None, None, True)
    return Probe(needle, _meaning(value, loose), False)


def may_match(found: Probe, joined: str, dates: Set[str], times: Set[str], numbers: Set[Number]) -> bool:
    """False only when :func:`matches` finds the value in none of some texts: ``joined`` holds
    their normalised texts (``"\\x00"`` between them), the sets the union of what they name."""
    if found.never:
        return False
    if found.needle is not None and found.needle in joined:
        return True
    return found.meaning is not None and _named(found.meaning, dates, times, numbers)
