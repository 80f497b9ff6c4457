"""A bounded read cache for the observations of ``none`` / ``read`` tools (DESIGN §8).

Only tools that opt in are cached: ``ToolSpec.cache_ttl`` (seconds an entry serves) or
``ToolSpec.cache_static`` (the output never changes for the same arguments, so the entry, whose
``content_hash`` stays the same, never expires by age, only by LRU eviction). Tools with side
effects are never cached, whatever they declare, and neither is an error, partial, incomplete or
provisional result.

The key binds an entry to the principal (id and tenant), the tool's ``name@version`` and the
RFC 8785 canonical arguments (through a faster encoder when it gives the same bytes): one
principal's entries never serve another, and a new tool version starts empty. A hit is the
original observation with ``provenance.source="cache"``, the original ``provenance.fetched_at``,
and ``diagnostics["cache"] = {"age_s", "ttl_s"}``, so a stale balance
can be told from a fresh one. Entries live in memory, per process.

A committed write drops the entries whose reads its writes overlap (:meth:`ReadCache.invalidate`),
and the reads under way at that moment with them: a read is a :class:`Fill` from the moment it is
dispatched until its answer is stored, and an overlapping write marks it stale, so an answer read
before the write never lands in the cache after it.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import rfc8785

from actionspace._canonical import canonical_bytes, digest_json
from actionspace.catalog.spec import ToolSpec
from actionspace.errors import ConfigurationError
from actionspace.policy.principal import Principal
from actionspace.types import Observation

__all__ = ["Fill", "ReadCache", "cacheable"]


def cacheable(spec: ToolSpec) -> bool:
    """True when calls of ``spec`` may be served from the cache."""
    if spec.effect not in ("none", "read"):
        return False
    ttl = spec.cache_ttl
    return (ttl is not None and ttl > 0) or bool(getattr(spec, "cache_static", False))


@dataclass(frozen=True, slots=True)
class _Entry:
    fields: dict[str, Any]
    """The observation's fields, its provenance already marked ``source="cache"``."""
    produced_at: float
    ttl_s: float | None
    """None: a static entry (no age limit)."""
    spec: ToolSpec | None = None
    arguments: Mapping[str, Any] | None = None
    """The call the entry answers: a committed write whose write set overlaps its read set drops it."""


class Fill:
    """A read under way whose answer the cache will be offered (:meth:`ReadCache.filling`)."""

    __slots__ = ("arguments", "spec", "stale")

    def __init__(self, spec: ToolSpec, arguments: Mapping[str, Any] | None) -> None:
        self.spec = spec
        self.arguments = arguments
        self.stale = False
        """Set when a write overlapping the read was committed while it was under way."""


_MAX_EXACT_INT = 2**53


def _plain(value: Any) -> bool:
    """True when the fast canonical JSON of ``value`` is byte for byte its RFC 8785 form.

    That holds for strings, booleans, null, integers below 2**53, and containers of them whose
    keys are ASCII; floats and other keys take the slower ``rfc8785`` encoder.
    """
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        return bool(-_MAX_EXACT_INT < value < _MAX_EXACT_INT)
    if kind is dict:
        return all(type(k) is str and k.isascii() and _plain(v) for k, v in value.items())
    if kind is list:
        return all(_plain(v) for v in value)
    return False


class ReadCache:
    """LRU map from call keys to observations; thread-safe.

    ``max_entries`` bounds the size (default 1024); ``clock`` returns Unix seconds (default
    ``time.time``; tests pass a controllable one).
    """

    def __init__(self, *, max_entries: int = 1024, clock: Callable[[], float] = time.time) -> None:
        if max_entries < 1:
            raise ConfigurationError(f"ReadCache.max_entries must be >= 1, got {max_entries}")
        self.max_entries = max_entries
        self.clock = clock
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._filling: set[Fill] = set()
        self._lock = threading.Lock()

    @staticmethod
    def key(spec: ToolSpec, principal: Principal, arguments: Mapping[str, Any]) -> str:
        """sha256 over (principal id, tenant, name@version, canonical arguments)."""
        parts = [principal.id, principal.tenant, spec.key, arguments]
        if _plain(arguments):
            body = canonical_bytes(parts)
        else:
            try:
                body = digest_json(parts)
            except rfc8785.CanonicalizationError:  # what RFC 8785 cannot write at all
                body = b"x" + canonical_bytes(parts)
        return hashlib.sha256(body).hexdigest()

    def get(self, key: str, *, call_id: str) -> Observation | None:
        """The cached observation re-addressed to ``call_id``, or None (missing or expired)."""
        now = self.clock()
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            age = max(0.0, now - entry.produced_at)
            if entry.ttl_s is not None and age >= entry.ttl_s:
                del self._entries[key]
                return None
            self._entries.move_to_end(key)
        fields = entry.fields
        info: dict[str, Any] = {"age_s": round(age, 3), "ttl_s": entry.ttl_s}
        if entry.ttl_s is None:
            info["static"] = True
        diagnostics = {**fields["diagnostics"], "cache": info}
        return Observation(**{**fields, "call_id": call_id, "diagnostics": diagnostics})

    def filling(self, spec: ToolSpec, arguments: Mapping[str, Any] | None) -> Fill:
        """Note a read of ``spec`` with ``arguments`` about to be dispatched; hand the result to
        :meth:`put` (or the fill to :meth:`abandon`) when it ends. A write committed meanwhile
        that overlaps the read marks it stale, and :meth:`put` then stores nothing."""
        fill = Fill(spec, arguments)
        with self._lock:
            self._filling.add(fill)
        return fill

    def abandon(self, fill: Fill) -> None:
        """Forget a read noted by :meth:`filling` that ended without a result to store."""
        with self._lock:
            self._filling.discard(fill)

    def put(
        self,
        key: str,
        spec: ToolSpec,
        obs: Observation,
        arguments: Mapping[str, Any] | None = None,
        *,
        fill: Fill | None = None,
    ) -> bool:
        """Keep ``obs`` when it is a complete success of a cacheable tool; True when stored.

        ``fill``: the read that produced ``obs`` (:meth:`filling`); nothing is stored when a write
        overlapping it was committed while it was under way.
        """
        if (
            obs.status != "ok"
            or obs.error is not None
            or obs.provisional
            or not obs.complete
            or not cacheable(spec)
            or obs.diagnostics.get("replayed")
        ):
            if fill is not None:
                self.abandon(fill)
            return False
        static = bool(getattr(spec, "cache_static", False))
        produced = obs.provenance.fetched_at
        ttl = None if static else spec.cache_ttl
        fields = {name: getattr(obs, name) for name in obs.__dataclass_fields__}
        fields["provenance"] = replace(obs.provenance, source="cache")
        entry = _Entry(fields, produced if produced is not None else self.clock(), ttl, spec, arguments)
        with self._lock:
            if fill is not None:  # let go of it and store in one step, as invalidate marks it
                self._filling.discard(fill)
                if fill.stale:
                    return False
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return True

    def invalidate(self, stale: Callable[[ToolSpec, Mapping[str, Any]], bool]) -> int:
        """Drop the entries whose call ``stale(spec, arguments)`` says a write may have changed
        (an entry stored without its call is dropped too), and mark the reads under way that it
        says so of, so that their answers are not stored; returns how many of both."""
        marked = 0
        with self._lock:
            # Reads under way first: one that stores its answer before this is an entry below.
            for fill in self._filling:
                if not fill.stale and (fill.arguments is None or stale(fill.spec, fill.arguments)):
                    fill.stale = True
                    marked += 1
            entries = list(self._entries.items())
        dropped = [
            k for k, e in entries if e.spec is None or e.arguments is None or stale(e.spec, e.arguments)
        ]
        with self._lock:
            for k in dropped:
                self._entries.pop(k, None)
        return len(dropped) + marked

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        """Entries held plus reads under way (both are what a write must reach)."""
        return len(self._entries) + len(self._filling)
