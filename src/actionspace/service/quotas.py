"""Allowances that refill with time: unknown tokens per client address, requests per principal.

An :class:`Allowance` gives each key ``requests`` to spend at once and gives them back at
``requests`` per ``per_s`` seconds (a token bucket). A refused request spends nothing, so a client
that keeps asking while refused is admitted again as soon as its allowance refills. At most
``keys`` keys are remembered; the one quiet longest is forgotten first (a forgotten key starts
again full), so a client minting keys cannot grow the table without bound.
"""

from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Final

from actionspace.errors import ConfigurationError

__all__ = ["Allowance", "RateLimit"]

_UNITS: Final = {"second": 1.0, "minute": 60.0, "hour": 3600.0}
_SPELLED: Final = re.compile(r"\s*([0-9]{1,9})\s*/\s*(second|minute|hour)\s*", re.IGNORECASE)


@dataclass(frozen=True, kw_only=True, slots=True)
class RateLimit:
    """At most ``requests`` at once, given back at ``requests`` per ``per_s`` seconds."""

    requests: int
    """Requests one key may make at once, and the number given back every ``per_s`` seconds."""
    per_s: float = 60.0
    """The period, in seconds (default a minute)."""

    def __post_init__(self) -> None:
        if self.requests < 1 or not self.per_s > 0:
            raise ConfigurationError(f"a rate limit needs at least 1 request per positive period, got {self}")

    @classmethod
    def parse(cls, text: str) -> RateLimit:
        """``"N/second"``, ``"N/minute"`` or ``"N/hour"`` (N ≥ 1). Raises ConfigurationError otherwise."""
        spelled = _SPELLED.fullmatch(text)
        if spelled is None:
            raise ConfigurationError(f"a rate limit reads N/second, N/minute or N/hour, got {text[:80]!r}")
        return cls(requests=int(spelled[1]), per_s=_UNITS[spelled[2].lower()])

    def __str__(self) -> str:
        unit = next((name for name, s in _UNITS.items() if s == self.per_s), None)
        return f"{self.requests}/{unit}" if unit else f"{self.requests} per {self.per_s:g} s"


class Allowance:
    """Requests left to each key under one :class:`RateLimit` (see the module docstring); thread-safe."""

    def __init__(
        self, limit: RateLimit, *, keys: int = 10_000, clock: Callable[[], float] = time.monotonic
    ) -> None:
        """``keys``: most keys remembered; ``clock``: seconds, for what is given back (tests)."""
        self.limit = limit
        self._keys = keys
        self._clock = clock
        self._spent: OrderedDict[Hashable, tuple[float, float]] = OrderedDict()
        """Key → (requests spent, when last counted)."""
        self._lock = threading.Lock()  # routes (and the checks before them) run on several threads

    def wait(self, key: Hashable) -> float | None:
        """Seconds until ``key`` may make one more request; None when it may now (nothing is spent)."""
        with self._lock:
            return self._wait(self._spent_now(key))

    def spend(self, key: Hashable) -> None:
        """Count one request of ``key``, whether or not it had any left."""
        with self._lock:
            self._count(key, self._spent_now(key) + 1)

    def take(self, key: Hashable) -> float | None:
        """Spend one request of ``key`` if it has one left (None); else the seconds until it has."""
        with self._lock:
            spent = self._spent_now(key)
            wait = self._wait(spent)
            if wait is None:
                self._count(key, spent + 1)
            return wait

    def _wait(self, spent: float) -> float | None:
        over = spent - (self.limit.requests - 1)
        return None if over <= 0 else over * self.limit.per_s / self.limit.requests

    def _spent_now(self, key: Hashable) -> float:
        spent, at = self._spent.get(key, (0.0, 0.0))
        return max(0.0, spent - (self._clock() - at) * self.limit.requests / self.limit.per_s)

    def _count(self, key: Hashable, spent: float) -> None:
        self._spent[key] = (spent, self._clock())
        self._spent.move_to_end(key)
        while len(self._spent) > self._keys:
            self._spent.popitem(last=False)
