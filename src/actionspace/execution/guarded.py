"""Budget admission and the read cache around one call's execution.

:class:`Guard` exists only when budgets are configured or a cacheable tool is registered; the
pipeline asks it to :meth:`~Guard.admit` a call after authorization. The returned
:class:`Admission` (None when neither budgets nor the cache concern the call) then wraps the
execution: it serves a cache hit without dispatching, stores fresh results, and settles the budget
reservation with what the call actually used.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from actionspace._canonical import json_size
from actionspace.catalog.spec import ToolSpec
from actionspace.errors import ActionError, said_safely
from actionspace.execution.cache import Fill, ReadCache, cacheable
from actionspace.policy.budget import Meter, Reservation, Usage, charge, estimate, item_count
from actionspace.policy.labels import Label
from actionspace.policy.principal import Principal
from actionspace.policy.stamped import restamped
from actionspace.types import Observation

__all__ = ["Admission", "Guard", "observation_bytes"]

Record = Callable[[str, Mapping[str, Any]], None]


def observation_bytes(obs: Observation) -> int:
    """Bytes of the canonical JSON of an observation's data, its items' data included."""
    size = json_size(obs.data) if obs.data is not None else 0
    return size + sum(observation_bytes(item) for item in obs.items)


def _dispatched_items(obs: Observation, items: int) -> int:
    """Items this execution sent: a retried batch replays its committed items from the ledger."""
    if obs.diagnostics.get("replayed"):
        return 0
    if items >= 1 and len(obs.items) == items:
        return sum(1 for item in obs.items if not item.diagnostics.get("replayed"))
    return items


@dataclass(slots=True)
class Admission:
    """A call admitted by the guard: its reservation, its cache key and a hit, if any."""

    spec: ToolSpec
    meter: Meter | None
    reservation: Reservation | None
    cache: ReadCache | None
    cache_key: str | None
    hit: Observation | None
    items: int
    arguments: Mapping[str, Any] | None = None
    fill: Fill | None = None
    """The read under way, from dispatch until its result is offered to the cache."""
    label: Label | None = None
    """The call's output label: a hit carries it joined with the label it was cached with."""

    def run(self, record: Record, execute: Callable[[], Observation]) -> Observation:
        """Serve the hit, or execute and settle."""
        if self.hit is not None:
            return self._served(record, self.hit)
        self._filling()
        try:
            obs = execute()
        except BaseException:
            self._abandoned()
            raise
        return self._done(record, obs)

    async def arun(self, record: Record, execute: Callable[[], Awaitable[Observation]]) -> Observation:
        """Async :meth:`run`."""
        if self.hit is not None:
            return self._served(record, self.hit)
        self._filling()
        try:
            obs = await execute()
        except BaseException:
            self._abandoned()
            raise
        return self._done(record, obs)

    async def stream(
        self, record: Record, observations: AsyncGenerator[Observation, None]
    ) -> AsyncGenerator[Observation, None]:
        """:meth:`run` for a streaming tool: settles on the final (non-provisional) observation."""
        if self.hit is not None:
            await observations.aclose()
            yield self._served(record, self.hit)
            return
        final = None
        self._filling()
        try:
            async with contextlib.aclosing(observations):
                async for obs in observations:
                    if not obs.provisional:
                        final = obs
                    yield obs
        except BaseException:
            self._abandoned()
            raise
        if final is None:
            self._abandoned()
        else:
            self._done(record, final)

    def _served(self, record: Record, hit: Observation) -> Observation:
        hit = restamped(hit, self.label)
        if self.meter is not None and self.reservation is not None:
            self._settle(self.meter, self.reservation, self.reservation.amount)
        info = hit.diagnostics["cache"]
        record("cache_hit", {"tool": self.spec.name, "version": self.spec.version, **info})
        record(
            "observation",
            {
                "status": hit.status,
                "tool": self.spec.name,
                "version": self.spec.version,
                "content_hash": hit.content_hash,
                "source": "cache",
            },
        )
        return hit

    def _filling(self) -> None:
        """Note the read about to be dispatched, so a write committed meanwhile reaches it."""
        if self.cache is not None and self.cache_key is not None:
            self.fill = self.cache.filling(self.spec, self.arguments)

    def _done(self, record: Record, obs: Observation) -> Observation:
        if self.cache is not None and self.cache_key is not None:
            fill, self.fill = self.fill, None
            self.cache.put(self.cache_key, self.spec, obs, self.arguments, fill=fill)
        if self.meter is not None and self.reservation is not None:
            nbytes = observation_bytes(obs)
            items = _dispatched_items(obs, self.items)
            if items == 0 and (obs.diagnostics.get("replayed") or self.items > 0):
                actual = Usage(bytes=nbytes)  # the ledger served it all: nothing was dispatched
            else:
                actual = charge(self.spec, calls=1, items=items, nbytes=nbytes)
            unsettled = self._settle(self.meter, self.reservation, actual)
            if unsettled is None:
                record("metered", {"charged": actual.to_dict()})
                notes: dict[str, Any] = {}
            else:  # the call ran: its observation stands, with the reservation as its usage
                record("metered", {"charged": actual.to_dict(), "recorded": False})
                notes = {"budget_unsettled": unsettled}
            left = _left(self.reservation.remaining, actual)
            if left:  # the model (and its loop) can see how much budget the run has left
                notes["budget_remaining"] = left
            if notes:
                obs = dataclasses.replace(obs, diagnostics={**obs.diagnostics, **notes})
        return obs

    def _abandoned(self) -> None:
        fill, self.fill = self.fill, None
        if fill is not None and self.cache is not None:
            self.cache.abandon(fill)
        # The call may have run before it was interrupted: charge it, without observation bytes.
        if self.meter is not None and self.reservation is not None:
            self._settle(self.meter, self.reservation, charge(self.spec, calls=1, items=self.items, nbytes=0))

    @staticmethod
    def _settle(meter: Meter, reservation: Reservation, actual: Usage) -> str | None:
        """Settle ``reservation`` at ``actual``; why the store did not take it, or None. A call
        that ran keeps its observation whatever the meter's store does: its reservation stays
        counted, so the budget errs on the side of having been spent."""
        try:
            meter.settle(reservation, actual)
        except Exception as exc:
            why = f"{type(exc).__name__}: {said_safely(exc, 200)}"
            return f"the budget store did not record this call's usage ({why})"
        return None


def _left(before: Mapping[str, float], used: Usage) -> dict[str, float]:
    """Per limited unit, what remains after a call that used ``used`` (never negative)."""
    return {unit: max(0, left - getattr(used, unit)) for unit, left in before.items()}


class Guard:
    """Budgets (through a :class:`Meter`) and a :class:`ReadCache`, either of which may be absent."""

    __slots__ = ("_estimates", "cache", "meter")

    def __init__(self, *, meter: Meter | None, cache: ReadCache | None) -> None:
        self.meter = meter
        self.cache = cache
        self._estimates: dict[str, tuple[ToolSpec, Usage]] = {}
        """name@version → (spec, estimate) of tools that are not batches: one estimate per spec."""

    def admit(
        self,
        spec: ToolSpec,
        arguments: Mapping[str, Any],
        *,
        run_id: str,
        principal: Principal,
        call_id: str,
        record: Record,
        fresh: bool = False,
        ledger_key: str | None = None,
        label: Label | None = None,
    ) -> Admission | ActionError | None:
        """Look the call up in the cache and reserve its estimate; an error means it must not run.

        ``fresh``: the caller wants a new read, not a cached one (the result is cached again).
        ``ledger_key``: the key the ledger will send the call under, if any (a meter in a store
        asks the ledger whether it was sent, should this process die before settling it).
        ``label``: the call's output label, which a hit carries too (:func:`restamped`).
        """
        cache, meter = self.cache, self.meter
        key = hit = None
        if cache is not None and cacheable(spec):
            key = cache.key(spec, principal, arguments)
            hit = None if fresh else cache.get(key, call_id=call_id)
        if meter is None:
            return (
                None
                if key is None
                else Admission(spec, None, None, cache, key, hit, 0, arguments, label=label)
            )
        if hit is not None:
            items, amount = 0, Usage(bytes=observation_bytes(hit))
        else:
            items, amount = self._estimate(spec, arguments)
        try:
            sent = Usage() if hit is not None else charge(spec, calls=1, items=items, nbytes=0)
            reservation = meter.admit(
                run_id, (principal.id, principal.tenant), amount, key=ledger_key, if_sent=sent
            )
        except Exception as exc:  # the meter's store did not answer: nothing is reserved or sent
            return ActionError.unsent("the budget store could not reserve the call's estimate", exc)
        if isinstance(reservation, ActionError):
            details = reservation.details
            record(
                "budget",
                {
                    "verdict": "denied",
                    "category": "budget_exceeded",
                    "unit": details["unit"],
                    "estimate": amount.to_dict(),
                    "remaining": details["remaining"],
                },
            )
            return reservation
        record(
            "budget",
            {"verdict": "allowed", "estimate": amount.to_dict(), "remaining": reservation.remaining},
        )
        return Admission(spec, meter, reservation, cache, key, hit, items, arguments, label=label)

    def _estimate(self, spec: ToolSpec, arguments: Mapping[str, Any]) -> tuple[int, Usage]:
        if spec.batch is not None or spec.items_from is not None:
            items = item_count(spec, arguments)
            return items, estimate(spec, arguments, items=items)
        known = self._estimates.get(spec.key)
        if known is None or known[0] is not spec:
            known = self._estimates[spec.key] = (spec, estimate(spec, arguments, items=1))
        return 1, known[1]
