"""Allowances that refill with time: unknown tokens per client address, requests per principal;
and the bound on the runs each principal has live (:class:`LiveRuns`).

An :class:`Allowance` gives each key ``requests`` to spend at once and gives them back at
``requests`` per ``per_s`` seconds (a token bucket). A refused request spends nothing, so a client
that keeps asking while refused is admitted again as soon as its allowance refills. At most
``keys`` keys are remembered; the one quiet longest is forgotten first (a forgotten key starts
again full), so a client minting keys cannot grow the table without bound.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Final

from actionspace.errors import ConfigurationError
from actionspace.policy.principal import Principal

__all__ = [
    "DEFAULT_MAX_HELD_BYTES",
    "DEFAULT_MAX_LIVE_RUNS",
    "Allowance",
    "HeldBytes",
    "Holding",
    "LiveRuns",
    "RateLimit",
    "json_bytes",
]

DEFAULT_MAX_LIVE_RUNS: Final = 1000
"""Runs one principal may have live on one server at once, by default."""
DEFAULT_MAX_HELD_BYTES: Final = 64 * 1024 * 1024
"""Bytes of submissions (plans, raw outputs, as JSON) one tenant's live runs may hold, by default."""

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


class LiveRuns:
    """The runs each principal started on this server that have not ended, at most ``limit`` each.

    A start is counted from :meth:`take` (before anything of it is written) to the end of its run,
    so any number of starts at once admit exactly as many as the bound leaves room for. A run is
    live while ``live(run_id)`` says so (the runner's view); ended runs are dropped when the
    principal next starts one, so nothing has to report an end. A run taken over from another
    server is counted alike (:class:`Holding`). Thread-safe.
    """

    def __init__(self, limit: int | None, live: Callable[[str], bool]) -> None:
        """``limit``: runs per principal (None: unbounded). Raises ConfigurationError below 1."""
        if limit is not None and limit < 1:
            raise ConfigurationError(f"max_live_runs must be at least 1 (or None), got {limit!r}")
        self.limit = limit
        self._live = live
        self._runs: dict[Hashable, set[str]] = {}
        self._starting: Counter[tuple[Hashable, str]] = Counter()
        self._started: set[tuple[Hashable, str]] = set()
        self._lock = threading.Lock()

    def take(self, key: Hashable, run_id: str) -> bool:
        """Count ``run_id`` as starting for principal ``key``; False (nothing counted) when ``key``
        has ``limit`` other runs live or starting. :meth:`settle` it once the start is done."""
        if self.limit is None:
            return True
        with self._lock:
            runs = self._runs.setdefault(key, set())
            for ended in [r for r in runs if not self._counts(key, r)]:
                runs.discard(ended)
                self._started.discard((key, ended))
            if run_id not in runs and len(runs) >= self.limit:
                return False
            runs.add(run_id)
            self._starting[(key, run_id)] += 1
            return True

    def settle(self, key: Hashable, run_id: str, *, started: bool) -> None:
        """The start of ``run_id`` is done: it counts on while its run is live when ``started``;
        else it counts no more (a start refused ``409`` may name someone else's live run)."""
        if self.limit is None:
            return
        with self._lock:
            self._starting[(key, run_id)] -= 1
            if self._starting[(key, run_id)] <= 0:
                del self._starting[(key, run_id)]
            if started:
                self._started.add((key, run_id))
            elif not self._counts(key, run_id):
                self._runs.get(key, set()).discard(run_id)
                self._started.discard((key, run_id))
            if not self._runs.get(key, True):
                del self._runs[key]

    def _counts(self, key: Hashable, run_id: str) -> bool:
        return (key, run_id) in self._starting or ((key, run_id) in self._started and self._live(run_id))


class HeldBytes:
    """What the live runs of each tenant hold of their submissions, at most ``limit`` bytes each.

    A run keeps what it was given (its plan, its raw outputs) in memory until it ends, for the whole
    of a wait for a person (24 h by default): counted in runs alone, a tenant could park runs of the
    largest body accepted until the process ran out of memory. A submission is counted from
    :meth:`take` (before anything of it is written) to the end of its run, as :class:`LiveRuns`
    counts runs; a run taken over from another server is counted alike (:class:`Holding`). A
    tenant at its bound holds up no other tenant. Thread-safe.
    """

    def __init__(self, limit: int | None, live: Callable[[str], bool]) -> None:
        """``limit``: bytes per tenant (None: unbounded). Raises ConfigurationError below 1."""
        if limit is not None and limit < 1:
            raise ConfigurationError(f"max_held_bytes must be at least 1 (or None), got {limit!r}")
        self.limit = limit
        self._live = live
        self._held: dict[Hashable, dict[object, tuple[str, int]]] = {}  # tenant → start → (run id, bytes)
        self._starting: set[object] = set()
        self._lock = threading.Lock()

    def take(self, tenant: Hashable, run_id: str, size: int) -> object | None:
        """Count ``size`` bytes for a start of ``run_id`` of ``tenant``: a ticket for :meth:`settle`
        once the start is done; None (nothing counted) when that would pass ``limit``."""
        ticket = object()
        if self.limit is None:
            return ticket
        with self._lock:
            starts = self._held.setdefault(tenant, {})
            for ended in [t for t, (r, _) in starts.items() if t not in self._starting and not self._live(r)]:
                del starts[ended]
            if sum(size for _, size in starts.values()) + size > self.limit:
                if not starts:
                    del self._held[tenant]
                return None
            starts[ticket] = (run_id, size)
            self._starting.add(ticket)
            return ticket

    def settle(self, tenant: Hashable, ticket: object, *, started: bool) -> None:
        """The start of ``ticket`` is done: its bytes count on while its run is live when
        ``started``, else no more."""
        if self.limit is None:
            return
        with self._lock:
            self._starting.discard(ticket)
            starts = self._held.get(tenant, {})
            counted = starts.get(ticket)
            if counted is not None and (not started or not self._live(counted[0])):
                del starts[ticket]
            if not starts:
                self._held.pop(tenant, None)

    def held(self, tenant: Hashable) -> int:
        """Bytes ``tenant``'s live runs (and the starts under way) hold now."""
        with self._lock:
            starts = self._held.get(tenant, {})
            return sum(n for t, (r, n) in starts.items() if t in self._starting or self._live(r))


class Holding:
    """A run a server takes over (from a server that died or stopped, found by a scan or brought
    by an approval), counted as a start is: against its principal's :class:`LiveRuns` and its
    tenant's :class:`HeldBytes`. :meth:`admit` is asked before the claim is written (False: the run
    is not taken, nothing is written), and :meth:`settle` once the claim is done. The run then
    counts on both while it is live here."""

    def __init__(self, held: HeldBytes, run_id: str, live: LiveRuns | None = None) -> None:
        self._held, self._live, self._run_id = held, live, run_id
        self._taken: tuple[Hashable, object, Hashable | None] | None = None
        self.refused = False
        """True once :meth:`admit` refused the run (its principal's live runs here are at their
        bound, or its tenant's runs here hold too much)."""

    def admit(self, principal: Principal, body: Any) -> bool:
        """Count the run for ``principal`` and ``body`` (its submission) for its tenant, once
        however often asked; False when that would pass either bound."""
        if self._taken is None:
            key = (principal.tenant, principal.id)
            if self._live is not None and not self._live.take(key, self._run_id):
                self.refused = True
                return False
            ticket = self._held.take(principal.tenant, self._run_id, json_bytes(body))
            if ticket is None and self._live is not None:
                self._live.settle(key, self._run_id, started=False)
            self.refused = ticket is None
            live_key = None if self._live is None else key
            self._taken = None if ticket is None else (principal.tenant, ticket, live_key)
        return self._taken is not None

    def settle(self, *, started: bool) -> None:
        """The claim is done: the run counts on while it is live when ``started``."""
        if self._taken is not None:
            tenant, ticket, key = self._taken
            self._held.settle(tenant, ticket, started=started)
            if self._live is not None and key is not None:
                self._live.settle(key, self._run_id, started=started)
            self._taken = None


def json_bytes(value: Any) -> int:
    """The size of ``value`` as compact UTF-8 JSON: what a run holds of it, in the unit a body is."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return len(text.encode("utf-8", "surrogatepass"))
