"""Canonical JSON and digests: the form ``content_hash``, byte budgets and argument digests use.

Two forms live here. :func:`canonical_json` is exact RFC 8785 (the C encoder where its output
is RFC 8785, ``rfc8785`` otherwise): :func:`args_digest` and the idempotency key hash it, because
they bind approvals and ledger entries to a call's arguments and must never drift. Everything
else uses the fast canonical form below.

The canonical form is ``json.dumps(value, sort_keys=True, separators=(",", ":"),
ensure_ascii=False, allow_nan=False)`` of the *normalized* value, encoded as UTF-8. For the values
tools usually return (objects, arrays, strings, integers below 2**53, booleans, null) it is byte
for byte RFC 8785. It differs in two corners, on purpose, because it is computed on every tool call
and the C encoder is an order of magnitude faster than a full JCS implementation: floats are
written with Python's ``repr`` (``1e+21`` for JCS, ``1e+21`` here too, but ``1.0`` here where JCS
writes ``1``; a negative zero is ``0.0``, one number with it), and keys are sorted by code point
rather than by UTF-16 code unit (they differ only for keys with characters outside the Basic
Multilingual Plane). Hashes are therefore stable inside
actionspace but not comparable with other JCS implementations for float-bearing data.

``normalize`` turns any Python value into plain JSON: pydantic models through
``model_dump(mode="json")`` (their fields when the dump fails or would cost past the budget,
``_encoder.dump_within``), dataclasses as objects of their
fields, dates as ISO 8601, enums by value, numpy-like arrays and scalars through ``tolist`` (an
array past a million items keeps its first rows: a cut), sets sorted, bytes decoded as UTF-8,
a negative zero as ``0.0``, non-finite floats as the strings ``"NaN"``, ``"Infinity"``,
``"-Infinity"``, and anything else as its ``repr`` with no object address in it
(``"<Row object>"``). A value or key whose conversion raises (its ``repr`` or ``str``, its
mapping's ``items()``, a dataclass field) alone becomes a placeholder naming its type and what was
raised, ``"<Row object: cannot be shown (RuntimeError)>"`` (a ``str`` key keeps its characters).
A container, dataclass or model inside itself is ``"<cycle>"``. ``normalize`` itself does not
raise for what a tool returns.

Nothing is lost silently. Keys that write as one text (``1`` and ``"1"``, two objects that print
alike) are all kept: a ``str`` key keeps the text, another a distinct name naming its type
(:func:`distinct_key`: ``"1 (int)"``), chosen whatever order the mapping held them in
(:func:`~actionspace._placeholders.named_keys`), so equal results hash alike. Containers nested
deeper than :data:`_MAX_DEPTH` become ``"<nested too deep>"`` and integers too long to print
``"<int of N bits>"``: those are cuts, which :func:`normalize_checked` reports (a shaped
observation is then ``complete=false``). So is what the budget of :mod:`actionspace._encoder`
leaves out (``"<too large>"``): what sharing multiplies (a list shared down forty levels), a
container that holds more than its ``len()`` says or never ends. ``dumps_plain`` and
``strict_dumps`` (the C encoder) live there, re-exported here.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import enum
import hashlib
import json
import math
import uuid
from collections import deque
from collections.abc import Iterable, Mapping
from decimal import Decimal
from pathlib import PurePath
from typing import Any, Final

import rfc8785

from actionspace._encoder import (
    CONTAINER_UNITS,
    LONG_TEXT,
    NORMALIZE_UNITS,
    TEXT_UNIT,
    TOO_DEEP,
    TOO_LARGE,
    WITHIN,
    clip_end,
    clip_middle,
    dump_verdict,
    dumps_plain,
    json_copy,
    strict_dumps,
    within,
)
from actionspace._placeholders import (
    distinct_key,
    field_pairs,
    is_model,
    model_pairs,
    named_keys,
    shown_repr,
    stable_repr,
    unshowable,
)

__all__ = [
    "args_digest",
    "canonical_bytes",
    "canonical_json",
    "canonical_text",
    "clip_end",
    "clip_middle",
    "content_hash",
    "digest_json",
    "distinct_key",
    "dumps_plain",
    "json_copy",
    "json_size",
    "normalize",
    "normalize_checked",
    "normalize_key",
    "normalize_within",
    "strict_dumps",
    "unshowable",
]

_MAX_DEPTH: Final = 200
"""Nesting below this depth is replaced by a placeholder string (protects the C encoder's stack)."""


def canonical_text(value: object) -> str:
    """The canonical JSON text of ``value`` (normalized first when it is not plain JSON)."""
    try:
        return dumps_plain(value)
    except (TypeError, ValueError, RecursionError):
        return dumps_plain(normalize(value))


def canonical_bytes(value: object) -> bytes:
    """The canonical JSON of ``value`` as UTF-8 bytes (lone surrogates pass through)."""
    return canonical_text(value).encode("utf-8", "surrogatepass")


def content_hash(value: object) -> str:
    """sha256 hex of the canonical JSON of ``value``."""
    return hashlib.sha256(canonical_bytes(value)).hexdigest()


_SAFE_INT: Final = 2**53 - 1
"""Largest magnitude RFC 8785 writes as an integer (``rfc8785`` rejects larger ones)."""
_RFC_DEPTH: Final = 64
"""Deeper values take ``rfc8785`` itself."""


def _rfc_plain(value: Any, depth: int) -> bool:
    """True when :data:`dumps_plain` writes ``value`` exactly as RFC 8785 does: objects with ASCII
    keys (code point order is then UTF-16 order), arrays, strings, safe integers, booleans and
    null, of exactly those types."""
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        safe: bool = -_SAFE_INT <= value <= _SAFE_INT
        return safe
    if depth >= _RFC_DEPTH:
        return False
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or not key.isascii() or not _rfc_plain(item, depth + 1):
                return False
        return True
    if kind is list:
        return all(_rfc_plain(item, depth + 1) for item in value)
    return False


def canonical_json(value: Any) -> bytes:
    """The RFC 8785 canonical JSON of ``value`` as UTF-8 bytes, exactly as ``rfc8785.dumps``.

    Plain values (see :func:`_rfc_plain`) are written by the C encoder; anything else (floats,
    other key characters, subclasses, tuples, deep nesting) by ``rfc8785``. Raises
    ``rfc8785.CanonicalizationError`` (a ``ValueError``) for what RFC 8785 cannot encode.
    """
    if _rfc_plain(value, 0):
        try:
            return dumps_plain(value).encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: rfc8785 raises its own error for it
            pass
    return rfc8785.dumps(value)


def digest_json(value: Any) -> bytes:
    """What digests of arguments hash: :func:`canonical_json` of ``value``. When it holds an
    integer beyond ±(2**53 − 1), which RFC 8785 cannot write (a 64-bit id, say): RFC 8785 of the
    value with each such integer as the float it equals exactly, when every one does (so ``2**60``
    and ``1.152921504606846976e18``, one JSON number, are one text); else ``b"x"`` and RFC 8785
    with every number of that size written as its exact integer (numbers, strings and key order
    otherwise as RFC 8785 has them, so ``1.0`` and ``1`` still agree, and two numbers share a text
    only when they are equal; the ``x`` keeps it apart from any RFC 8785 text, which never starts
    so).

    Raises ``ValueError`` (``rfc8785.CanonicalizationError`` mostly) for what neither can encode:
    non-finite floats, unpaired surrogates, integers too long to print, values that are not JSON.
    """
    try:
        return canonical_json(value)
    except rfc8785.IntegerDomainError:
        pass
    as_floats = _as_floats(value)
    if as_floats is not _INEXACT:
        return canonical_json(as_floats)
    out: list[bytes] = [b"x"]
    _exact_jcs(value, out)
    return b"".join(out)


_INEXACT: Final = object()


def _as_floats(value: Any) -> Any:
    """``value`` with each integer beyond ±(2**53 − 1) as the float equal to it, or
    :data:`_INEXACT` when one has no such float."""
    if isinstance(value, int) and not isinstance(value, bool):
        if abs(value) <= _SAFE_INT:
            return value
        try:
            as_float = float(value)
        except OverflowError:
            return _INEXACT
        return as_float if int(as_float) == value else _INEXACT
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            out[key] = converted = _as_floats(item)
            if converted is _INEXACT:
                return _INEXACT
        return out
    if isinstance(value, list | tuple):
        items = [_as_floats(item) for item in value]
        return _INEXACT if any(item is _INEXACT for item in items) else items
    return value


def _exact_jcs(value: Any, out: list[bytes]) -> None:
    """Append RFC 8785 of ``value`` to ``out``, integers beyond its domain written in full."""
    if isinstance(value, int) and not isinstance(value, bool):
        out.append(str(int(value)).encode("ascii"))  # ValueError past the interpreter's digit limit
    elif isinstance(value, float) and value.is_integer() and abs(value) > _SAFE_INT:
        # RFC 8785 pads such a float's shortest digits with zeros, the text of another integer
        out.append(str(int(value)).encode("ascii"))
    elif isinstance(value, list | tuple):
        out.append(b"[")
        for at, item in enumerate(value):
            out.append(b"," if at else b"")
            _exact_jcs(item, out)
        out.append(b"]")
    elif isinstance(value, dict):
        if not all(isinstance(key, str) for key in value):
            raise rfc8785.CanonicalizationError("object keys must be strings")
        out.append(b"{")
        for at, key in enumerate(sorted(value, key=lambda k: k.encode("utf-16be", "surrogatepass"))):
            out.extend((b"," if at else b"", rfc8785.dumps(key), b":"))
            _exact_jcs(value[key], out)
        out.append(b"}")
    elif value is None or isinstance(value, bool | str | float):
        out.append(rfc8785.dumps(value))
    else:
        raise rfc8785.CanonicalizationError(f"{type(value).__name__} is not JSON")


def args_digest(arguments: Any) -> str:
    """sha256 hex of :func:`digest_json` of ``arguments`` (a call's arguments): their RFC 8785
    canonical JSON, unless an integer lies beyond RFC 8785's domain.

    Raises ``rfc8785.CanonicalizationError`` (a ``ValueError``) for values neither form can
    encode: non-finite floats, unpaired surrogates, values that are not JSON.
    """
    return hashlib.sha256(digest_json(arguments)).hexdigest()


def json_size(value: object) -> int:
    """Bytes of the canonical JSON of ``value``."""
    text = canonical_text(value)
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def normalize(value: object) -> Any:
    """``value`` as plain JSON (see the module docstring for the conversions)."""
    return _normalize(value, 0, _Walk())


def normalize_checked(value: object) -> tuple[Any, bool]:
    """:func:`normalize` of ``value``, and True when part of it was cut: nesting deeper than
    :data:`_MAX_DEPTH`, or an integer too long to print (each replaced by a placeholder)."""
    walk = _Walk()
    plain = _normalize(value, 0, walk)
    return plain, walk.cut


def normalize_within(value: object, inside: Iterable[int]) -> Any:
    """:func:`normalize` of ``value`` as it reads inside the containers whose ids are ``inside``
    (one of them met again is ``"<cycle>"``)."""
    walk = _Walk()
    walk.path.update(inside)
    return _normalize(value, 0, walk)


class _Walk:
    """One normalization: the containers being walked (cycles), whether anything was cut, and the
    units it may still spend (see :mod:`actionspace._encoder`)."""

    __slots__ = ("cut", "deep", "left", "path", "texts")

    def __init__(self) -> None:
        self.path: set[int] = set()
        self.cut = False
        self.deep = False  # inside a model whose dump nests too deep (TOO_DEEP): models unchecked
        self.left = NORMALIZE_UNITS
        self.texts: dict[int, object] = {}  # the long texts (and str subclasses) met, kept alive here


def _text(value: object, text: str, walk: _Walk) -> str:
    """``text`` (``value`` as plain text: a long ``str``, or a copy of a subclass's); met again,
    it is charged (sharing would multiply it), the marker when the budget cannot afford it."""
    if id(value) not in walk.texts:
        walk.texts[id(value)] = value
        return text
    cost = len(text) // TEXT_UNIT
    if cost > walk.left:
        walk.cut = True
        return TOO_LARGE
    walk.left -= cost
    return text


def _normalize(value: object, depth: int, walk: _Walk) -> Any:
    kind = type(value)
    if kind is str:
        return value if len(value) < LONG_TEXT else _text(value, value, walk)  # type: ignore[arg-type]
    if value is None or kind is bool:
        return value
    if kind is int:
        return _int(value, walk)  # type: ignore[arg-type]
    if kind is float:
        return _float(value)  # type: ignore[arg-type]
    try:
        if isinstance(value, enum.Enum):
            return _normalize(value.value, depth, walk)
        if isinstance(value, int):
            return _int(int(value), walk)
        if isinstance(value, float):
            return _float(float(value))
        if isinstance(value, str):
            return _text(value, str(value), walk)
        if depth >= _MAX_DEPTH:
            walk.cut = True
            return "<nested too deep>"
        if isinstance(value, Mapping | list | tuple | deque | set | frozenset):
            return _container(value, depth, walk)
        return _leaf(value, depth, walk)
    except Exception as exc:  # the value's own code raised: a tool's result is never lost for it
        return unshowable(value, exc)


def _container(value: Any, depth: int, walk: _Walk) -> Any:
    marker = id(value)
    if marker in walk.path:
        return "<cycle>"
    if walk.left < 0:  # the budget is spent: this container is not read at all
        walk.cut = True
        return TOO_LARGE
    walk.path.add(marker)
    try:
        if isinstance(value, Mapping):
            return _mapping(value.items(), depth, walk, value)
        if dataclasses.is_dataclass(value):
            return _mapping(field_pairs(value, (f.name for f in dataclasses.fields(value))), depth, walk)
        if not isinstance(value, list | tuple | deque | set | frozenset):  # a model whose dump failed
            return _mapping(model_pairs(value) or (), depth, walk)
        afforded, more = _afforded(value, walk, value)
        items: list[Any] = []
        append = items.append
        for item in afforded:
            if walk.left < 0:
                more = True
                break
            append(_normalize(item, depth + 1, walk))
        if isinstance(value, set | frozenset):
            items.sort(key=canonical_text)
        if more:  # the budget ran out (or the container holds more than its len() said)
            walk.cut = True
            items.append(TOO_LARGE)
        return items
    finally:
        walk.path.discard(marker)


def _mapping(
    pairs: Iterable[tuple[Any, Any]], depth: int, walk: _Walk, owner: object = None
) -> dict[str, Any]:
    afforded, more = _afforded(pairs, walk, owner)
    entries: list[tuple[str, Any, Any]] = []
    for key, item in afforded:
        if walk.left < 0:
            more = True
            break
        text = _key(key)
        walk.left -= len(text) // TEXT_UNIT
        entries.append((text, key, _normalize(item, depth + 1, walk)))
    out = {text: plain for text, _, plain in entries}
    if len(out) != len(entries):
        # keys that write as one text: all kept, named the same whatever order the mapping held
        names = named_keys(entries, canonical_text)
        out = {name: plain for name, (_, _, plain) in zip(names, entries, strict=True)}
    if more:  # the marker as a key of its own, unless the mapping has that key
        walk.cut = True
        out.setdefault(TOO_LARGE, TOO_LARGE)
    return out


_SIZED: Final = frozenset({list, tuple, set, frozenset, deque, type({}.items())})
"""Containers whose ``len`` is their number of items, read without running the value's own code."""


def _afforded(values: Iterable[Any], walk: _Walk, owner: object) -> tuple[Iterable[Any], bool]:
    """``values`` (of ``owner``, which may say how many it holds) as far as ``walk`` can afford
    them, each a unit besides the container's own; and whether some were left unread."""
    if type(values) in _SIZED:
        count = len(values)  # type: ignore[arg-type]
        if count + CONTAINER_UNITS <= walk.left:
            walk.left -= count + CONTAINER_UNITS
            return values, False
    taken, more = within(values, walk.left - CONTAINER_UNITS, owner)
    walk.left -= len(taken) + CONTAINER_UNITS
    return taken, more


def _leaf(value: object, depth: int, walk: _Walk) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", "replace")
    dump = getattr(type(value), "model_dump", None)
    if callable(dump):
        verdict = TOO_DEEP if walk.deep and is_model(value) else None  # inside one too deep to dump
        try:
            if verdict is None and (verdict := dump_verdict(value, walk.left)) is WITHIN:
                return _normalize(dump(value, mode="json"), depth + 1, walk)  # else sharing multiplies
        except Exception:  # a model holding itself: its fields, where the cycle closes "<cycle>"
            pass
        if not is_model(value):
            return shown_repr(repr(value))
        held, walk.deep = walk.deep, verdict is TOO_DEEP
        try:
            return _container(value, depth, walk)
        finally:
            walk.deep = held
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _container(value, depth, walk)
    if isinstance(value, _dt.datetime | _dt.date | _dt.time):
        return value.isoformat()
    if isinstance(value, Decimal | uuid.UUID | PurePath):
        return str(value)
    if callable(getattr(type(value), "tolist", None)) and getattr(type(value), "dtype", None) is not None:
        return _array(value, depth, walk)
    return shown_repr(repr(value))


_ARRAY_ITEMS: Final = 1 << 20
"""Most items of a numpy-like array converted; a larger one keeps its first rows (a cut)."""


def _array(value: Any, depth: int, walk: _Walk) -> Any:
    """A numpy-like value (``tolist`` and ``dtype``: an array, a numpy scalar, a pandas series) as
    its values, never its ``repr``, which elides what it cannot show (``[0., 0., ..., 0.]``)."""
    size = getattr(value, "size", 0)
    if type(size) is int and size > _ARRAY_ITEMS and getattr(value, "ndim", 0) >= 1:
        value = value[: max(1, _ARRAY_ITEMS * len(value) // size)]
        walk.cut = True
    return _normalize(value.tolist(), depth, walk)


def _int(value: int, walk: _Walk) -> Any:
    try:
        int.__repr__(value)
    except ValueError:
        walk.cut = True
        return f"<int of {value.bit_length()} bits>"
    return int(value)


def _float(value: float) -> Any:
    if value == 0:
        return 0.0  # -0.0 too: one JSON number, written ``0`` by RFC 8785
    if math.isfinite(value):
        return float(value)
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def normalize_key(key: object) -> str:
    """An object key as :func:`normalize` writes it (a string)."""
    return _key(key)


def _key(key: object) -> str:
    try:
        if isinstance(key, str):
            return str(key)
        if key is None or isinstance(key, bool | int | float):
            text = canonical_text(key)
            return text if not text.startswith('"') else str(json.loads(text))
        if isinstance(key, enum.Enum):
            return _key(key.value)
        if type(key) is tuple or isinstance(key, frozenset):
            return stable_repr(key)
        return shown_repr(str(key))
    except Exception as exc:  # the key's own code raised: the key alone becomes a placeholder
        return str.__str__(key) if issubclass(type(key), str) else unshowable(key, exc)
