"""The interface every trimming rule implements, and the helpers the rules share."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, TypeVar

from actionspace._canonical import clip_end, json_size

__all__ = [
    "MIN_MAX_BYTES",
    "LineBuffer",
    "Source",
    "TextSource",
    "TrimRule",
    "fit",
    "is_stream",
    "small_fields",
]

MIN_MAX_BYTES: Final = 256
"""The smallest byte budget a rule accepts: room for counts and one clipped line."""

TextSource = str | bytes | bytearray | memoryview | Iterable[Any]
"""Text a rule can consume: one string or buffer, or an iterable of ``str`` / ``bytes`` chunks."""

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True, kw_only=True)
class Source:
    """A tool result split into what a rule keeps as is and what it trims."""

    fields: Mapping[str, Any] = field(default_factory=dict)
    """Small values copied into ``data`` (exit code, URL, query), already plain JSON."""
    text: TextSource | None = None
    """The raw text the rule consumes chunk by chunk; this is what goes to the artifact store."""
    items: Sequence[Any] | None = None
    """Structured records (plain JSON) instead of text, e.g. search hits as dicts."""


class TrimRule(ABC):
    """A deterministic, versioned projection of one kind of tool output into a bounded ``data``.

    A rule object is single use: build it with the byte budget, ``feed`` text (or ``feed_item``
    records), then call ``finish`` once. Memory stays bounded by the budget and the rule's own
    caps, whatever the input size. ``finish`` returns ``(data, cut)``: the JSON value the model
    sees, at most ``max_bytes`` bytes as canonical JSON, and whether anything was left out.
    """

    name: ClassVar[str]
    version: ClassVar[str]

    def __init__(self, *, max_bytes: int, fields: Mapping[str, Any] | None = None) -> None:
        if max_bytes < MIN_MAX_BYTES:
            raise ValueError(f"max_bytes must be at least {MIN_MAX_BYTES}, got {max_bytes}")
        self.max_bytes = max_bytes
        self.fields: dict[str, Any] = dict(fields or {})

    @classmethod
    def key(cls) -> str:
        """The name the rule is chosen by, e.g. ``log-v1``."""
        return f"{cls.name}-v{cls.version}"

    @classmethod
    @abstractmethod
    def unwrap(cls, value: object) -> Source | None:
        """Split a tool result into a ``Source``, or None when it is not this rule's kind."""

    @abstractmethod
    def feed(self, chunk: str) -> None:
        """Consume the next piece of text (chunks split anywhere, even inside a line)."""

    def feed_item(self, item: Any) -> None:
        """Consume one structured record; rules that only read text raise ``TypeError``."""
        raise TypeError(f"{self.key()} reads text, not records")

    @abstractmethod
    def finish(self) -> tuple[Any, bool]:
        """The bounded ``data`` and whether anything was cut."""


def is_stream(value: object) -> bool:
    """Whether ``value`` is chunked text to consume lazily rather than a value to project.

    An iterator is, and so is an iterable without a length; a collection (a deque, a dict's keys
    or values) is a value: its strings are items, never joined into one text.
    """
    if isinstance(value, str | bytes | bytearray | memoryview | Mapping | list | tuple | set | frozenset):
        return False
    if isinstance(value, Iterator):
        return True
    return (
        isinstance(value, Iterable)
        and not isinstance(value, Collection)
        and getattr(type(value), "model_dump", None) is None
    )


def small_fields(value: Mapping[str, Any], skip: Iterable[str], *, limit: int = 8) -> dict[str, Any]:
    """Up to ``limit`` scalar entries of ``value`` besides ``skip``, strings clipped to 200 chars."""
    skipped = set(skip)
    kept: dict[str, Any] = {}
    for key, item in value.items():
        if len(kept) >= limit:
            break
        if not isinstance(key, str) or key in skipped:
            continue
        if item is None or isinstance(item, bool | int) or (isinstance(item, float) and math.isfinite(item)):
            kept[key] = item
        elif isinstance(item, str):
            kept[key] = clip_end(item, 200)
    return kept


def fit(rungs: Sequence[_T], build: Callable[[_T], Any], max_bytes: int, last: Callable[[], Any]) -> Any:
    """The value ``build`` makes from the first rung whose canonical JSON fits ``max_bytes``.

    ``rungs`` go from generous to frugal; ``last`` is the answer when none fits.
    """
    for rung in rungs:
        data = build(rung)
        if json_size(data) <= max_bytes:
            return data
    return last()


class LineBuffer:
    """Splits chunked text into lines, holding at most ``cap`` characters of an unfinished line.

    ``feed`` returns the complete lines as one block (``\\n``-joined, no final newline) or None;
    the characters of an over-long line beyond ``cap`` are counted, not kept.
    """

    __slots__ = ("_cap", "_extra", "_partial")

    def __init__(self, cap: int) -> None:
        self._cap = cap
        self._partial = ""
        self._extra = 0

    def feed(self, chunk: str) -> tuple[tuple[str, int] | None, str | None]:
        """Returns ``(first, block)``: the line that completes the held fragment (text, full
        length) and the block of further complete lines in ``chunk``."""
        first: tuple[str, int] | None = None
        start = 0
        if self._partial or self._extra:
            newline = chunk.find("\n")
            if newline < 0:
                self._hold(chunk)
                return None, None
            self._hold(chunk[:newline])
            first = (self._partial, len(self._partial) + self._extra)
            self._partial, self._extra = "", 0
            start = newline + 1
        end = chunk.rfind("\n")
        block = None
        if end >= start:
            block = chunk[start:end]
            start = end + 1
        if start < len(chunk):
            self._hold(chunk[start:] if start else chunk)
        return first, block

    def flush(self) -> tuple[str, int] | None:
        """The unfinished last line (text, full length), if any."""
        if not self._partial and not self._extra:
            return None
        line = (self._partial, len(self._partial) + self._extra)
        self._partial, self._extra = "", 0
        return line

    def _hold(self, text: str) -> None:
        room = self._cap - len(self._partial)
        if room >= len(text):
            self._partial += text
        else:
            self._partial += text[: max(room, 0)]
            self._extra += len(text) - max(room, 0)
