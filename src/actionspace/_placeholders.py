"""How ``normalize`` and ``whole_json`` write what has no JSON form of its own, the same way each
time: placeholders for values that cannot be shown, a ``repr`` without the object's address, the
fields of a model read one by one, and names for keys of one mapping that write as one text.

Nothing here depends on where a value lives in memory or on the order a mapping or set happened to
hold it in, so two equal results built apart write the same text and get the same content hash.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from typing import Any, Final

__all__ = [
    "distinct_key",
    "field_pairs",
    "model_pairs",
    "named_keys",
    "shown_repr",
    "stable_repr",
    "type_name",
    "unshowable",
]

_ADDRESS: Final = re.compile(r" at 0x[0-9A-Fa-f]+(?=>)")
"""The address CPython's default reprs name (``<Row object at 0x7f…>``, ``<function f at 0x7f…>``)."""


def unshowable(value: object, exc: BaseException) -> str:
    """The placeholder of a value whose conversion raised ``exc``: its type's name and the
    exception's, read without calling anything of either that could raise again."""
    return f"<{type_name(value)} object: cannot be shown ({type_name(exc)})>"


def type_name(value: object) -> str:
    """The qualified name of ``value``'s type; ``"object"`` when reading it raises."""
    try:  # a metaclass may make the name anything, or raise
        return str.__str__(type(value).__qualname__)
    except Exception:
        return "object"


def shown_repr(text: str) -> str:
    """``text`` (a ``repr`` or ``str``) with every object address CPython's default reprs print
    removed: ``<Row object at 0x7f…>`` reads ``<Row object>``, the same in every process."""
    return _ADDRESS.sub("", text) if " at 0x" in text else text


def stable_repr(value: object) -> str:
    """``repr(value)`` with the items of every set in it sorted by their own text, and no object
    address: a tuple or frozenset key reads the same in every process (a set's iteration order
    follows the process's string hash seed)."""
    if isinstance(value, set | frozenset) and type(value).__repr__ in (set.__repr__, frozenset.__repr__):
        items = ", ".join(sorted(stable_repr(item) for item in value))
        return f"{type(value).__name__}({{{items}}})" if items else f"{type(value).__name__}()"
    if type(value) is tuple:
        items = ", ".join(stable_repr(item) for item in value)
        return f"({items},)" if len(value) == 1 else f"({items})"
    return shown_repr(repr(value))


def field_pairs(value: Any, names: Iterable[str]) -> list[tuple[str, Any]]:
    """(name, value) of each field of ``value``; a field that cannot be read is its placeholder."""
    pairs: list[tuple[str, Any]] = []
    for name in names:
        try:
            pairs.append((name, getattr(value, name)))
        except Exception as exc:  # that field alone
            pairs.append((name, unshowable(value, exc)))
    return pairs


def model_pairs(value: Any) -> list[tuple[str, Any]] | None:
    """The fields of a pydantic model (its extra fields after them), each read on its own: what a
    model whose dump fails (it holds itself) is written as. None for anything else."""
    names = getattr(type(value), "model_fields", None)
    if not isinstance(names, Mapping):
        return None
    pairs = field_pairs(value, names)
    extra = getattr(value, "__pydantic_extra__", None)
    if isinstance(extra, dict):
        pairs.extend(extra.items())
    return pairs


def distinct_key(text: str, key: object, taken: Container[str], counts: dict[str, int] | None = None) -> str:
    """A name for ``key``, whose text ``text`` another key of its mapping holds already, that ``taken``
    does not hold: ``"<text> (<type>)"``, else ``"<text> (<type> 2)"``, ``3``… ``counts`` (kept by the
    caller over one mapping) remembers the last number tried per name: keys printing alike cost one step."""
    base = f"{text} ({type_name(key)}"
    number = 1 if counts is None else counts.get(base, 1)
    name = f"{base})" if number == 1 else f"{base} {number})"
    while name in taken:
        number += 1
        name = f"{base} {number})"
    if counts is not None:
        counts[base] = number
    return name


def named_keys(entries: Sequence[tuple[str, object, Any]], rank: Callable[[Any], str]) -> list[str]:
    """The names of one mapping's keys, given as ``(text, key, value)`` in the mapping's order, when
    some write as one text. Each text names one of its keys: a ``str`` key first, then by the
    name of the key's type, then by ``rank`` of the value; each other key gets :func:`distinct_key`
    (never a text another key holds). The same keys and values get the same names in any order."""
    order = sorted(
        range(len(entries)),
        key=lambda at: (
            entries[at][0],
            type(entries[at][1]) is not str,
            type_name(entries[at][1]),
            rank(entries[at][2]),
        ),
    )
    names: list[str | None] = [None] * len(entries)
    taken: set[str] = set()
    for at in order:
        text = entries[at][0]
        if text not in taken:
            names[at] = text
            taken.add(text)
    counts: dict[str, int] = {}
    for at in order:
        if names[at] is None:
            names[at] = name = distinct_key(entries[at][0], entries[at][1], taken, counts)
            taken.add(name)
    return [name for name in names if name is not None]  # every one is named
