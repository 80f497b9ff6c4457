"""A cache by spec identity that every runtime of the process shares, and that keeps no spec alive."""

from __future__ import annotations

import weakref
from typing import Any, Generic, TypeVar

from actionspace.catalog.spec import ToolSpec

__all__ = ["BySpec"]

V = TypeVar("V")


class BySpec(Generic[V]):
    """Values by the spec they were made from (its identity, never its equality: a spec's fields
    hold mappings and functions). An entry goes when its spec is collected, so a dropped runtime
    leaves neither its specs nor the functions they hold (and what those close over) behind; a
    value must not refer to its spec. Past ``bound`` live specs the entries are emptied."""

    __slots__ = ("_bound", "_entries")

    def __init__(self, bound: int = 4096) -> None:
        self._bound = bound
        self._entries: dict[int, tuple[weakref.ref[ToolSpec], V]] = {}

    def get(self, spec: ToolSpec) -> V | None:
        hit = self._entries.get(id(spec))
        # the address of a collected spec may be another's by now: its entry went with it, but
        # one made meanwhile on another thread is told apart by its reference
        return hit[1] if hit is not None and hit[0]() is spec else None

    def put(self, spec: ToolSpec, value: V) -> None:
        entries, key = self._entries, id(spec)
        if len(entries) >= self._bound:
            entries.clear()

        def gone(ref: weakref.ref[Any]) -> None:
            if entries.get(key, (None,))[0] is ref:
                entries.pop(key, None)

        entries[key] = (weakref.ref(spec, gone), value)

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
