"""Whether a value occurs in its claimed sources: the check behind ``sources=`` (DESIGN §8).

A string occurs as a whole token, as the source wrote it or that token lowered, uppered,
capitalized or title-cased as a whole; a number as a number or a numeral in text (an integer as
exactly that numeral); lists and objects leaf by leaf, keys included. A model that claims a value
came from the user (or an observation) is believed only when it is there: any other change of case
(``"tHe QuIcK"`` for ``"the quick"``) or of digits carries information the model wrote.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

__all__ = ["occurs", "scalars"]


def scalars(value: Any) -> Iterator[Any]:
    """Every scalar of ``value``, object keys included: a key is data as much as a value is."""
    if isinstance(value, Mapping):
        for k, v in value.items():
            yield k
            yield from scalars(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from scalars(v)
    else:
        yield value


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def _scalar_occurs(value: Any, leaves: Sequence[Any]) -> bool:
    if value is None or value == "":
        return True  # carries nothing
    if isinstance(value, bool):
        return any(leaf is value for leaf in leaves)
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            return False
        for leaf in leaves:
            if isinstance(leaf, int | float) and not isinstance(leaf, bool) and leaf == value:
                return True
            if isinstance(leaf, str) and any(_numeral_is(m, value) for m in _NUMBER.findall(leaf)):
                return True
        return False
    if isinstance(value, str):
        token = re.compile(r"(?<!\w)" + re.escape(value) + r"(?!\w)", re.IGNORECASE)
        return any(isinstance(leaf, str) and _cased_token(value, token, leaf) for leaf in leaves)
    return False


def _numeral_is(numeral: str, value: float) -> bool:
    """True when ``numeral`` names ``value``: an integer exactly (a float would round ``…993`` to
    ``…992``), a float as the float the numeral reads as."""
    if isinstance(value, int):
        try:
            return Decimal(numeral) == value
        except InvalidOperation:  # pragma: no cover - the pattern only matches numerals
            return False
    return float(numeral) == value


def _cased_token(value: str, token: re.Pattern[str], leaf: str) -> bool:
    """True when ``value`` is a token of ``leaf`` that matches ``token`` (case aside) and is spelt
    as that token or as one of the few fixed re-casings of it."""
    for m in token.finditer(leaf):
        found = m.group(0)
        if value == found or value in (found.lower(), found.upper(), found.capitalize(), found.title()):
            return True
    return False


def occurs(value: Any, sources: Sequence[Any]) -> bool:
    """True when every leaf of ``value`` occurs in ``sources`` (strings as whole tokens,
    case-insensitively; numbers as numbers or numerals in text; None and "" always)."""
    leaves = [leaf for s in sources for leaf in scalars(s)]
    return all(_scalar_occurs(v, leaves) for v in scalars(value))
