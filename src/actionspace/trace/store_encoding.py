"""How trace stores encode an event's data: strict JSON that never fails, and never drops an event.

:func:`encode_data` is strict first (``allow_nan=False``: a NaN or an infinity written as a JSON
number would break every reader that queries the column, SQLite's ``json_extract`` included). When
the data cannot be encoded as it is — a non-finite number, nesting deeper than the encoder's
recursion, an integer too long to print, a value that is not JSON — a safe encoder writes what it
can: non-finite numbers as strings (``"NaN"``, ``"Infinity"``), containers deeper than
:data:`MAX_DEPTH` as ``{"$truncated": "depth"}``, what is shared past :data:`_MAX_PARTS` parts as
``{"$truncated": "size"}``, other values by a bounded ``repr``
(:func:`~actionspace._placeholders.bounded_repr`: an object's own ``__repr__``, which may return
500 MB or never return, is not run; it reads ``<module.Type object>``). An event larger than
:data:`MAX_EVENT_CHARS` keeps its short top-level fields (status, tool, category, label, …) and
a digest and prefix of the rest. Whatever is given, the event is written.

Keys are written as text, as JSON has them: keys that write alike (``1`` and ``"1"``) are all
kept, a text key under its own text and each other under a distinct name (``"1 (int)"``), chosen
whatever order the mapping held them in (:func:`~actionspace._placeholders.named_keys`). Values
and keys that are not JSON are written by that bounded ``repr``, sets sorted, no object address; a
container met inside itself as ``{"$truncated": "cycle"}``: two equal events built apart, in any
order, in any process (whatever its string hash seed), are written alike. A
string holding a high surrogate followed by a low one reads back as the one character the pair
encodes (JSON has no other way to write them); an unpaired surrogate reads back as it was.

:func:`check_event` is what a store refuses outright (``ValueError``, nothing of the batch
written): a timestamp that is not a finite number, a run id or kind the store cannot hold.

:func:`bounded_raw` is what a ``model_output`` event records: the raw text itself when short, else
its length, sha256 and a prefix, with the whole kept as an artifact when a store is given; a
provider object that is not JSON is its bounded ``repr``.
"""

from __future__ import annotations

import enum
import hashlib
import json
import math
from collections.abc import Mapping
from json.encoder import encode_basestring as _quote
from typing import Any, Final, Protocol

from actionspace._canonical import canonical_text, strict_dumps, unshowable
from actionspace._encoder import writes_within
from actionspace._placeholders import bounded_repr, named_keys
from actionspace._unicode import json_for_postgres, json_for_utf8, text_for_postgres, text_for_utf8

__all__ = [
    "HEAD_KINDS",
    "MAX_DEPTH",
    "MAX_EVENT_CHARS",
    "RAW_PREFIX_CHARS",
    "Texted",
    "bounded_raw",
    "call_id_for_postgres",
    "call_id_for_utf8",
    "check_event",
    "compact_raw",
    "encode_data",
    "encode_for_postgres",
    "strict_dumps",
]

HEAD_KINDS: Final = ("run_started", "run_finished")
"""The events a run listing reads of each run (a store's ``heads``), besides its aggregate counts."""
MAX_DEPTH: Final = 64
"""Deepest nesting of containers the safe encoder writes; deeper ones are marked truncated."""
MAX_EVENT_CHARS: Final = 1_000_000
"""Largest encoded event data kept whole, in characters (about 1 MB)."""
RAW_PREFIX_CHARS: Final = 16_384
"""Characters of a long raw model output kept in its trace event."""
_MAX_SHORT: Final = 512
_FLAT_ITEMS: Final = 64
"""Most items of a flat object :func:`encode_data` writes itself: one of text keys and short texts
and scalars costs its items' parts, far under :data:`_MAX_PARTS`, so it needs no walk first."""
_HEADS: dict[str, str] = {}
"""``"key": `` as the encoder writes it, for the keys of flat objects met (payloads have few); at
most :data:`_KEPT_HEADS` keys of at most :data:`_SHORT_KEY` characters."""
_KEPT_HEADS: Final = 1024
_SHORT_KEY: Final = 64
_LEAVES: Final = frozenset({str, int, float, bool, type(None)})
_MAX_INT_DIGITS: Final = 4000
_MAX_PARTS: Final = 1 << 18
"""Most parts (values, and a unit per 512 characters of a long text) the safe encoder writes of an
event, what is shared counted each time; past them a container is ``{"$truncated": "size"}``."""
_FINITE: Final = float("inf")
_int_text: Final = int.__repr__
_float_text: Final = float.__repr__


class _PutsBytes(Protocol):
    def put(self, data: bytes) -> str: ...


class Texted(dict[str, Any]):
    """An event's ``data`` with ``text``, what :func:`encode_data` writes for it, made beside it
    by code that knows the payload's shape (a durable write's events, pipeline/_write_parts.py):
    an ASCII text of at most :data:`MAX_EVENT_CHARS` characters, so both ``utf8`` forms are it.
    Anything else sees an ordinary ``dict``; a copy (``{**data, ...}``) is one, and is encoded."""

    __slots__ = ("text",)

    text: str


def encode_data(data: Mapping[str, Any], *, utf8: bool = True) -> str:
    """The JSON text a store writes for an event's ``data`` (see the module docstring).

    ``utf8``: an unpaired surrogate in a string is written as its ``\\uXXXX`` escape, so the
    text encodes as UTF-8 and reads back the same (:func:`~actionspace._unicode.json_for_utf8`);
    False leaves it as it is (PostgreSQL's store replaces it, see :func:`encode_for_postgres`).
    """
    if type(data) is Texted:
        return data.text
    plain = data if type(data) is dict else dict(data)
    try:
        text = None
        if len(plain) <= _FLAT_ITEMS:
            # Most payloads are text keys with, each, a text of at most _MAX_SHORT characters, an
            # int, a bool, None or a finite float: written here as strict_dumps writes them (its C
            # encoder takes the same int and float texts and the same quoting), with no walk first,
            # which cost as much as the encoder. Anything else (a key that is not text, a container,
            # a long text, a subclass) stops the loop: the general way below writes it. An int too
            # long to print raises ValueError, as it does in the encoder.
            parts: list[str] = []
            add, heads = parts.append, _HEADS
            for key, value in plain.items():
                if type(key) is not str:
                    break
                head = heads.get(key)
                if head is None:
                    head = _quote(key) + ": "
                    if len(heads) < _KEPT_HEADS and len(key) <= _SHORT_KEY:
                        heads[key] = head
                kind = type(value)
                if kind is str:
                    if len(value) > _MAX_SHORT:
                        break
                    add(head + _quote(value))
                elif kind is int:
                    add(head + _int_text(value))
                elif value is None:
                    add(head + "null")
                elif kind is bool:
                    add(head + ("true" if value else "false"))
                elif kind is float and -_FINITE < value < _FINITE:
                    add(head + _float_text(value))
                else:
                    break
            else:
                text = "{" + ", ".join(parts) + "}"
        if text is None:
            if not _text_keys(plain):  # the encoder would write colliding keys twice: one read back
                raise TypeError("keys that are not text")
            text = strict_dumps(plain)
    except (ValueError, TypeError, RecursionError, OverflowError):
        text = strict_dumps(_safe(dict(data), 0))
    if len(text) > MAX_EVENT_CHARS:
        text = strict_dumps(_shrunk(data, text))
    return json_for_utf8(text) if utf8 and not text.isascii() else text


def encode_for_postgres(data: Mapping[str, Any]) -> str:
    """:func:`encode_data` as ``jsonb`` takes it: U+0000 and unpaired surrogates become U+FFFD."""
    return json_for_postgres(encode_data(data, utf8=False))


def call_id_for_utf8(call_id: str | None) -> str | None:
    """A call id as a UTF-8 text column holds it (an unpaired surrogate becomes U+FFFD)."""
    return call_id if call_id is None or call_id.isascii() else text_for_utf8(call_id)


def call_id_for_postgres(call_id: str | None) -> str | None:
    """A call id as a PostgreSQL text column holds it (U+0000 and unpaired surrogates: U+FFFD)."""
    return call_id if call_id is None else text_for_postgres(call_id)


def check_event(run_id: str, kind: str, ts: float, *, postgres: bool = False) -> None:
    """Raise ``ValueError`` naming the problem when a store cannot keep an event as it is: ``ts``
    not a finite number, ``run_id`` or ``kind`` holding an unpaired surrogate (no UTF-8 store
    writes it) or, for PostgreSQL, U+0000. Stores check a batch before writing any of it."""
    if (
        type(ts) is float
        and -_FINITE < ts < _FINITE  # NaN fails both comparisons
        and type(run_id) is str
        and type(kind) is str
        and run_id.isascii()
        and kind.isascii()
        and not (postgres and ("\x00" in run_id or "\x00" in kind))
    ):
        return  # what every event of ours is: nothing more to look at
    if type(ts) is not float and (type(ts) is not int or isinstance(ts, bool)):
        raise ValueError(f"event {run_id!r}: ts must be a number of seconds, got {type(ts).__name__}")
    if not math.isfinite(ts):
        raise ValueError(f"event {run_id!r}: ts must be a finite number of seconds, got {ts!r}")
    for what, text in (("run id", run_id), ("kind", kind)):
        if type(text) is not str:
            raise ValueError(f"the {what} must be text, got {type(text).__name__}")
        if text.isascii() and not (postgres and "\x00" in text):
            continue
        if (text_for_postgres(text) if postgres else text_for_utf8(text)) != text:
            held = "U+0000 or an unpaired surrogate" if postgres else "an unpaired surrogate"
            raise ValueError(f"the {what} {text!r} holds {held}, which the store cannot write")


def _text_keys(value: Any) -> bool:
    """True when every object in ``value`` has text keys only and writing it costs at most
    :data:`_MAX_PARTS` parts, what it shares counted each time (the C encoder would write a list
    shared down forty levels 2**40 times, in code nothing interrupts); what else it holds is the
    encoder's to judge."""
    left = _MAX_PARTS
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            left -= len(item) + 1
            for key, child in item.items():
                if type(key) is not str:
                    return False
                if type(child) not in _LEAVES:
                    stack.append(child)
                elif type(child) is str and len(child) > _MAX_SHORT:
                    left -= len(child) // _MAX_SHORT
        elif isinstance(item, list | tuple):
            left -= len(item) + 1
            stack.extend(child for child in item if type(child) not in _LEAVES or type(child) is str)
        elif type(item) is str and len(item) > _MAX_SHORT:
            left -= len(item) // _MAX_SHORT
        if left < 0:
            return False
    return True


def _safe(value: Any, depth: int, path: set[int] | None = None, left: list[int] | None = None) -> Any:
    """``value`` as JSON the encoder writes (see the module docstring); ``path``: the ids of the
    containers being walked, so a container met inside itself is marked, not walked again;
    ``left``: the parts it may still write (:data:`_MAX_PARTS`)."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        if abs(value).bit_length() > _MAX_INT_DIGITS * 3:
            return f"<int of {abs(value).bit_length()} bits>"
        return value
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if not isinstance(value, Mapping | list | tuple):
        return bounded_repr(value, _MAX_SHORT)  # never the value's own repr: it may not end
    if depth >= MAX_DEPTH:
        return {"$truncated": "depth"}
    walking = set() if path is None else path
    if id(value) in walking:
        return {"$truncated": "cycle"}
    budget = [_MAX_PARTS] if left is None else left
    try:
        budget[0] -= len(value) + 1
        if budget[0] < 0:  # what it shares would be written once for each place it is held
            return {"$truncated": "size"}
        walking.add(id(value))
        if isinstance(value, Mapping):
            return _safe_object(value, depth, walking, budget)
        return [_safe(v, depth + 1, walking, budget) for v in value]
    except Exception as exc:  # the value's own code raised: the event is kept with a placeholder
        return unshowable(value, exc)
    finally:
        walking.discard(id(value))


def _safe_object(
    value: Mapping[Any, Any], depth: int, path: set[int], left: list[int] | None = None
) -> dict[str, Any]:
    """The object of ``value``: keys that write as one text are all kept, named the same whatever
    order the mapping holds them in (:func:`~actionspace._placeholders.named_keys`)."""
    entries = [(_json_key(k), k, _safe(v, depth + 1, path, left)) for k, v in value.items()]
    out = {text: item for text, _, item in entries}
    if len(out) == len(entries):
        return out
    names = named_keys(entries, canonical_text)
    return {name: item for name, (_, _, item) in zip(names, entries, strict=True)}


def _json_key(key: object) -> str:
    """``key`` as ``json.dumps`` writes an object key (``true``, ``null``, ``1.5``), else its text."""
    if isinstance(key, str):
        return str(key)
    if key is None or isinstance(key, bool):
        return "null" if key is None else "true" if key else "false"
    if isinstance(key, float):
        return float.__repr__(key) if math.isfinite(key) else _safe(float(key), 0)
    if isinstance(key, int):
        try:
            return int.__repr__(key)
        except ValueError:  # too many digits to print
            return f"<int of {abs(key).bit_length()} bits>"
    if isinstance(key, enum.Enum):
        return _json_key(key.value)
    return bounded_repr(key, _MAX_SHORT)  # sets sorted, no object address, never the key's own code


def _shrunk(data: Mapping[str, Any], text: str) -> dict[str, Any]:
    """The short top-level fields of an oversized event, and a digest and prefix of the whole."""
    short: dict[Any, Any] = {}
    for key, value in data.items():
        if (
            (type(key) is str and key == "label")
            or (isinstance(value, str) and len(value) <= _MAX_SHORT)
            or value is None
            or isinstance(value, bool | int | float)
        ):
            short[key] = value
    kept = _safe_object(short, 0, set())
    kept["$truncated"] = {
        "chars": len(text),
        "sha256": hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest(),
        "prefix": text[:RAW_PREFIX_CHARS],
    }
    return kept


def bounded_raw(raw: Any, artifacts: _PutsBytes | None = None) -> dict[str, Any]:
    """The data of a ``model_output`` event for ``raw`` (see the module docstring)."""
    if isinstance(raw, str):
        text = raw
    elif isinstance(raw, dict | list):
        if not writes_within(raw):  # parts held in many places: its budget cuts it, marked "<too large>"
            text = canonical_text(raw)
        else:
            try:
                text = strict_dumps(raw)
            except (ValueError, TypeError, RecursionError, OverflowError):
                text = strict_dumps(_safe(raw, 0))
        if len(text) <= RAW_PREFIX_CHARS:
            # a copy as strict JSON (the caller's object may change later): what the text says
            return {"raw": json.loads(text)}
    else:  # never the object's own repr: it may return 500 MB, or never return
        text = bounded_repr(raw, RAW_PREFIX_CHARS * 4)
    if len(text) <= RAW_PREFIX_CHARS:
        return {"raw": text}
    encoded = text.encode("utf-8", "surrogatepass")
    out: dict[str, Any] = {
        "raw": text[:RAW_PREFIX_CHARS],
        "raw_truncated": True,
        "raw_chars": len(text),
        "raw_sha256": hashlib.sha256(encoded).hexdigest(),
    }
    if artifacts is not None:
        out["artifact_ref"] = artifacts.put(encoded)
    return out


def compact_raw(
    raw: dict[str, Any] | list[Any], artifacts: _PutsBytes | None = None
) -> bytes | dict[str, Any]:
    """:func:`bounded_raw` of a provider object as a compact call record holds it
    (:data:`~actionspace.trace.events.CompactCall`): its UTF-8 JSON text when that is short (read
    back as ``{"raw": the object}``), else the payload itself. Bytes are not tracked by the garbage
    collector, and the text is decoded only when the trace is read."""
    if not writes_within(raw):
        return bounded_raw(raw, artifacts)
    try:
        text = strict_dumps(raw)
    except (ValueError, TypeError, RecursionError, OverflowError):
        return bounded_raw(raw, artifacts)
    if len(text) <= RAW_PREFIX_CHARS:
        return text.encode("utf-8", "surrogatepass")
    return bounded_raw(raw, artifacts)
