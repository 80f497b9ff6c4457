"""Value-level provenance: where every value of a call's arguments came from, as the runtime
establishes it.

Provenance is a closed set (:data:`KINDS`), inferred for every scalar of every argument — every
element of a list, every field of a nested object, and every object key (a key is data as much as
a value is):

- ``user``: the value occurs in the user's messages of the run (the span is recorded);
- ``tool_result(call_id, path)``: it occurs at ``path`` in an earlier observation whose content
  is trusted (or in a field a :class:`FieldTrust` declares written by the system, not by others —
  as the field's whole value, or as a key of the object the field holds);
- ``untrusted(call_id, path)``: it occurs only in content whose integrity is untrusted;
- ``default``: the schema's default filled it in;
- ``model``: it occurs nowhere — the model wrote it.

The strongest evidence wins, in that order (``user`` first: a value the user typed is the user's
choice even when an untrusted page repeats it). Matching is by normalised value (:func:`norm`):

- case-insensitive, with runs of whitespace collapsed; a string matches as a whole token of a
  longer text (``"bob"`` occurs in ``"ask Bob."``, not in ``"bobby"``);
- in untrusted content (observations and user messages) also through disguises
  (:func:`~actionspace.policy.matching.fold`: fullwidth and compatibility characters, invisible
  format characters, accents, lookalike letters of other scripts), so that a rewritten copy of an
  untrusted value stays ``untrusted``; a trusted source, and a system field's vouching, match by
  the strict reading only, so folding never raises a value to ``user`` or ``tool_result``;
- numbers as numbers: ``1000``, ``1000.0``, ``"1,000"`` and ``"$1,000.00"`` are one value, and a
  numeral in a text counts (currency signs and codes around it are ignored); integers exactly
  (:func:`~actionspace.policy.matching.number`: two long account numbers one digit apart differ);
- dates: ``2024-05-03``, ``2024/05/03``, ``May 3, 2024``, ``3 May 2024`` are one date; a date-time
  value (``2024-05-03 10:00``) needs its date and its time (``10:00``) in the same text.

A string is also judged by the addresses it embeds: every URL, e-mail address and IBAN-like
account number inside a longer string gets a provenance of its own (path
``/body#www.example.com``, ``embedded=True``), so a message that points its reader at a link or an
account an untrusted page chose is not ``model`` just because the sentence around it is new. An
address that only its folded text shows (written in fullwidth or lookalike letters, or cut by an
invisible character) is ``untrusted`` when an untrusted source holds it, else ``model``.

A plan argument bound by ``$ref`` takes its provenance from the referenced node (``tool_result``
or ``untrusted`` by that node's output label).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from actionspace.policy.evidence_index import ObservationIndex, find, index
from actionspace.policy.matching import ENTITY as _ENTITY
from actionspace.policy.matching import Text as _Text
from actionspace.policy.matching import fold, norm, probe
from actionspace.policy.matching import matches as _matches
from actionspace.policy.matching import prepare as _prepare

__all__ = [
    "KINDS",
    "Evidence",
    "FieldTrust",
    "Kind",
    "Source",
    "ValueProvenance",
    "embedded",
    "infer",
    "leaves",
    "norm",
    "strongest",
    "structure",
]

Kind = Literal["user", "tool_result", "untrusted", "default", "model"]
KINDS: tuple[Kind, ...] = ("user", "tool_result", "untrusted", "default", "model")
"""Every provenance kind, strongest evidence first."""

_RANK = {k: i for i, k in enumerate(KINDS)}


@dataclass(frozen=True, slots=True)
class Source:
    """One provenance: its kind, and for tool results the call and the path (a JSON pointer) of
    the value; for ``user`` the message index and character span (``"0:12-20"``)."""

    kind: Kind
    call_id: str | None = None
    path: str = ""

    def __str__(self) -> str:
        if self.kind == "user":
            return f"user({self.path})" if self.path else "user"
        if self.kind in ("tool_result", "untrusted"):
            return f"{self.kind}({self.call_id}, {self.path or '/'})"
        return self.kind


MODEL = Source("model")
DEFAULT = Source("default")


@dataclass(frozen=True, slots=True)
class ValueProvenance:
    """The provenance of one scalar (or key) of an argument, at ``path`` (a JSON pointer)."""

    path: str
    source: Source
    key: bool = False
    """True when the scalar is an object key."""
    embedded: bool = False
    """True for an address (URL, e-mail, account number) found inside a longer string."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "source": str(self.source)}
        if self.key:
            out["key"] = True
        if self.embedded:
            out["embedded"] = True
        return out


def strongest(sources: Sequence[Source]) -> Source:
    """The strongest of ``sources`` (``model`` for none)."""
    return min(sources, key=lambda s: _RANK[s.kind], default=MODEL)


# ---------------------------------------------------------------------- evidence


def leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any, bool]]:
    """(JSON pointer, scalar, is-a-key) for every scalar of ``value``, object keys included."""
    if isinstance(value, Mapping):
        for k, v in value.items():
            here = f"{path}/{_escape(str(k))}"
            yield here, k, True
            yield from leaves(v, here)
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            yield from leaves(v, f"{path}/{i}")
    else:
        yield path, value, False


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _field(path: str) -> str:
    """The last object key of a pointer (``/0/sender`` → ``sender``; list indexes skipped)."""
    for part in reversed(path.split("/")):
        if part and not part.isdigit():
            return part.replace("~1", "/").replace("~0", "~")
    return ""


@dataclass(frozen=True, slots=True)
class FieldTrust:
    """Fields of an untrusted tool's output that the system writes, not the people who write the
    rest (a message's sender, an id, a timestamp): a value that *is* such a field (not a piece of
    its text) is a ``tool_result``.

    ``fields``: tool name → field names (the last object key of the value's path).
    """

    fields: Mapping[str, frozenset[str]]

    def trusted(self, tool: str | None, path: str) -> bool:
        """True when ``path`` of ``tool``'s output is a system field (an unknown tool has none)."""
        names = None if tool is None else self.fields.get(tool)
        return names is not None and _field(path) in names


class Evidence:
    """What a run's provenance is read from: the user's messages and the observations shown.

    ``users``: the user's messages (with whether each is untrusted); ``observations``: call id →
    (tool name or None, untrusted?, data), oldest first. Texts are normalised once per instance,
    or once per ``cache`` (a dict the caller keeps per run: call id → prepared observation).
    """

    def __init__(
        self,
        users: Sequence[tuple[str, bool]],
        observations: Mapping[str, tuple[str | None, bool, Any]],
        *,
        fields: FieldTrust | None = None,
        cache: dict[str, Any] | None = None,
    ) -> None:
        self._users = [(_prepare(text, loose=untrusted), untrusted) for text, untrusted in users]
        self._fields = fields
        self._obs: list[tuple[str, str | None, bool, ObservationIndex]] = []
        for call_id, (tool, untrusted, data) in reversed(list(observations.items())):
            hit = None if cache is None else cache.get(call_id)
            if hit is not None and hit[0] is data and hit[1].loose == untrusted:
                indexed = hit[1]
            else:
                flat = [(p, v, _text_of(v, untrusted), k) for p, v, k in leaves(data)]
                indexed = index(flat, loose=untrusted)
                if cache is not None:
                    cache[call_id] = (data, indexed)
            self._obs.append((call_id, tool, untrusted, indexed))
        self._known = set(observations)

    def knows(self, call_id: str) -> bool:
        return call_id in self._known

    def sources(self, value: Any, *, only: str | None = None) -> list[Source]:
        """Every source ``value`` occurs in (``only``: ``"user"`` or one call id)."""
        return list(self._sources(value, only))

    def strongest(self, value: Any) -> Source:
        """``strongest(self.sources(value))``, reading no further than the strongest source: the
        user's messages, then the observations newest first up to the first trusted one."""
        weakest: Source | None = None
        for source in self._sources(value, None):
            if source.kind != "untrusted":
                return source
            weakest = weakest or source
        return weakest or MODEL

    def tainted(self, value: Any) -> Source | None:
        """The first untrusted source ``value`` occurs in (folded), or None; trusted ones are not
        read."""
        for source in self._sources(value, None, untrusted_only=True):
            return source
        return None

    def _sources(self, value: Any, only: str | None, *, untrusted_only: bool = False) -> Iterator[Source]:
        if value is None or value == "" or isinstance(value, bool):
            return
        if only in (None, "user"):
            for i, (text, untrusted) in enumerate(self._users):
                if untrusted_only and not untrusted:
                    continue
                span = _matches(value, text, loose=untrusted)
                if span is not None:
                    where = f"{i}" if span[0] < 0 else f"{i}:{span[0]}-{span[1]}"
                    kind: Kind = "untrusted" if untrusted else "user"
                    yield Source(kind, "user" if untrusted else None, where)
                    break
        found = probe(value)
        folded = probe(value, loose=True) if isinstance(value, str) and not value.isascii() else found
        for call_id, tool, untrusted, indexed in self._obs:
            if (only is not None and only != call_id) or (untrusted_only and not untrusted):
                continue
            hit = find(value, folded if untrusted else found, indexed)
            if hit is None:
                continue
            path, holder = hit
            # a system field vouches for the whole value it holds, not for a piece of its text;
            # a key is held by the field its object is (``/0/shared_with/bob@x`` by shared_with)
            trust = self._fields
            vouched = holder is not None and trust is not None and trust.trusted(tool, holder)
            weak = untrusted and not vouched
            yield Source("untrusted" if weak else "tool_result", call_id, path)


def _text_of(value: Any, loose: bool) -> _Text | None:
    return _prepare(value, loose=loose) if isinstance(value, str) else None


def _parent(path: str) -> str:
    """The pointer of the object a key belongs to (``/0/a/bob`` → ``/0/a``)."""
    return path.rsplit("/", 1)[0]


# ---------------------------------------------------------------------- inference


_QUOTED_NAME = re.compile(r'"([A-Za-z_][A-Za-z0-9_]*)"')
"""A name in double quotes in a schema's description (``has as "type" "file"``)."""


def structure(schema: Mapping[str, Any]) -> frozenset[Any]:
    """What a tool's input schema fixes, anywhere in it: declared property names, ``const``
    values, the member of one-member enums, and the names its descriptions quote (``"file_id"``;
    names only — a quoted address or phrase is not structure). Such keys and values are the tool's
    structure, written by whoever wrote the schema, so they carry no provenance of their own."""
    out: set[Any] = set()

    def walk(node: Any) -> None:
        if isinstance(node, Mapping):
            props = node.get("properties")
            if isinstance(props, Mapping):
                out.update(str(k) for k in props)
            text = node.get("description")
            if isinstance(text, str):
                out.update(_QUOTED_NAME.findall(text))
            if "const" in node and isinstance(node["const"], str | int | float):
                out.add(node["const"])
            enum = node.get("enum")
            if isinstance(enum, list) and len(enum) == 1 and isinstance(enum[0], str | int | float):
                out.add(enum[0])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(schema)
    return frozenset(out)


def infer(
    evidence: Evidence,
    arguments: Mapping[str, Any],
    *,
    defaults: Sequence[str] = (),
    bound: Mapping[str, Sequence[tuple[str, bool]]] | None = None,
    fixed: frozenset[Any] = frozenset(),
) -> dict[str, tuple[ValueProvenance, ...]]:
    """Per argument, the provenance of each of its scalars and keys (empty for ``None`` / ``""``).

    ``defaults``: arguments the schema's default filled in; ``bound``: plan arguments bound by
    ``$ref`` → (call id, untrusted?) of each referenced node; ``fixed``: keys and values below
    the top level that the schema fixes (:func:`structure`), skipped.
    """
    out: dict[str, tuple[ValueProvenance, ...]] = {}
    for name, value in arguments.items():
        if name in defaults:
            out[name] = _all(value, DEFAULT)
            continue
        if bound is not None and name in bound:
            refs = bound[name]
            src = strongest([Source("untrusted" if u else "tool_result", c) for c, u in refs])
            if any(u for _c, u in refs):  # a mix is as weak as its weakest reference
                src = next(Source("untrusted", c) for c, u in refs if u)
            out[name] = _all(value, src)
            continue
        found: list[ValueProvenance] = []
        for p, v, k in leaves(value):
            if not _carries(v) or (p and _fixed(v, fixed)):
                continue
            source = evidence.strongest(v)
            found.append(ValueProvenance(p, source, k))
            if isinstance(v, str) and source.kind != "user":
                for entity in embedded(v):
                    # an address only the folded text shows is not what any source wrote as such
                    where = evidence.strongest(entity) if entity in v else evidence.tainted(entity) or MODEL
                    found.append(ValueProvenance(f"{p}#{entity}", where, k, embedded=True))
        out[name] = tuple(found)
    return out


def _all(value: Any, source: Source) -> tuple[ValueProvenance, ...]:
    """Every scalar and key of ``value`` with one provenance."""
    return tuple(ValueProvenance(p, source, k) for p, v, k in leaves(value) if _carries(v))


def embedded(text: str) -> list[str]:
    """The addresses a text embeds: URLs, e-mail addresses, IBAN-like account numbers (deduplicated,
    trailing punctuation dropped), then those only its folded text shows (fullwidth letters,
    invisible characters inside; see :func:`~actionspace.policy.matching.fold`)."""
    out: list[str] = []
    whole = text.strip()
    readings = (text,) if text.isascii() else (text, fold(text))
    for reading in readings:
        for m in _ENTITY.finditer(reading):
            entity = m.group(0).rstrip(".,;:!?")
            if entity and entity not in out and entity != whole and entity != fold(whole):
                out.append(entity)
    return out


def _fixed(value: Any, fixed: frozenset[Any]) -> bool:
    return not isinstance(value, bool) and value in fixed


def _carries(value: Any) -> bool:
    """None and "" carry nothing; everything else is data."""
    return value is not None and value != ""
