"""What a proposal's arguments may hold: JSON values, whole text, bounded nesting.

Arguments read from JSON text are JSON values by construction, but a provider SDK's objects and a
caller's own ``ToolCall`` hand the runtime Python objects, which may hold anything: a set, bytes,
a key that is not a string, NaN or an infinity, an integer of thousands of digits, nesting deeper
than the interpreter's stack. None of these has a canonical JSON form (RFC 8785), so no argument
digest, idempotency key or node identity can be made of them, and no store can keep them.
:func:`unfit_arguments` finds the first such value and says where it is; the validate stage
refuses the call as ``invalid_arguments`` naming that field, before anything else reads the
arguments (the text checks of :mod:`actionspace._unicode` are part of the same walk).

The bounds are those of the JSON text parsers: nesting as deep as ``pydantic_core.from_json``
reads (200 levels, the arguments object itself the first), integers of as many digits as Python
writes back as text (4,300). Text nested deeper fails that parser and takes the stages, which
refuse it here, so a call ends the same way whichever path read it.

:func:`whole_json` is the other side: the canonical JSON text of a tool's *result*, whatever it
holds, at any depth, every integer in full, written without recursion: what an artifact keeps when
the observation's canonical form had to cut (nesting, long integers, long arrays).
"""

from __future__ import annotations

import dataclasses
import enum
import itertools
import math
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from decimal import Decimal
from json.encoder import encode_basestring
from typing import Any, Final

from actionspace._canonical import (
    canonical_text,
    dumps_plain,
    normalize,
    normalize_key,
    normalize_within,
    unshowable,
)
from actionspace._encoder import (
    CONTAINER_UNITS,
    LONG_TEXT,
    PLAIN_UNITS,
    TEXT_UNIT,
    TOO_DEEP,
    TOO_LARGE,
    WHOLE_UNITS,
    WITHIN,
    dump_verdict,
    within,
)
from actionspace._placeholders import (
    bounded_repr,
    field_pairs,
    is_model,
    model_pairs,
    named_keys,
    shown_repr,
    type_name,
)
from actionspace._unicode import _bad, _escape_pointer, text_for_postgres

__all__ = [
    "ARGUMENT_UNITS",
    "DECIMAL_BITS",
    "MAX_DEPTH",
    "MAX_INT_DIGITS",
    "TOO_COSTLY",
    "finite_numbers",
    "too_costly",
    "unfit_arguments",
    "whole_json",
]

MAX_DEPTH: Final = 200
"""Most levels of objects and arrays arguments may nest (the arguments object is level 1)."""
MAX_INT_DIGITS: Final = 4300
"""Most decimal digits of an integer argument (Python's limit for writing an integer as text)."""
_TOO_BIG: Final = 10**MAX_INT_DIGITS
ARGUMENT_UNITS: Final = PLAIN_UNITS
"""Most units arguments' JSON text may cost (as :mod:`actionspace._encoder` counts them: what a
Python caller's arguments share counted each time it is held), the most the encoder writes: past
it no digest, idempotency key or node identity can be made of them."""
TOO_COSTLY: Final = (
    f"holds more than {ARGUMENT_UNITS} values, counting a part held in several places once for each:"
    " its JSON text is too long to check"
)
"""Why arguments whose JSON text costs more than :data:`ARGUMENT_UNITS` are refused."""
_FLAT_KEYS: Final = 64
"""Most keys of arguments read in one pass: one long text held by every key is written that often."""


def unfit_arguments(value: Any) -> tuple[str, str, bool] | None:
    """(JSON pointer, reason, whether it is text) of the first part of ``value`` arguments may not
    hold, else None: a string or key :func:`~actionspace._unicode.unfit_text` refuses, a key that
    is not a string, a value that is not JSON (JSON's types, tuples as arrays; a str or int subclass
    but an enum, ``numpy.str_``, fails the schema checker), a number that is not finite, an integer
    beyond :data:`MAX_INT_DIGITS` digits, nesting deeper than :data:`MAX_DEPTH`, a JSON text costing
    more than :data:`ARGUMENT_UNITS` (a Python caller's parts held in many places: a list shared
    down forty levels). Walks each container once (again only where held deeper), without recursion."""
    if type(value) is dict and len(value) <= _FLAT_KEYS:  # the usual arguments: ASCII keys, small
        for key, child in value.items():  # scalars and ASCII strings (one text held by every key, at most)
            if type(key) is not str or not key.isascii() or "\x00" in key:
                break
            kind = type(child)
            if kind is str:
                if not child.isascii() or "\x00" in child:
                    break
            elif kind is int:
                if not -_TOO_BIG < child < _TOO_BIG:
                    break
            elif kind is float:
                if child - child != 0.0:  # NaN or an infinity
                    break
            elif kind is not bool and child is not None:
                break
        else:
            return None
    return _walk(value)


def _walk(value: Any) -> tuple[str, str, bool] | None:
    stack: list[tuple[Any, str, int]] = [(value, "", 0)]
    path: set[int] = set()  # the containers holding the one being walked
    walked: dict[int, int] = {}  # the containers walked whole, and how deep
    texts: dict[int, str] = {}  # the long texts read, by identity
    shared = False
    while stack:
        item, where, depth = stack.pop()
        if item is _LEAVE:
            path.discard(depth)  # the marker carries the container's id
            continue
        problem = _scalar(item)
        if problem is not None:
            return where, problem, False
        if isinstance(item, str):
            if len(item) >= LONG_TEXT and _held_again(item, texts):
                shared = True  # read before: nothing new to find in it
                continue
            reason = _bad(item)
            if reason is not None:
                return where, reason, True
            continue
        if isinstance(item, dict):
            pairs: Any = item.items()
        elif isinstance(item, list | tuple):
            pairs = enumerate(item)
        else:
            continue
        if depth >= MAX_DEPTH:
            return where, f"nests objects and arrays deeper than {MAX_DEPTH} levels", False
        if id(item) in path:
            return where, "holds itself (a container inside itself has no JSON form)", False
        if id(item) in walked:  # held in another place too: its text is written once for each
            shared = True
            if depth <= walked[id(item)]:
                continue  # walked whole from as deep: nothing new to find in it
        walked[id(item)] = depth
        path.add(id(item))
        stack.append((_LEAVE, where, id(item)))
        for key, child in pairs:
            if isinstance(item, dict):
                if not isinstance(key, str) or (type(key) is not str and not isinstance(key, enum.Enum)):
                    shown = bounded_repr(key, 80)  # never the key's own repr: it may not end
                    return where, f"has a key that is not a string ({type_name(key)} {shown})", False
                if len(key) >= LONG_TEXT and _held_again(key, texts):
                    shared = True
                else:
                    reason = _bad(key)
                    if reason is not None:
                        return f"{where}/{_escape_pointer(text_for_postgres(key))}", f"the key {reason}", True
            stack.append((child, f"{where}/{_escape_pointer(str(key))}", depth + 1))
    reason = too_costly(value) if shared else None
    return None if reason is None else ("", reason, False)


def too_costly(value: Any) -> str | None:
    """Why :func:`unfit_arguments` refuses ``value`` (arguments: objects, arrays, scalars) as too
    costly, else None: its JSON text costs more than :data:`ARGUMENT_UNITS`, each part counted
    each place it is held and a long text each time after the first. Time linear in its distinct
    containers; a container inside itself is counted once (the walks that read it refuse it)."""
    units: dict[int, int] = {}
    texts: dict[int, str] = {}
    stack: list[tuple[Any, bool]] = [(value, False)]
    while stack:
        item, children_done = stack.pop()
        if not isinstance(item, dict | list | tuple) or (not children_done and id(item) in units):
            continue  # not a container, or one counted already
        children = list(item.values()) if isinstance(item, dict) else item
        if not children_done:
            units[id(item)] = 0  # while its children are counted: met inside itself, it adds nothing
            stack.append((item, True))
            stack.extend((child, False) for child in children if isinstance(child, dict | list | tuple))
            continue
        total = len(item) + CONTAINER_UNITS
        for child in itertools.chain(children, item if isinstance(item, dict) else ()):
            if isinstance(child, dict | list | tuple):
                total += units.get(id(child), 0)
            elif isinstance(child, str) and len(child) >= LONG_TEXT:
                texts[id(child)] = child
                total += len(child) // TEXT_UNIT
        units[id(item)] = total
    written = units.get(id(value), 0) - sum(len(text) // TEXT_UNIT for text in texts.values())
    return TOO_COSTLY if written > ARGUMENT_UNITS else None


def _held_again(text: str, texts: dict[int, str]) -> bool:
    """Whether the long ``text`` was met before in these arguments; else ``texts`` keeps it."""
    if id(text) in texts:
        return True
    texts[id(text)] = text
    return False


_LEAVE: Final = object()  # marks, on the walk's stack, the end of a container's children


def _scalar(item: Any) -> str | None:
    """Why a value that is not a container or text may not be in arguments, or None."""
    if isinstance(item, str | int) and type(item) not in (str, int, bool) and not isinstance(item, enum.Enum):
        return f"is a {type_name(item)}, not a JSON value (a subclass of str or int)"
    if item is None or isinstance(item, str | bool | dict | list | tuple):
        return None
    if isinstance(item, int):
        return None if -_TOO_BIG < item < _TOO_BIG else f"is an integer of more than {MAX_INT_DIGITS} digits"
    if isinstance(item, float):
        return None if math.isfinite(item) else f"is {item!r}, not a finite number: JSON has none such"
    return f"is a {type(item).__name__}, not a JSON value"


def finite_numbers(value: Any) -> bool:
    """Whether every number in ``value`` (parsed JSON: dicts, lists and scalars) is finite; the one
    check :func:`unfit_arguments` makes that JSON text parsed without escapes still needs (a
    literal such as ``1e999`` reads as an infinity)."""
    if type(value) is dict:
        for child in value.values():
            kind = type(child)
            if kind is float:
                if child - child != 0.0:
                    return False
            elif kind is dict or kind is list:
                break
        else:
            return True
    return _walk(value) is None


DECIMAL_BITS: Final = 1 << 18
"""Largest integer (in bits, about 79,000 digits) :func:`whole_json` writes in decimal; a larger one
is the string ``"0x…"`` of its hexadecimal digits, exact and written in linear time (decimal digits
cost time quadratic in the length)."""
_SLICE: Final = 1 << 20
"""Characters of a long string escaped at a time."""

_Children = Iterator[tuple[str, Any]]


@dataclasses.dataclass(frozen=True, slots=True)
class _Container:
    """An object or array to walk: opening text, (separator, child) pairs, closing text, its id."""

    start: str
    children: _Children
    end: str
    marker: int


_Opened = _Container | tuple[str, ...] | Iterator[str]


def whole_json(value: Any) -> Iterator[str]:
    """Pieces of the canonical JSON text of ``value`` (``dumps_plain(normalize(value))``) with
    nothing cut: nested at any depth (no recursion), integers in full (see :data:`DECIMAL_BITS`),
    numpy-like arrays with every item. Pydantic models are their dump (their fields, when the dump
    fails), dataclasses their fields; a container, dataclass or model inside itself is ``"<cycle>"``;
    a value, key or field whose own code raises is the placeholder ``normalize`` gives it. Never
    raises for what a tool returns; time is linear in the value's size (plus sorting each object's
    keys); long strings come in slices, so memory stays bounded by the value itself.

    What sharing multiplies is bounded: past :data:`~actionspace._encoder.WHOLE_UNITS` units written,
    the next value is ``"<too large>"`` and the containers it is in are closed, unread further; a
    container holding more than its ``len()`` says is read no further, as ``normalize`` reads it."""
    stack: list[tuple[_Children, str, int]] = []
    path: set[int] = set()
    budget = _Budget()
    children: _Children = iter((("", value),))
    end, marker = "", -1
    while True:
        for prefix, item in children:
            if prefix:
                yield prefix
            if budget.left < 0:  # spent: this value is the marker, and every open container ends
                yield _TOO_LARGE_TEXT
                yield end
                yield from (closing for _, closing, _ in reversed(stack))
                return
            budget.depth = len(stack)
            if budget.depth <= budget.deep_at:  # past the model too deep to dump (see _Budget)
                budget.deep_at = -1
            opened = _open(item, path, budget)
            if isinstance(opened, _Container):
                yield opened.start
                stack.append((children, end, marker))
                path.add(opened.marker)
                children, end, marker = opened.children, opened.end, opened.marker
                break
            yield from opened
        else:
            yield end
            path.discard(marker)
            if not stack:
                return
            children, end, marker = stack.pop()


class _Budget:
    """The units one ``whole_json`` may still write."""

    __slots__ = ("deep_at", "depth", "left", "texts")

    def __init__(self) -> None:
        self.left = WHOLE_UNITS
        self.depth = self.deep_at = -1  # the value opened's depth; where a model too deep to dump is
        self.texts: dict[int, object] = {}  # the long texts (and str subclasses) met, kept alive here

    def again(self, value: object, text: str) -> int:
        """Units of ``text`` (``value`` written): one, and one per :data:`TEXT_UNIT` characters
        when it is long and met before (what sharing multiplies)."""
        if len(text) < LONG_TEXT:
            return 1
        if id(value) not in self.texts:
            self.texts[id(value)] = value
            return 1
        return 1 + len(text) // TEXT_UNIT

    def text(self, pieces: tuple[str, ...]) -> tuple[str, ...]:
        """``pieces``, their units charged."""
        self.left -= 1 + sum(map(len, pieces)) // TEXT_UNIT
        return pieces

    def read(self, values: Iterable[Any], owner: object) -> tuple[list[Any], bool]:
        """The items of a container (``owner``) it can afford, and whether some were left unread."""
        taken, more = within(values, self.left - _OPEN_UNITS, owner)
        self.left -= len(taken) + _OPEN_UNITS
        return taken, more


_TOO_LARGE_TEXT: Final = encode_basestring(TOO_LARGE)
_OPEN_UNITS: Final = 4 * CONTAINER_UNITS
"""Units a container costs here besides its items: walking one costs what four of ``normalize``'s do."""


def _open(item: Any, path: set[int], budget: _Budget) -> _Opened:
    """``item`` as text pieces, or as a container to walk."""
    try:
        return _opened(item, path, budget)
    except Exception as exc:  # the value's own code raised, as ``normalize`` treats it
        return (encode_basestring(unshowable(item, exc)),)


def _opened(item: Any, path: set[int], budget: _Budget) -> _Opened:
    kind = type(item)
    if item is None or kind is bool or kind is float:
        return budget.text((canonical_text(item),))
    if kind is str:
        return _string(item, budget)
    if (kind is dict and _flat(item.values()) and all(type(key) is str for key in item)) or (
        kind is list and _flat(item)
    ):
        flat = _plain(item)
        if flat is not None:
            budget.left -= _OPEN_UNITS + len(item) + budget.again(item, flat)
            return (flat,)
    if isinstance(item, enum.Enum):
        return _opened(item.value, path, budget)
    if isinstance(item, int):
        return budget.text((_integer(int(item)),))
    if isinstance(item, float):
        return budget.text((canonical_text(float(item)),))
    if isinstance(item, str):
        return _string(str(item), budget, item)
    if id(item) in path:
        return ('"<cycle>"',)
    if isinstance(item, Mapping):
        return _object(item.items(), id(item), path, budget, item)
    if isinstance(item, list | tuple | deque | set | frozenset):
        items, more = budget.read(item, item)
        if isinstance(item, set | frozenset):
            items.sort(key=canonical_text)
        if more:  # as ``normalize`` writes it: what was read, then the marker
            items.append(TOO_LARGE)
        children = (("," if at else "", child) for at, child in enumerate(items))
        return _Container("[", children, "]", id(item))
    budget.left -= _OPEN_UNITS
    dump = getattr(kind, "model_dump", None)
    if callable(dump):
        return _model(item, dump, path, budget)
    if dataclasses.is_dataclass(item) and not isinstance(item, type):
        fields = field_pairs(item, (field.name for field in dataclasses.fields(item)))
        return _object(fields, id(item), path, budget)
    if callable(getattr(kind, "tolist", None)) and getattr(kind, "dtype", None) is not None:
        return _inside(item.tolist(), id(item))  # every item, where ``normalize`` keeps the first rows
    plain = normalize(item)
    return _string(plain, budget) if type(plain) is str else budget.text((dumps_plain(plain),))


def _flat(values: Iterable[Any]) -> bool:
    """Whether every one of ``values`` is a JSON scalar the C encoder writes as ``normalize`` does."""
    for child in values:
        kind = type(child)
        if kind is str or kind is bool or child is None:
            continue
        if kind is int:
            if not -_TOO_BIG < child < _TOO_BIG:
                return False
        elif kind is not float or child - child != 0.0:  # not a number, or NaN or an infinity
            return False
    return True


def _plain(item: dict[str, Any] | list[Any]) -> str | None:
    try:
        return dumps_plain(item)
    except ValueError:  # the interpreter's digit limit lowered below MAX_INT_DIGITS
        return None


def _inside(child: Any, marker: int) -> _Container:
    """``child`` written in the place of the value ``marker`` names (which it may not hold)."""
    return _Container("", iter((("", child),)), "", marker)


def _model(item: Any, dump: Any, path: set[int], budget: _Budget) -> _Opened:
    """A pydantic model as its JSON dump; when the dump fails (the model holds itself), would cost
    more than ``budget`` affords or nest too deep (:func:`~actionspace._encoder.dump_verdict`), as
    its fields, each read on its own (a cycle closes ``"<cycle>"``). Anything else with a
    ``model_dump`` that fails is its ``repr``, as ``normalize`` writes it."""
    try:
        if budget.deep_at < 0 or not is_model(item):  # else inside a model too deep to dump: so is it
            verdict = dump_verdict(item, budget.left)
            if verdict is WITHIN:  # else what sharing multiplies would be dumped whole
                return _inside(dump(item, mode="json"), id(item))
            if verdict is TOO_DEEP and budget.deep_at < 0:
                budget.deep_at = budget.depth
    except Exception:  # the model's own code raised: its fields are read below
        pass
    pairs = model_pairs(item)
    if pairs is None:
        return _string(shown_repr(repr(item)), budget)
    return _object(pairs, id(item), path, budget)


def _object(pairs: Any, marker: int, path: set[int], budget: _Budget, owner: object = None) -> _Opened:
    """An object of ``pairs`` (those ``budget`` affords, as ``normalize`` reads them), its keys
    named as ``normalize`` names them; ``path``: the ids of the containers it is inside (a key's
    name may depend on its value, read as from there)."""
    taken, more = budget.read(pairs, owner)
    entries = [(normalize_key(key), key, child) for key, child in taken]
    budget.left -= sum(len(text) for text, _, _ in entries) // TEXT_UNIT
    named = {text: child for text, _, child in entries}
    if len(named) != len(entries):  # keys that write as one text

        def rank(child: Any) -> str:
            return canonical_text(normalize_within(child, {*path, marker}))

        names = named_keys(entries, rank)
        named = {name: child for name, (_, _, child) in zip(names, entries, strict=True)}
    if more:  # as ``normalize`` writes it: the marker as a key of its own
        named.setdefault(TOO_LARGE, TOO_LARGE)
    keys = sorted(named)
    children = (
        (("," if at else "") + encode_basestring(key) + ":", named[key]) for at, key in enumerate(keys)
    )
    return _Container("{", children, "}", marker)


def _string(text: str, budget: _Budget, value: object = None) -> tuple[str, ...] | Iterator[str]:
    budget.left -= budget.again(text if value is None else value, text)
    if len(text) <= _SLICE:
        return (encode_basestring(text),)
    return _slices(text)


def _slices(text: str) -> Iterator[str]:
    yield '"'
    for start in range(0, len(text), _SLICE):
        yield encode_basestring(text[start : start + _SLICE])[1:-1]
    yield '"'


def _integer(value: int) -> str:
    try:
        return int.__repr__(value)
    except ValueError:  # past the interpreter's digit limit for int -> str
        pass
    if value.bit_length() <= DECIMAL_BITS:
        return str(Decimal(value))
    return f'"{"-" if value < 0 else ""}0x{abs(value):x}"'
