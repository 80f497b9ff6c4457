"""The two forms of a call's arguments: as the tool receives them, and as the action is known by.

JSON Schema reads numbers by value, so ``7.0`` is an integer wherever the schema says
``"type": "integer"``; JSON text has no other way to tell. The tool receives such a number as the
Python ``int`` it equals (:meth:`ArgumentForms.split`), as a typed ``def f(n: int)`` expects, wherever
the schema puts the integer: ``properties``, ``items``/``prefixItems``, ``additionalProperties``,
``patternProperties``, local ``$ref``, ``allOf`` and the ``anyOf``/``oneOf`` branch the value matches
(the walk of :mod:`actionspace.validation.schema_walk`). A ``number`` stays as it was written.

A date-time (``"format": "date-time"``, or the ``timestamp`` marker of
:data:`~actionspace.validation.semantic.Timestamp`) has many spellings of one value. The action is
known by one of them (:func:`timestamp_identity`), so the idempotency key, the argument digest and
the node of a call do not depend on the spelling; the tool still receives the text as written.
Same value means same instant *and* same offset: ``10:00:00+02:00`` and ``08:00:00Z`` are one
instant, but a person who wrote ``+02:00`` chose a clock, so they stay two actions; ``-00:00`` (RFC
3339: the offset is unknown) stays apart from ``Z`` too.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from actionspace.validation.schema_walk import SchemaNode, Walk, compile_value_walk
from actionspace.validation.semantic import MARKER

__all__ = ["ArgumentForms", "SettledCheck", "compile_forms", "timestamp_identity"]

_INTEGER: Final[Mapping[str, Any]] = {"type": "integer"}
_DATE_TIME: Final[Mapping[str, Any]] = {"type": "date-time"}

_SPELLED: Final = re.compile(
    r"(?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2})[Tt ](?P<clock>[0-9]{2}:[0-9]{2})"
    r"(?::(?P<second>[0-9]{2})(?:\.(?P<fraction>[0-9]+))?)?"
    r"(?P<zone>[Zz]|[+-][0-9]{2}(?::?[0-9]{2})?)?",
    re.ASCII,
)
"""RFC 3339 date-times and the ISO 8601 extended spellings of them models write: ``t``, ``z`` or a
space, no seconds, ``+0000``/``+00`` offsets, any number of fraction digits."""


def timestamp_identity(text: str) -> str:
    """The one spelling of the date-time ``text``: ``YYYY-MM-DDTHH:MM:SS``, the fraction without
    trailing zeros (none when it is zero), ``Z`` for a zero offset, else ``±HH:MM`` (``-00:00``
    kept). ``text`` itself when it is that spelling already or not such a date-time at all.

    Pure text: nothing is parsed into a ``datetime``, so no digit is rounded away (``.1234567`` and
    ``.1234568`` stay apart) and an impossible date is left for the schema or the tool to judge.
    """
    found = _SPELLED.fullmatch(text)
    if found is None:
        return text
    fraction = (found["fraction"] or "").rstrip("0")
    zone = found["zone"] or ""
    if zone in ("Z", "z") or (zone.startswith("+00") and zone.strip("+0:") == ""):
        zone = "Z"
    elif zone:
        zone = f"{zone[:3]}:{zone[3:].lstrip(':') or '00'}"
    second = f"{found['second'] or '00'}.{fraction}" if fraction else found["second"] or "00"
    spelled = f"{found['date']}T{found['clock']}:{second}{zone}"
    return text if spelled == text else spelled


def _form_of(sub: Mapping[str, Any]) -> Mapping[str, Any] | None:
    types = sub.get("type")
    if types == "integer" or (isinstance(types, list) and "integer" in types and "number" not in types):
        return _INTEGER
    marker = sub.get(MARKER)
    timestamp = isinstance(marker, Mapping) and marker.get("type") == "timestamp"
    if sub.get("format") == "date-time" or timestamp:
        return _DATE_TIME
    return None


@dataclass(frozen=True, slots=True)
class ArgumentForms:
    """Where a schema holds integers and date-times; compiled once per tool version."""

    walk: Walk
    flat: tuple[tuple[str, ...], tuple[str, ...]] | None
    """(properties that may hold an integer, properties that may hold a date-time) when every such
    place is a top-level property of the arguments object (itself, or a leaf it takes through
    ``$ref``, ``allOf`` or a branch), so :class:`SettledCheck` reads them without a walk; None
    otherwise."""
    plain: frozenset[type]
    """Types of a value that never needs a conversion (not a float; not text either when the
    schema holds date-times): arguments holding only these, in dicts and lists, skip the walk."""

    def split(self, args: Any) -> tuple[Any, Any]:
        """(what the tool receives, what the action is known by) for schema-valid ``args``: the
        first with each integral float at an integer as an ``int``, the second also with each
        date-time in its :func:`timestamp_identity`. Each is ``args`` itself when nothing changed
        (never mutated: only the containers on the way to a change are copied)."""
        if not _holds_other(args, self.plain):
            return args, args
        return self._walked(args)

    def settled(self, args: Any) -> bool:
        """True when schema-valid ``args`` are already both forms (:meth:`split` would copy nothing)."""
        received, known = self._walked(args)
        return received is args and known is args

    def _walked(self, args: Any) -> tuple[Any, Any]:
        numbers: list[tuple[tuple[str | int, ...], Any]] = []
        times: list[tuple[tuple[str | int, ...], Any]] = []
        for loc in self.walk.locate(args):
            value = loc.value
            if loc.node.marker is _INTEGER:
                if isinstance(value, float) and value.is_integer():
                    numbers.append((loc.segments, int(value)))
            elif isinstance(value, str):
                known = timestamp_identity(value)
                if known is not value:
                    times.append((loc.segments, known))
        received = _patched(args, numbers) if numbers else args
        return received, (_patched(received, times) if times else received)


class SettledCheck:
    """The schema check the precompiled path asks (``is_valid``) for a tool whose schema holds
    integers or date-times: valid *and* already in both forms. A call it refuses takes the stages,
    whose :func:`~actionspace.validation.validator.validate` converts it, so both paths give the
    tool, the key and the trace the same arguments. ``iter_errors`` is the schema's own."""

    __slots__ = ("_flat", "_forms", "_schema")

    def __init__(self, schema: Any, forms: ArgumentForms) -> None:
        self._schema, self._forms, self._flat = schema, forms, forms.flat

    def is_valid(self, args: Any) -> bool:
        """True when the schema accepts ``args`` as they are and they need no conversion.

        A top-level property is read here, inline: this runs on every precompiled call, whose
        cost is mostly the Python functions it enters."""
        if not self._schema.is_valid(args):
            return False
        flat = self._flat
        if flat is None or type(args) is not dict:
            return not _holds_other(args, self._forms.plain) or self._forms.settled(args)
        for name in flat[0]:
            if isinstance(args.get(name), float):  # the schema took it: an integral float
                return False
        for name in flat[1]:
            value = args.get(name)
            if isinstance(value, str) and timestamp_identity(value) is not value:
                return False
        return True

    def quick(self) -> tuple[Callable[[Any], bool], bool] | None:
        """(the schema's own ``is_valid``, whether it has integers) when every integer is a
        top-level property and no date-time is held: arguments whose top-level values hold no
        float are then settled exactly when that check accepts them, so a caller may ask it alone
        (one compiled call, decided once per tool) and ask :meth:`is_valid` only when a float is
        among the values. None: only :meth:`is_valid` decides."""
        flat = self._flat
        if flat is None or flat[1]:
            return None
        return self._schema.is_valid, bool(flat[0])

    def iter_errors(self, args: Any) -> Any:
        """The schema's errors for ``args``."""
        return self._schema.iter_errors(args)


def compile_forms(schema: Mapping[str, Any]) -> ArgumentForms | None:
    """The integers and date-times of ``schema``; None when it has neither (nothing to convert)."""
    walk = compile_value_walk(schema, _form_of)
    if not walk.marked:
        return None
    times = any(node.marker is _DATE_TIME for node in walk.marked)
    plain: frozenset[type] = frozenset((int, bool, type(None)) if times else (int, bool, type(None), str))
    return ArgumentForms(walk, _flat(walk.root), plain)


def _subs(node: SchemaNode) -> list[SchemaNode]:
    subs = [
        *node.properties.values(),
        *(s for _, s in node.patterns),
        *node.prefix,
        *node.all_of,
        *(s for _, s in node.branches),
    ]
    subs.extend(s for s in (node.additional, node.items) if s is not None)
    return subs


def _flat(root: SchemaNode) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    if root.marker is not None:
        return None
    props = {id(node) for node in root.properties.values()}
    if any(sub.live and id(sub) not in props for sub in _subs(root)):
        return None
    integers: list[str] = []
    times: list[str] = []
    for name, node in root.properties.items():
        if not node.live:
            continue
        # the property itself, or leaves it takes whole ($ref, allOf) or as a branch (Optional[int])
        inner = [*node.properties.values(), *(s for _, s in node.patterns), *node.prefix]
        inner.extend(s for s in (node.additional, node.items) if s is not None)
        if any(sub.live for sub in inner):
            return None
        leaves = [node, *(s for s in (*node.all_of, *(s for _, s in node.branches)) if s.live)]
        if any(leaf is not node and any(sub.live for sub in _subs(leaf)) for leaf in leaves):
            return None
        kinds = {id(leaf.marker) for leaf in leaves if leaf.marker is not None}
        if id(_INTEGER) in kinds:
            integers.append(name)
        if id(_DATE_TIME) in kinds:
            times.append(name)
    return tuple(integers), tuple(times)


def _holds_other(args: Any, plain: frozenset[type]) -> bool:
    """True when ``args`` holds, in its dicts and lists at any depth, a value whose type is not in
    ``plain`` (one loop, no call per value: it runs before the walk on most calls)."""
    stack = [args]
    while stack:
        value = stack.pop()
        kind = type(value)
        if kind is dict:
            stack.extend(value.values())
        elif kind is list:
            stack.extend(value)
        elif kind not in plain:
            return True
    return False


_LEAF: Final = object()


def _patched(value: Any, changes: list[tuple[tuple[str | int, ...], Any]]) -> Any:
    """A copy of ``value`` with each change (segments, new value) made, each container on the way
    copied once however many changes it holds."""
    trie: dict[Any, Any] = {}
    for segments, new in changes:
        node = trie
        for segment in segments:
            node = node.setdefault(segment, {})
        node[_LEAF] = new
    return _apply(value, trie)


def _apply(value: Any, trie: dict[Any, Any]) -> Any:
    if _LEAF in trie:
        return trie[_LEAF]
    if isinstance(value, list | tuple):
        items = list(value)
        for index, sub in trie.items():
            items[index] = _apply(items[index], sub)
        return items if isinstance(value, list) else tuple(items)
    out = dict(value)
    for key, sub in trie.items():
        out[key] = _apply(out[key], sub)
    return out
