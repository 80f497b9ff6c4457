"""How ``normalize`` and ``whole_json`` write what has no JSON form of its own, the same way each
time: placeholders for values that cannot be shown, a ``repr`` without the object's address, the
fields of a model read one by one, and names for keys of one mapping that write as one text.

Nothing here depends on where a value lives in memory or on the order a mapping or set happened to
hold it in, so two equal results built apart write the same text and get the same content hash.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import enum
import pathlib
import re
import types
import uuid
from collections import deque
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any, Final

__all__ = [
    "STABLE_CHARS",
    "bounded_repr",
    "distinct_key",
    "field_pairs",
    "is_model",
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


STABLE_CHARS: Final = 1 << 16
"""Most characters of a :func:`stable_repr`; a longer one ends ``…``."""


def stable_repr(value: object) -> str:
    """``repr(value)`` with the items of every set in it sorted by their own text, and no object
    address: a tuple or frozenset key reads the same in every process (a set's iteration order
    follows the process's string hash seed). At most :data:`STABLE_CHARS` characters, however much
    of its parts the value shares (:func:`bounded_repr`, its own ``__repr__`` run)."""
    return bounded_repr(value, STABLE_CHARS, run_own=True)


def field_pairs(value: Any, names: Iterable[str]) -> list[tuple[str, Any]]:
    """(name, value) of each field of ``value``; a field that cannot be read is its placeholder."""
    pairs: list[tuple[str, Any]] = []
    for name in names:
        try:
            pairs.append((name, getattr(value, name)))
        except Exception as exc:  # that field alone
            pairs.append((name, unshowable(value, exc)))
    return pairs


def is_model(value: object) -> bool:
    """Whether ``value`` is a pydantic model (its type names its fields), not only dumps like one."""
    return isinstance(getattr(type(value), "model_fields", None), Mapping)


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


def bounded_repr(value: object, limit: int, *, run_own: bool = False) -> str:
    """``repr(value)`` cut at ``limit`` characters (then ``…``), at a cost bounded by ``limit``
    whatever the value holds: what it shares (a tuple shared down forty levels, whose ``repr`` is
    2**40 items), a container inside itself (``[...]``), nesting past :data:`_REPR_DEPTH`
    (``...``), a text or integer of any length. Containers of the built-in kinds (subclasses too,
    read through their base's methods), enums, pydantic models and dataclasses (``Name(f=…)``)
    are written here, sets sorted, no object address; a type whose ``__repr__`` is the interpreter's
    has it run. A type with a ``__repr__`` of its own has it run only when ``run_own`` (a tool's
    result, the caller's own code): the provider objects of a model's output may return 500 MB
    from it, or never return, so they read ``<module.Type object>``. Never raises."""
    writer = _Repr(limit, run_own)
    writer.write(value, 0)
    return "".join(writer.parts)


_REPR_DEPTH: Final = 32
_DEFAULT_REPR: Final[object] = object.__repr__
_SHOWN: Final = frozenset(
    {complex, range, slice, _dt.date, _dt.datetime, _dt.time, _dt.timedelta, _dt.timezone, Decimal, uuid.UUID}
    | {pathlib.PurePosixPath, pathlib.PosixPath, pathlib.PureWindowsPath, types.FunctionType}
    | {types.BuiltinFunctionType}
)
"""Types whose ``repr`` (the interpreter's, or the standard library's) reads nothing they hold that
could be long or run other code: a provider's object of one of them is shown as itself."""
_OPENING: Final = {list: ("[", "]"), tuple: ("(", ")"), dict: ("{", "}"), deque: ("deque([", "])")}


class _Repr:
    """One :func:`bounded_repr`: the text so far and the characters it may still take."""

    __slots__ = ("left", "parts", "path", "run_own")

    def __init__(self, limit: int, run_own: bool) -> None:
        self.parts: list[str] = []
        self.left = limit
        self.path: set[int] = set()
        self.run_own = run_own

    def put(self, text: str) -> None:
        if self.left < 0:  # cut already
            return
        if len(text) > self.left:  # the last piece: cut, and nothing more is written
            text = text[: max(self.left, 0)] + "…"
            self.left = -1
        else:
            self.left -= len(text)
        self.parts.append(text)

    def write(self, value: object, depth: int) -> None:
        if self.left < 0:
            return
        try:
            self._write(value, depth)
        except Exception as exc:  # the value's own code raised: it alone is the placeholder
            self.put(unshowable(value, exc))

    def _write(self, value: Any, depth: int) -> None:
        kind = type(value)
        if isinstance(value, str):
            self.put(str.__repr__(str.__getitem__(value, slice(0, self.left + 1))))
        elif isinstance(value, bytes | bytearray):
            self.put(bytes.__repr__(memoryview(value)[: self.left + 1].tobytes()))
        elif kind is bool or value is None or kind is float:
            self.put(repr(value))
        elif isinstance(value, enum.Enum):
            self.put(f"<{type_name(value)}.{str.__str__(value._name_)}: ")
            self.write(value._value_, depth + 1)
            self.put(">")
        elif isinstance(value, int):
            try:
                self.put(int.__repr__(value))
            except ValueError:  # past the interpreter's digit limit
                self.put(f"<int of {int.bit_length(value)} bits>")
        elif isinstance(value, float):
            self.put(float.__repr__(value))
        elif isinstance(value, list | tuple | dict | set | frozenset | deque):
            self._container(value, depth)
        elif is_model(value):
            self._fields(value, type_name(value), model_pairs(value) or (), depth)
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            names = (field.name for field in dataclasses.fields(value) if field.repr)
            self._fields(value, type_name(value), field_pairs(value, names), depth)
        elif kind is types.SimpleNamespace:
            self._fields(value, "namespace", dict.items(vars(value)), depth)
        elif isinstance(value, type):
            self.put(type.__repr__(value))
        elif getattr(kind, "__repr__", None) is _DEFAULT_REPR or not (self.run_own or kind in _SHOWN):
            module = str.__str__(getattr(kind, "__module__", None) or "builtins")
            named = type_name(value) if module == "builtins" else f"{module}.{type_name(value)}"
            self.put(f"<{named} object>")
        else:  # a repr of the interpreter's that reads nothing held, or the caller's own (``run_own``)
            self.put(shown_repr(str.__str__(repr(value))[: self.left + 1]))

    def _container(self, value: Any, depth: int) -> None:
        base = next(kind for kind in (list, tuple, dict, set, frozenset, deque) if isinstance(value, kind))
        if base is set or base is frozenset:
            opening = (f"{type_name(value)}({{", "})") if type(value) is not set else ("{", "}")
            if not base.__len__(value):
                self.put(f"{type_name(value)}()")
                return
        else:
            opening = _OPENING[base]
        if id(value) in self.path or depth >= _REPR_DEPTH:
            self.put(f"{opening[0]}...{opening[1]}")
            return
        self.path.add(id(value))
        self.put(opening[0])
        try:
            if base is dict:
                self._items(dict.items(value), depth, pairs=True)
            elif base is set or base is frozenset:
                self._sorted(value, depth)
            else:
                self._items(base.__iter__(value), depth)
                if base is tuple and tuple.__len__(value) == 1:
                    self.put(",")
        finally:
            self.path.discard(id(value))
        self.put(opening[1])

    def _items(self, items: Iterable[Any], depth: int, pairs: bool = False) -> None:
        for at, item in enumerate(items):
            if self.left < 0:
                return
            if at:
                self.put(", ")
            if pairs:
                self.write(item[0], depth + 1)
                self.put(": ")
            self.write(item[1] if pairs else item, depth + 1)

    def _sorted(self, value: Any, depth: int) -> None:
        """The items of a set, each written within an equal share of what is left, sorted."""
        share = max(self.left // max(len(value), 1), 16)
        texts = []
        for item in value:
            one = _Repr(share, self.run_own)
            one.path = self.path
            one.write(item, depth + 1)
            texts.append("".join(one.parts))
        for at, text in enumerate(sorted(texts)):
            if self.left < 0:
                return
            self.put(f", {text}" if at else text)

    def _fields(self, value: Any, name: str, pairs: Iterable[tuple[str, Any]], depth: int) -> None:
        if id(value) in self.path or depth >= _REPR_DEPTH:
            self.put(f"{name}(...)")
            return
        self.path.add(id(value))
        self.put(f"{name}(")
        try:
            for at, (key, item) in enumerate(pairs):
                if self.left < 0:
                    return
                self.put(f"{', ' if at else ''}{str.__str__(key)}=")
                self.write(item, depth + 1)
        finally:
            self.path.discard(id(value))
        self.put(")")
