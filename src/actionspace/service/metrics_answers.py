"""What one ``/api/metrics`` request may cost: its answers kept a few seconds, one read per tenant.

An answer reads every event of up to ``max_runs`` runs. Without a bound on how often, a client
polling the console's tools page, or many at once, makes the server read them again each time, a
worker thread and the events in memory per request. So:

* an answer is kept :data:`METRICS_TTL_S` seconds for the same principal and question (``since``,
  ``max_runs``); a principal's answer is never another's, so what a tenant sees stays its own;
* each tenant (every principal that sees all tenants counting as one) has at most one answer being
  read at a time; a request for the same question meanwhile waits for it (at most
  :data:`WAITERS` of them); any other is answered 429 ``rate_limited`` with ``Retry-After``, so
  one tenant holds at most one worker thread reading, and never another tenant's.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = ["KEPT_ANSWERS", "METRICS_TTL_S", "WAITERS", "MetricsAnswers"]

METRICS_TTL_S: Final = 5.0
"""Seconds an answer is served again to the same principal for the same question."""
KEPT_ANSWERS: Final = 256
"""Most answers kept (the oldest go first)."""
WAITERS: Final = 8
"""Most requests of one tenant waiting for the answer being read for them."""


@dataclass(slots=True)
class _Reading:
    question: Hashable
    done: threading.Event = field(default_factory=threading.Event)
    waiters: int = 0


class MetricsAnswers:
    """The answers of ``/api/metrics`` kept, and the reads under way per tenant; thread-safe."""

    def __init__(self, *, ttl_s: float = METRICS_TTL_S, clock: Callable[[], float] = time.monotonic) -> None:
        """``ttl_s``: seconds an answer is kept; ``clock``: seconds, for how old an answer is (tests)."""
        self.ttl_s = ttl_s
        self._clock = clock
        self._kept: OrderedDict[Hashable, tuple[float, dict[str, Any]]] = OrderedDict()
        self._reading: dict[Hashable, _Reading] = {}
        self._lock = threading.Lock()

    def answer(
        self, tenant: Hashable, question: Hashable, read: Callable[[], dict[str, Any]]
    ) -> dict[str, Any] | None:
        """The answer to ``question``: kept, or ``read()`` now; None when ``tenant`` is reading
        another answer (the caller answers 429)."""
        with self._lock:
            kept = self._fresh(question)
            if kept is not None:
                return kept
            reading = self._reading.get(tenant)
            if reading is None:
                reading = self._reading[tenant] = _Reading(question)
                mine = True
            elif reading.question == question and reading.waiters < WAITERS:
                reading.waiters += 1
                mine = False
            else:
                return None
        if not mine:
            reading.done.wait()
            with self._lock:
                return self._fresh(question)  # None when that read failed: asked again later
        try:
            answered = read()
            with self._lock:
                self._kept[question] = (self._clock() + self.ttl_s, answered)
                self._kept.move_to_end(question)
                while len(self._kept) > KEPT_ANSWERS:
                    self._kept.popitem(last=False)
            return answered
        finally:
            with self._lock:
                del self._reading[tenant]
            reading.done.set()

    def _fresh(self, question: Hashable) -> dict[str, Any] | None:
        kept = self._kept.get(question)
        if kept is None:
            return None
        if kept[0] <= self._clock():
            del self._kept[question]
            return None
        return kept[1]
