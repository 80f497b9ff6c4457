"""``json-v1``: structured results, projected breadth-first into the byte budget.

A value that fits is returned unchanged. A larger one is projected with a ladder of caps, from
generous to frugal, and the first projection whose canonical JSON fits is kept:

* lists keep their first *k* items and end with ``{"_omitted_items": n}``;
* objects keep their first *k* keys (in the tool's order) and gain ``"_omitted_keys": n``;
* strings keep head and tail around ``…[n chars omitted]…``;
* below the depth cap, an object becomes ``{"_omitted_keys": n}`` and a list
  ``[{"_omitted_items": n}]``.

Depth falls along the ladder, so the shallow structure (the keys a caller reads first) is the last
thing to go. Text (a stream, or bytes that are not JSON) becomes one string, head and tail kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import islice
from typing import Any, ClassVar, Final

from actionspace._canonical import (
    canonical_text,
    clip_middle,
    distinct_key,
    json_size,
    normalize,
    normalize_key,
)
from actionspace.observation.rules._base import Source, TrimRule

__all__ = ["JsonRule", "fit_text", "project"]

OMITTED_ITEMS: Final = "_omitted_items"
OMITTED_KEYS: Final = "_omitted_keys"

_LADDER: Final[tuple[tuple[int, int, int, int], ...]] = (
    # depth, list items, object keys, string chars
    (32, 200, 200, 4000),
    (24, 100, 100, 2000),
    (16, 50, 64, 1000),
    (12, 30, 48, 500),
    (10, 20, 32, 300),
    (8, 12, 24, 200),
    (6, 8, 16, 120),
    (5, 5, 12, 80),
    (4, 3, 8, 60),
    (3, 2, 6, 40),
    (3, 1, 4, 30),
    (2, 1, 3, 20),
    (1, 1, 2, 16),
    (1, 0, 1, 12),
    (0, 0, 0, 8),
)


class _TooBig(Exception):
    """A projection already exceeds the budget; try the next rung."""


class _Projector:
    __slots__ = ("budget", "chars", "depth", "items", "keys", "lazy", "size")

    def __init__(self, rung: tuple[int, int, int, int], budget: int, lazy: bool = False) -> None:
        self.depth, self.items, self.keys, self.chars = rung
        self.budget = budget
        self.size = 0
        self.lazy = lazy
        """The value is not normalized yet: each part kept is normalized when it is reached."""

    def _spend(self, n: int) -> None:
        # A lower bound of the output size (characters, not bytes), so aborting is always right.
        self.size += n
        if self.size > self.budget:
            raise _TooBig

    def run(self, value: Any, depth: int = 0) -> Any:
        if self.lazy and type(value) not in _PLAIN:
            value = _shallow(value)
        if isinstance(value, str):
            clipped = clip_middle(value, self.chars)
            self._spend(len(clipped) + 3)
            return clipped
        if isinstance(value, Mapping):
            return self._object(value, depth)
        if isinstance(value, list):
            return self._list(value, depth)
        if isinstance(value, int) and not isinstance(value, bool):
            text = str(value)
            if len(text) > self.chars:
                return self.run(text, depth)
        self._spend(5)
        return value

    def _object(self, value: Mapping[Any, Any], depth: int) -> dict[str, Any]:
        self._spend(2)
        if depth >= self.depth:
            return {OMITTED_KEYS: len(value)} if value else {}
        out: dict[str, Any] = {}
        lazy = self.lazy
        for key, item in islice(value.items(), self.keys):
            text = normalize_key(key) if lazy and type(key) is not str else key
            if text in out:  # two keys that write alike (normalize keeps both the same way)
                text = distinct_key(text, key, out)
            self._spend(len(text) + 4)
            out[text] = self.run(item, depth + 1)
        if len(value) > self.keys:
            out[OMITTED_KEYS] = len(value) - self.keys
        return out

    def _list(self, value: list[Any], depth: int) -> list[Any]:
        self._spend(2)
        if depth >= self.depth:
            return [{OMITTED_ITEMS: len(value)}] if value else []
        out = [self.run(item, depth + 1) for item in value[: self.items]]
        if len(value) > self.items:
            out.append({OMITTED_ITEMS: len(value) - self.items})
        return out


_PLAIN: Final = frozenset({str, dict, list, int, float, bool, type(None)})


def _shallow(value: Any) -> Any:
    """A part of a value the C encoder wrote as JSON, as :func:`normalize` has it at its top: a
    tuple as a list of the same items (each normalized when reached), a mapping as it is (its keys
    are read by ``normalize_key``), anything else (a subclass of a scalar, an enum) normalized."""
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, Mapping | list):
        return value
    return normalize(value)


def project(value: Any, max_bytes: int, *, normalized: bool = True) -> Any:
    """``value`` (plain JSON that does not fit) cut to at most ``max_bytes`` of canonical JSON.

    ``normalized=False``: ``value`` is one the C encoder wrote as JSON (``dumps_plain`` did not
    raise: no cycle, no NaN, no set, keys of one kind) but may hold tuples, enums, subclasses and
    keys that are not strings; the projection is that of ``normalize(value)``, each part it keeps
    normalized when reached, so a large result costs what is kept, not what was returned.
    """
    lazy = not normalized
    if lazy and type(value) not in _PLAIN:
        value = _shallow(value)
    if isinstance(value, str):
        return fit_text(value, "", len(value), max_bytes)
    for rung in _LADDER:
        try:
            data = _Projector(rung, max_bytes, lazy).run(value)
        except _TooBig:
            continue
        if json_size(data) <= max_bytes:
            return data
    return _collapsed(value)


def _collapsed(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {OMITTED_KEYS: len(value)}
    if isinstance(value, list):
        return [{OMITTED_ITEMS: len(value)}]
    return clip_middle(canonical_text(value), 8)


def fit_text(head: str, tail: str, total: int, max_bytes: int) -> str:
    """The longest ``head…[n chars omitted]…tail`` whose JSON string fits ``max_bytes``.

    ``head`` and ``tail`` are the first and last characters seen of a text of ``total`` characters
    (they overlap, or ``tail`` is empty, when the text was short enough to keep whole).
    """
    if len(head) == total and json_size(head) <= max_bytes:
        return head
    whole = head if len(head) == total else None
    low, high = 0, max_bytes
    best = _join(head, tail, total, 0, whole)
    while low <= high:
        keep = (low + high) // 2
        candidate = _join(head, tail, total, keep, whole)
        if json_size(candidate) <= max_bytes:
            best, low = candidate, keep + 1
        else:
            high = keep - 1
    return best


def _join(head: str, tail: str, total: int, keep: int, whole: str | None) -> str:
    if whole is not None:
        return clip_middle(whole, keep)
    front = (keep * 2 + 2) // 3
    back = keep - front
    front = min(front, len(head))
    back = min(back, len(tail))
    return f"{head[:front]}…[{total - front - back} chars omitted]…{tail[len(tail) - back :] if back else ''}"


class JsonRule(TrimRule):
    """``json-v1``. As a streaming rule it reads text and keeps its head and tail."""

    name: ClassVar[str] = "json"
    version: ClassVar[str] = "1"

    def __init__(self, *, max_bytes: int, fields: Mapping[str, Any] | None = None) -> None:
        super().__init__(max_bytes=max_bytes, fields=fields)
        self._head: list[str] = []
        self._head_len = 0
        self._tail: list[str] = []
        self._tail_len = 0
        self._total = 0

    @classmethod
    def unwrap(cls, value: object) -> Source | None:
        return None

    def feed(self, chunk: str) -> None:
        self._total += len(chunk)
        room = self.max_bytes - self._head_len
        if room > 0:
            piece = chunk[:room]
            self._head.append(piece)
            self._head_len += len(piece)
        self._tail.append(chunk)
        self._tail_len += len(chunk)
        if self._tail_len > 2 * self.max_bytes:
            text = "".join(self._tail)[-self.max_bytes :]
            self._tail, self._tail_len = [text], len(text)

    def finish(self) -> tuple[Any, bool]:
        head = "".join(self._head)
        tail = "".join(self._tail)[-self.max_bytes :]
        text = fit_text(head, tail, self._total, self.max_bytes)
        return text, not (len(head) == self._total and text == head)
