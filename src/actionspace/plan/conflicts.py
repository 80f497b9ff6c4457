"""Read/write sets: templates expanded from arguments, prefix overlap, and the commutation rule.

Two calls commute when ``W_i ∩ (R_j ∪ W_j) = ∅`` and ``W_j ∩ R_i = ∅``. Resource patterns overlap by
prefix at a separator: ``"fs:"`` overlaps ``"fs:/a/b"``, ``"file:/a"`` overlaps ``"file:/a/b"`` but not
``"file:/ab"``. ``"*"`` overlaps everything.
"""

from __future__ import annotations

import string
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from actionspace.catalog.spec import ToolSpec

__all__ = ["ANY", "call_sets", "commute", "conflicting", "expand", "overlaps"]

ANY = "*"
"""The pattern of an undeclared set: overlaps every resource (the safe assumption)."""

_SEPARATORS = frozenset(":/#.")
_FORMATTER = string.Formatter()


def overlaps(a: str, b: str) -> bool:
    """True when resource patterns ``a`` and ``b`` may name the same resource."""
    if ANY in (a, b) or a == b:
        return True
    wild_a, wild_b = a.endswith("*"), b.endswith("*")
    a, b = a.removesuffix("*"), b.removesuffix("*")
    (short, wild), long = ((a, wild_a), b) if len(a) <= len(b) else ((b, wild_b), a)
    if not long.startswith(short):
        return False
    return wild or short == long or short[-1:] in _SEPARATORS or long[len(short)] in _SEPARATORS


def _any_overlap(xs: Sequence[str], ys: Sequence[str]) -> str | None:
    for x in xs:
        for y in ys:
            if overlaps(x, y):
                return x if len(x) >= len(y) else y
    return None


def conflicting(
    reads_i: Sequence[str], writes_i: Sequence[str], reads_j: Sequence[str], writes_j: Sequence[str]
) -> str | None:
    """The first resource on which two calls conflict, or None when they commute."""
    if not writes_i and not writes_j:
        return None
    return (
        _any_overlap(writes_i, writes_j) or _any_overlap(writes_i, reads_j) or _any_overlap(writes_j, reads_i)
    )


def commute(
    reads_i: Sequence[str], writes_i: Sequence[str], reads_j: Sequence[str], writes_j: Sequence[str]
) -> bool:
    """The seed's rule: ``W_i ∩ (R_j ∪ W_j) = ∅`` and ``W_j ∩ R_i = ∅``."""
    return conflicting(reads_i, writes_i, reads_j, writes_j) is None


def expand(
    templates: Iterable[str], arguments: Mapping[str, Any], unknown: Iterable[str] = ()
) -> tuple[str, ...]:
    """Format each template with ``arguments``.

    A placeholder whose argument is missing, not a scalar, or listed in ``unknown`` (its value comes
    from another node and is not known yet) widens the pattern to the prefix before it, so the set
    can only grow, never hide a resource.
    """
    pending = set(unknown)
    out: list[str] = []
    for template in templates:
        if "{" not in template:
            out.append(template)
            continue
        pieces: list[str] = []
        widened = False
        try:
            parsed = list(_FORMATTER.parse(template))
        except ValueError:  # not a template (a ToolSpec refuses one): everything after its first brace
            out.append(template[: template.index("{")] + "*")
            continue
        for literal, field, _spec, _conv in parsed:
            pieces.append(literal)
            if field is None:
                continue
            name = field.split(".", 1)[0].split("[", 1)[0]
            value = arguments.get(name)
            if name in pending or value is None or isinstance(value, (dict, list, tuple)):
                widened = True
                break
            pieces.append(str(value))
        text = "".join(pieces)
        out.append((text + "*") if widened else text)
    return tuple(dict.fromkeys(out))


def call_sets(
    spec: ToolSpec, arguments: Mapping[str, Any], unknown: Iterable[str] = ()
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """One call's read and write sets: ``spec``'s templates expanded with ``arguments``
    (:func:`expand`). An undeclared read set of a ``read`` tool, or write set of a ``write`` or
    ``external`` tool, is everything (:data:`ANY`): the safe assumption."""
    reads = expand(spec.reads, arguments, unknown)
    writes = expand(spec.writes, arguments, unknown)
    if spec.effect == "read" and not reads:
        reads = (ANY,)
    if spec.effect in ("write", "external") and not writes:
        writes = (ANY,)
    return reads, writes
