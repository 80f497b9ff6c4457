"""The C JSON encoder every canonical text is written with, and bounds on what one tool result may
cost to write, whatever it holds.

A result can cost far more to write than to hold: ``x = [x, x]`` forty levels deep is forty small
lists in memory and 2**40 values as text; ``[s] * 100_000``, ``s`` a 1 MB string, is 800 KB in
memory and 100 GB as text; a mapping's ``items()`` may never end. Each pass that writes a result
therefore counts what it writes in *units* (one a value, 16 more an object or array, and one
per 16 characters of a long text each time it is written again; a text written once costs what
it holds) and stops at its budget:

* the C encoder behind ``dumps_plain`` runs only on values a walk found within
  :data:`PLAIN_UNITS` and made of JSON types it writes without running any of the value's own
  code (inside it nothing could stop that code, and what it raises would escape);
* ``normalize`` keeps :data:`NORMALIZE_UNITS` (it feeds the observation, which shows a few
  kilobytes of it);
* ``whole_json`` writes :data:`WHOLE_UNITS` into the artifact;
* a pydantic model is dumped (``model_dump``, whose Rust code no budget can stop) only when
  :func:`dump_within` found its dump within what the pass may still write; else the pass reads
  its fields itself, within its budget, as it reads a model whose dump fails.

Past its budget a pass writes :data:`TOO_LARGE` in place of the value it could not afford, and
reads nothing more of the containers it is in: a cut, reported as every other cut is (a shaped
observation is then ``complete=false``). A flat container of at most :data:`_FLAT_ITEMS` scalars
costs a type check of its items and nothing else: the usual result pays no walk.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from gc import get_referents
from itertools import compress, islice, repeat
from operator import is_
from sys import getrecursionlimit
from typing import Any, Final

__all__ = [
    "CONTAINER_UNITS",
    "LONG_TEXT",
    "NORMALIZE_UNITS",
    "PLAIN_UNITS",
    "TEXT_UNIT",
    "TOO_DEEP",
    "TOO_LARGE",
    "UNORDERED",
    "WHOLE_UNITS",
    "WITHIN",
    "check_plain",
    "clip_end",
    "clip_middle",
    "dump_verdict",
    "dump_within",
    "dumps_plain",
    "json_copy",
    "strict_dumps",
    "within",
    "writes_within",
]

PLAIN_UNITS: Final = 1 << 24
"""Most units the C encoder writes in one ``dumps_plain`` (about a second of its time)."""
NORMALIZE_UNITS: Final = 1 << 20
"""Most units one ``normalize`` keeps (about a second of its time)."""
WHOLE_UNITS: Final = 1 << 24
"""Most units one ``whole_json`` writes (an artifact of some hundreds of megabytes)."""
CONTAINER_UNITS: Final = 16
"""Units an object or array costs besides its items (walking one costs what a dozen values do)."""
TEXT_UNIT: Final = 16
"""Characters of text that cost one unit more, each time a long text is written again."""
LONG_TEXT: Final = 256
"""Texts at least this long are counted when written again (one text held in many places): a
text written once costs what it holds, however long."""
TOO_LARGE: Final = "<too large>"
"""What a pass writes in place of the first value past its budget."""

_FLAT_ITEMS: Final = 64
_SMALL_PARTS: Final = 128
_SCALARS: Final = frozenset({str, int, float, bool, type(None)})
_CONTAINERS: Final = frozenset({dict, list, tuple})
_PLAIN: Final = _SCALARS | _CONTAINERS
_STR: Final = frozenset({str})
_DICT: Final = frozenset({dict})
_KEYS: Final = _SCALARS
_is_container = _CONTAINERS.__contains__
_long = LONG_TEXT.__le__


def check_plain(value: Any) -> None:
    """Raise ``TypeError`` unless the C encoder writes ``value`` without running any of its own
    code (objects are exact dicts with keys of exact types, arrays lists and tuples, scalars of
    JSON's types or their subclasses, which it reads as their base type), and ``ValueError`` when
    writing it would cost more than :data:`PLAIN_UNITS` (what is shared counted each time it is
    written) or nest deeper than the interpreter's recursion limit."""
    kind = type(value)
    if kind is dict:
        if (
            len(value) <= _FLAT_ITEMS
            and _STR.issuperset(map(type, value))
            and _SCALARS.issuperset(map(type, value.values()))
        ):
            return
    elif kind is list:
        if len(value) <= _FLAT_ITEMS and _SCALARS.issuperset(map(type, value)):
            return
    elif kind in _SCALARS:
        return
    if not _small(value):
        _walk(value)


def _small(value: Any) -> bool:
    """Whether ``value`` writes at most :data:`_SMALL_PARTS` parts (so sharing cannot multiply
    them) and no long text; read part by part, cheaper than :func:`_walk` for the usual small
    nested result. False (nothing known) past that many parts or at a long text."""
    left = _SMALL_PARTS
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict:
            pairs: Iterable[Any] = item.items()
        elif kind is list or kind is tuple:
            pairs = enumerate(item)
        else:
            raise TypeError(f"not a JSON value the C encoder writes alone: {kind.__name__}")
        left -= len(item)
        if left < 0:
            return False
        for key, part in pairs:
            if kind is dict and type(key) is not str and type(key) not in _KEYS:
                raise TypeError("a key the C encoder does not write alone")
            part_kind = type(part)
            if part_kind is str:
                if len(part) >= LONG_TEXT:  # it may be held many times: the walk counts it
                    return False
            elif part_kind is dict or part_kind is list or part_kind is tuple:
                stack.append(part)
            elif part_kind not in _SCALARS:
                _scalar_kinds({part_kind})
    return True


def _walk(value: Any) -> None:
    """``value`` level by level, each level's containers read at once by the collector's own
    traversal (``gc.get_referents``: their items, and their keys unless all are exact ``str``),
    so the walk costs a few C passes over what the C encoder will write, not a Python step per
    part. A level is counted before it is read, so what sharing multiplies never is; a long text
    met again is counted again."""
    left = PLAIN_UNITS
    level: list[Any] = [value]
    deepest = getrecursionlimit()
    seen: dict[int, str] = {}  # the long texts met, by identity
    while level:
        deepest -= 1
        left -= sum(map(len, level)) + CONTAINER_UNITS * len(level)
        if left < 0 or deepest < 0:
            raise ValueError(f"writing it costs more than {PLAIN_UNITS} units, or nests too deep")
        parts = get_referents(*level)
        types = list(map(type, parts))
        kinds = set(types)
        if not kinds <= _PLAIN:
            _scalar_kinds(kinds - _PLAIN)
            _keys(level)
        if str in kinds:
            texts = list(compress(parts, map(is_, types, repeat(str))))
            if max(map(len, texts)) < LONG_TEXT:
                texts = []  # the usual level: no long text, nothing to look up (one C pass)
            for text in compress(texts, map(_long, map(len, texts))):
                if id(text) in seen:  # held before: written again
                    left -= len(text) // TEXT_UNIT
                    if left < 0:
                        raise ValueError(f"writing it costs more than {PLAIN_UNITS} units")
                else:
                    seen[id(text)] = text
        level = list(compress(parts, map(_is_container, types))) if not kinds.isdisjoint(_CONTAINERS) else []


def writes_within(value: Any, left: int = PLAIN_UNITS) -> bool:
    """Whether writing ``value`` (JSON, or anything holding models, dataclasses and containers)
    costs at most ``left`` units, what sharing multiplies counted each time it is written: a few
    plain parts cost a type check each, anything else :func:`dump_within`'s walk."""
    try:
        if _small(value):
            return True
    except TypeError:  # a type the walk below reads
        pass
    try:
        return dump_within(value, left)
    except Exception:  # a type's own attribute lookup raised: nothing known, so not within
        return False


def dump_within(value: Any, left: int) -> bool:
    """Whether a model's (or a dataclass's) dump costs at most ``left`` units, what sharing
    multiplies counted each time it is written, as :func:`_walk` counts: a pydantic model is the
    dicts it holds (its fields, extra and private ones), a dataclass its fields, a container
    (subclasses, sets and deques too) its items; anything else one value. Read level by level
    without running any of the value's own code, at most the interpreter's recursion limit deep
    (a dump nests no deeper: pydantic refuses it). A model of a few plain parts costs a type check
    of each alone."""
    return dump_verdict(value, left) in _AFFORDED


WITHIN: Final = "within"
""":func:`dump_verdict` of a dump within its budget."""
TOO_DEEP: Final = "too deep"
""":func:`dump_verdict` of a dump nested past the recursion limit: so is every model on its deepest
path, and checking each of them again would walk that path once for each (quadratic in a chain of
ten thousand models). A pass that reads such a model field by field reads what it holds the same
way, unchecked."""
UNORDERED: Final = "holds a set"
""":func:`dump_verdict` of a dump within its budget that would list a set in the order it happens
to iterate (which the string hash seed and the order it was filled decide): read field by field,
its sets are written sorted, as everywhere else."""
_AFFORDED: Final = frozenset({WITHIN, UNORDERED})


def dump_verdict(value: Any, left: int) -> str:
    """:func:`dump_within` of ``value``, and why not: :data:`WITHIN`, :data:`TOO_DEEP`, or
    ``"too costly"`` (past ``left`` units)."""
    fields = getattr(value, "__dict__", None)
    if type(fields) is dict and getattr(value, "__pydantic_extra__", None) is None:
        if _SCALARS.issuperset(map(type, fields.values())):
            return WITHIN  # the usual model: scalars only, nothing to share
        try:
            if _small(fields):
                return WITHIN  # a few plain parts, no long text: nothing sharing could multiply
        except TypeError:  # a model or another type inside: the walk below reads it
            pass
    level: list[Any] = []
    groups: dict[type, list[Any]] = {type(value): [value]}
    deepest = getrecursionlimit()
    seen: dict[int, str] = {}
    unordered = False
    while level or groups:
        deepest -= 1
        left -= sum(map(len, level)) + CONTAINER_UNITS * (len(level) + sum(map(len, groups.values())))
        if deepest < 0:
            return TOO_DEEP
        if left < 0:
            return _COSTLY
        parts = get_referents(*level)
        level = []
        for kind, values in groups.items():
            if isinstance(getattr(kind, "model_fields", None), Mapping):  # pydantic: its dicts, read next
                held = get_referents(*values)  # its __dict__, extra and private fields, type, field set
                level.extend(compress(held, map(_DICT.__contains__, map(type, held))))
                continue
            base = next((base for base in _SIZED_BASES if issubclass(kind, base)), None)
            if base is not None:
                left -= sum(map(base.__len__, values))  # its own __len__ may say anything
                if left < 0:
                    return _COSTLY
            parts.extend(get_referents(*values))
        types = list(map(type, parts))
        kinds = set(types)
        if not kinds.issubset(_PLAIN) and any(issubclass(kind, _SETS) for kind in kinds):
            unordered = True
        if str in kinds:
            texts = list(compress(parts, map(_STR.__contains__, types)))
            for text in compress(texts, map(_long, map(len, texts))):
                if id(text) in seen:  # held before: written again
                    left -= len(text) // TEXT_UNIT
                else:
                    seen[id(text)] = text
        if not kinds.isdisjoint(_CONTAINERS):
            level.extend(compress(parts, map(_is_container, types)))
        groups = {
            kind: list(compress(parts, map(frozenset((kind,)).__contains__, types)))
            for kind in kinds - _PLAIN
            if _holds_parts(kind)
        }
    return _COSTLY if left < 0 else UNORDERED if unordered else WITHIN


_COSTLY: Final = "too costly"
_SETS: Final = (set, frozenset)


_SIZED_BASES: Final = (dict, list, tuple, set, frozenset, deque)


def _holds_parts(kind: type) -> bool:
    """Whether a dump writes what a value of ``kind`` holds (its parts are counted), not one value."""
    return (
        issubclass(kind, _SIZED_BASES)
        or callable(getattr(kind, "model_dump", None))
        or (dataclasses.is_dataclass(kind) and not issubclass(kind, type))
    )


def _scalar_kinds(kinds: set[type]) -> None:
    """``TypeError`` unless each of ``kinds`` is a subclass of ``str``, ``int`` or ``float`` (an
    enum of them, say), which the C encoder writes as its base type without calling it; any other
    type, a subclass of a container included, ``normalize`` writes."""
    for kind in kinds:
        if not issubclass(kind, str | int | float) or issubclass(kind, dict | list | tuple):
            raise TypeError(f"not a JSON value the C encoder writes alone: {kind.__name__}")


def _keys(level: list[Any]) -> None:
    """``TypeError`` when an object of ``level`` has a key the C encoder's sort would call (a
    subclass of ``str`` among them: its own comparison)."""
    for item in level:
        if type(item) is dict and not _KEYS.issuperset(map(type, item)):
            raise TypeError("a key the C encoder does not write alone")


def within(values: Iterable[Any], left: int, owner: object = None) -> tuple[list[Any], bool]:
    """The first ``left`` of ``values`` (none when ``left`` is not positive), and whether there
    were more. Never more than ``len(owner)`` when ``owner`` gives one: a container whose iteration
    never ends (or goes on past what it said it holds) is read no further than that."""
    limit = max(left, 0)
    try:
        claimed = len(owner) if owner is not None else None  # type: ignore[arg-type]
    except Exception:  # the owner's own __len__ raised: the budget alone bounds the reading
        claimed = None
    if claimed is not None:
        limit = min(limit, claimed)
    taken = list(islice(values, limit + 1))
    if len(taken) > limit:
        del taken[limit:]
        return taken, True
    return taken, False


def clip_end(text: str, limit: int, length: int | None = None) -> str:
    """``text`` cut to ``limit`` characters with a marker naming how many were dropped.

    ``length`` is the length of the original when ``text`` is already a prefix of it.
    """
    total = len(text) if length is None else length
    if total <= limit:
        return text
    return f"{text[:limit]}…[+{total - limit} chars]"


def clip_middle(text: str, limit: int) -> str:
    """``text`` reduced to about ``limit`` characters: its head and tail around an omission marker."""
    if len(text) <= limit:
        return text
    head = (limit * 2 + 2) // 3
    tail = limit - head
    dropped = len(text) - head - tail
    return f"{text[:head]}…[{dropped} chars omitted]…{text[len(text) - tail :] if tail else ''}"


def json_copy(value: Any) -> Any:
    """``value`` with every object and array in it copied (mappings as dicts): what a caller
    does to the copy never reaches the original."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or kind is float or value is None:
        return value  # the usual leaves, before the slower ABC checks
    if kind is dict or isinstance(value, Mapping):
        return {k: json_copy(v) for k, v in value.items()}
    if kind is list or isinstance(value, list):
        return [json_copy(v) for v in value]
    if isinstance(value, tuple):
        return tuple(json_copy(v) for v in value)
    return value


def _reject(value: object) -> object:
    raise TypeError(f"not JSON: {type(value).__name__}")


def _c_encoder(item: str, key: str, *, sort_keys: bool) -> Callable[[Any], str]:
    """The C JSON encoder built once (no NaN, non-ASCII kept), or ``json.JSONEncoder``'s.

    Built without the circular-reference check (its marks would be shared by threads): a cycle
    raises ``RecursionError``, not ``ValueError``.
    """
    import json.encoder

    c_make_encoder = getattr(json.encoder, "c_make_encoder", None)
    quote = json.encoder.encode_basestring
    if c_make_encoder is not None:
        try:
            chunks = c_make_encoder(None, _reject, quote, None, key, item, sort_keys, False, False)
        except TypeError:  # pragma: no cover - a future signature change
            chunks = None
        if chunks is not None:
            join = "".join

            def dumps(value: Any) -> str:
                if type(value) is str:  # the C encoder takes containers only
                    text: str = quote(value)
                    return text
                return join(chunks(value, 0))

            return dumps
    encoder = json.JSONEncoder(  # pragma: no cover - an interpreter without the C accelerator
        sort_keys=sort_keys, separators=(item, key), ensure_ascii=False, allow_nan=False, default=_reject
    )
    return encoder.encode  # pragma: no cover


_sorted_dumps: Final = _c_encoder(",", ":", sort_keys=True)
_NEGATIVE_ZERO: Final = re.compile(r"-0\.0(?![0-9eE])")


def dumps_plain(value: Any) -> str:
    """Canonical text of plain JSON (else TypeError, ValueError or RecursionError: callers normalize);
    a negative zero is ``0.0``, one JSON number with it (RFC 8785 writes both ``0``). Plain means
    exact JSON types (no subclass, so none of the value's own code runs) costing at most
    :data:`PLAIN_UNITS` to write (``ValueError`` past it)."""
    check_plain(value)
    text = _sorted_dumps(value)
    if "-0.0" in text and _NEGATIVE_ZERO.search(text):  # rare; inside a string it reads back unchanged
        return _sorted_dumps(json.loads(text, parse_float=lambda digits: float(digits) or 0.0))
    return text


strict_dumps: Final = _c_encoder(", ", ": ", sort_keys=False)
"""``json.dumps(value, ensure_ascii=False, allow_nan=False)`` as every store writes it (keys in
their order): ``ValueError`` for NaN and infinities, ``TypeError`` for what is not JSON,
``RecursionError`` for nesting too deep (a cycle included)."""
