"""An observation's leaves read once for provenance: finding a value without reading every leaf.

:class:`~actionspace.policy.provenance.Evidence` looks for each scalar of a call's arguments in
every observation the run remembers (up to ``MAX_REMEMBERED``). Read leaf by leaf, a call late in
a long run compared each of its values with hundreds of thousands of leaves: 46 ms a call after
1,000 results of 150 rows, against 1.4 ms after 10. An :class:`ObservationIndex` keeps, per
observation, the first leaf of each whole value (as it is, its normalised text, the number it
names) and the normalised texts joined with what they name, so that :func:`find` answers from
dictionaries, and reads the leaves one by one only when the value may occur inside a text.
:func:`find` gives what the leaf-by-leaf reading gives (``tests/policy/test_evidence_index.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from actionspace.policy.matching import Number, Probe, Text, fold, matches, may_match, norm, number

__all__ = ["Leaf", "ObservationIndex", "find", "index", "same"]

Leaf = tuple[str, Any, Text | None, bool]
"""One scalar of an observation: (JSON pointer, scalar, its prepared text, is-a-key)."""


@dataclass(frozen=True, slots=True)
class ObservationIndex:
    flat: Sequence[Leaf]
    exact: dict[tuple[type, Any], int]
    """(type, scalar) → the first leaf that is it."""
    texts: dict[str, int]
    """Normalised text → the first leaf whose text it is."""
    numbers: dict[Number, int]
    """Number → the first leaf that names it as a whole (``1000``, ``"$1,000.00"``)."""
    joined: str
    """Every leaf's normalised text, ``"\\x00"`` between them."""
    named_dates: frozenset[str]
    named_times: frozenset[str]
    named_numbers: frozenset[Number]
    """What the texts name, all of them together."""
    loose: bool = False
    """Texts read by :func:`~actionspace.policy.matching.fold` (an untrusted observation's): a
    value is looked up folded, and a leaf holds it as a whole (``holder``) only when the strict
    reading agrees."""


def index(flat: Sequence[Leaf], *, loose: bool = False) -> ObservationIndex:
    """The index of an observation's leaves (as :func:`~actionspace.policy.provenance.leaves` and
    ``prepare`` give them; ``loose``: prepared with ``loose=True``)."""
    exact: dict[tuple[type, Any], int] = {}
    texts: dict[str, int] = {}
    numbers: dict[Number, int] = {}
    joined: list[str] = []
    dates: set[str] = set()
    times: set[str] = set()
    named: set[Number] = set()
    for i, (_path, leaf, text, _key) in enumerate(flat):
        key = _exact_key(leaf)
        if key is not None:
            exact.setdefault(key, i)
        amount = _number(leaf, loose)
        if amount is not None:
            numbers.setdefault(amount, i)
        if text is not None:
            texts.setdefault(text.text, i)
            joined.append(text.text)
            dates |= text.dates
            times |= text.times
            named |= text.numbers
    return ObservationIndex(
        flat,
        exact,
        texts,
        numbers,
        "\x00".join(joined),
        frozenset(dates),
        frozenset(times),
        frozenset(named),
        loose,
    )


def _number(value: Any, loose: bool) -> Number | None:
    if loose and isinstance(value, str) and not value.isascii():
        return number(fold(value))
    return number(value)


def _exact_key(value: Any) -> tuple[type, Any] | None:
    """The key under which ``value`` equals only a value of its own type (None: never equal, or
    not hashable)."""
    if isinstance(value, float) and math.isnan(value):
        return None
    try:
        hash(value)
    except TypeError:
        return None
    return (type(value), value)


def find(value: Any, found: Probe, obs: ObservationIndex) -> tuple[str, str | None] | None:
    """(path, holder) of the first leaf of the observation that holds ``value`` as a whole, else
    of the first whose text names it, else None; ``found`` is :func:`~actionspace.policy.matching.probe`
    of ``value``. ``holder`` is the pointer whose field holds the whole value (for an object key
    the object's), None when the value is only a token of the leaf's text."""
    first: int | None = None
    key = _exact_key(value)
    read = fold if obs.loose else norm
    for at in (
        None if key is None else obs.exact.get(key),
        None if not isinstance(value, str) else obs.texts.get(read(value)),
        _number_at(value, obs),
    ):
        if at is not None and (first is None or at < first):
            first = at
    if first is not None:
        path, leaf, _text, is_key = obs.flat[first]
        if obs.loose and not same(value, leaf):
            return path, None  # the same only once folded: it taints, it does not vouch
        return path, path.rsplit("/", 1)[0] if is_key else path
    if not may_match(found, obs.joined, obs.named_dates, obs.named_times, obs.named_numbers):
        return None
    for path, _leaf, text, _is_key in obs.flat:
        if text is not None and matches(value, text, loose=obs.loose) is not None:
            return path, None
    return None


def same(value: Any, leaf: Any) -> bool:
    """True when ``leaf`` holds ``value`` as a whole by the strict reading."""
    if type(value) is type(leaf) and value == leaf:
        return True
    if isinstance(value, str) and isinstance(leaf, str) and norm(value) == norm(leaf):
        return True
    amount = number(value)
    return amount is not None and amount == number(leaf)


def _number_at(value: Any, obs: ObservationIndex) -> int | None:
    amount = _number(value, obs.loose)
    return None if amount is None else obs.numbers.get(amount)
