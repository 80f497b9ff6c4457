"""Information-flow labels: confidentiality, integrity and reader sets, and their join.

A :class:`Label` is attached to every value the runtime tracks (user input, tool outputs, call
arguments). Labels form a lattice; :meth:`Label.join` is its least upper bound:

- confidentiality ``public < internal < secret`` (the higher wins);
- integrity ``trusted < untrusted`` (untrusted wins: a value built from anything untrusted is
  untrusted);
- readers: ``None`` means anyone may read; a set means only those principals may. Joining
  intersects the sets (data built from two restricted values may go only to readers of both).

Labels travel in :class:`~actionspace.types.Provenance` as string tags (``labels``) plus ``trust``:
the first tag is the confidentiality, each reader is a ``reader:<id>`` tag (an empty reader set
is ``readers:none``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, cast

if TYPE_CHECKING:
    from actionspace.policy.principal import Principal

__all__ = [
    "CONFIDENTIALITY",
    "PUBLIC_TRUSTED",
    "Confidentiality",
    "Integrity",
    "Label",
    "may_read",
]

Confidentiality = Literal["public", "internal", "secret"]
Integrity = Literal["trusted", "untrusted"]

CONFIDENTIALITY: tuple[Confidentiality, ...] = ("public", "internal", "secret")
"""The confidentiality levels, lowest first."""
_RANK: dict[str, int] = {"public": 0, "internal": 1, "secret": 2}
_INTEGRITY = ("trusted", "untrusted")
READER_TAG = "reader:"
NO_READERS_TAG = "readers:none"


@dataclass(frozen=True, slots=True, kw_only=True)
class Label:
    """What a value may flow to: confidentiality, integrity and (optionally) who may read it."""

    confidentiality: Confidentiality = "public"
    """``public < internal < secret``. Default ``public``."""
    integrity: Integrity = "trusted"
    """``trusted`` (from the user or a trusted system) or ``untrusted`` (third-party content)."""
    readers: frozenset[str] | None = None
    """Principal ids (or addresses) that may read the value; None (the default) = anyone."""

    def __post_init__(self) -> None:
        if self.confidentiality not in _RANK:
            raise ValueError(
                f"confidentiality must be one of {CONFIDENTIALITY}, got {self.confidentiality!r}"
            )
        if self.integrity not in _INTEGRITY:
            raise ValueError(f"integrity must be one of {_INTEGRITY}, got {self.integrity!r}")
        if self.readers is not None and not isinstance(self.readers, frozenset):
            if isinstance(self.readers, str):
                raise ValueError("readers must be a collection of ids, not one string")
            object.__setattr__(self, "readers", frozenset(self.readers))

    @staticmethod
    def bottom() -> Label:
        """The identity of :meth:`join`: public, trusted, readable by anyone."""
        return PUBLIC_TRUSTED

    @property
    def rank(self) -> int:
        """The confidentiality as a number: public 0, internal 1, secret 2."""
        return _RANK[self.confidentiality]

    @property
    def secret(self) -> bool:
        return self.confidentiality == "secret"

    @property
    def untrusted(self) -> bool:
        return self.integrity == "untrusted"

    def join(self, other: Label) -> Label:
        """The least upper bound: max confidentiality, untrusted wins, readers intersect."""
        if other is self or other is PUBLIC_TRUSTED:
            return self
        if self is PUBLIC_TRUSTED:
            return other
        conf = self.confidentiality
        if _RANK[other.confidentiality] > _RANK[conf]:
            conf = other.confidentiality
        integrity = "untrusted" if other.integrity == "untrusted" else self.integrity
        if self.readers is None:
            readers = other.readers
        elif other.readers is None:
            readers = self.readers
        else:
            readers = self.readers & other.readers
        if readers is None:
            return _PLAIN[conf, integrity]
        return Label(confidentiality=conf, integrity=integrity, readers=readers)

    def flows_to(self, other: Label) -> bool:
        """True when ``self ⊑ other``: data labelled ``self`` may be relabelled ``other``."""
        if _RANK[self.confidentiality] > _RANK[other.confidentiality]:
            return False
        if self.integrity == "untrusted" and other.integrity == "trusted":
            return False
        if other.readers is None:
            return self.readers is None
        return self.readers is None or other.readers <= self.readers

    def tags(self) -> tuple[str, ...]:
        """The provenance tags: the confidentiality, then ``reader:<id>`` per reader (sorted)."""
        if self.readers is None:
            return (self.confidentiality,)
        if not self.readers:
            return (self.confidentiality, NO_READERS_TAG)
        return (self.confidentiality, *(READER_TAG + r for r in sorted(self.readers)))

    @classmethod
    def from_tags(cls, tags: Iterable[str], trust: str = "trusted") -> Label:
        """Read a label back from provenance ``labels`` and ``trust``; unknown tags are ignored.

        An empty set of tags reads as ``public`` (the runtime always writes the confidentiality).
        """
        conf: Confidentiality = "public"
        readers: set[str] | None = None
        for tag in tags:
            if tag in _RANK:
                conf = cast(Confidentiality, tag) if _RANK[tag] > _RANK[conf] else conf
            elif tag == NO_READERS_TAG:
                readers = readers if readers is not None else set()
            elif tag.startswith(READER_TAG):
                readers = readers if readers is not None else set()
                readers.add(tag[len(READER_TAG) :])
        integrity: Integrity = "untrusted" if trust == "untrusted" else "trusted"
        if readers is None and cls is Label:
            return _PLAIN[conf, integrity]  # shared, as joins return them: compared by identity first
        return cls(
            confidentiality=conf,
            integrity=integrity,
            readers=frozenset(readers) if readers is not None else None,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "confidentiality": self.confidentiality,
            "integrity": self.integrity,
            "readers": sorted(self.readers) if self.readers is not None else None,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Label:
        readers = data.get("readers")
        return cls(
            confidentiality=data.get("confidentiality", "public"),
            integrity=data.get("integrity", "trusted"),
            readers=frozenset(str(r) for r in readers) if readers is not None else None,
        )

    def __str__(self) -> str:
        text = f"{self.confidentiality}/{self.integrity}"
        if self.readers is not None:
            text += "{" + ",".join(sorted(self.readers)) + "}"
        return text


PUBLIC_TRUSTED = Label()
"""Public, trusted, readable by anyone: the bottom of the lattice."""

_PLAIN: dict[tuple[str, str], Label] = {
    (c, i): Label(confidentiality=c, integrity=i) if (c, i) != ("public", "trusted") else PUBLIC_TRUSTED
    for c in CONFIDENTIALITY
    for i in ("trusted", "untrusted")
}
"""The six labels without a reader set, shared: joins return these instead of new objects."""


def may_read(label: Label, viewer: Principal | None) -> bool:
    """True when ``viewer`` may see a value labelled ``label`` (in traces, logs, consoles).

    Public and internal values without a reader set are visible to anyone. Otherwise the viewer
    must be in the reader set or hold the scope ``labels:<confidentiality>`` (``labels:secret``);
    no viewer (None) sees nothing restricted.
    """
    if label.readers is None and label.confidentiality != "secret":
        return True
    if viewer is None:
        return False
    if label.readers is not None and viewer.id in label.readers:
        return True
    return viewer.allows(f"labels:{label.confidentiality}")
