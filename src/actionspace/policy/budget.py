"""Budgets in real units (calls, items, observation bytes, money) and the meter that enforces them.

A :class:`Budget` limits the usage of one principal's run (``per="run"``) or of one principal
across all its runs (``per="principal"``). A run's usage is kept per principal (id and tenant):
a caller naming another principal's run id spends an allowance of its own, never that run's.
Several budgets compose: ``Budget(calls=20) & Budget(money=1.0)`` (or a list given to
``Runtime(budgets=[...])``) means every one of them applies.

Before dispatch the runtime asks the :class:`Meter` to *admit* the call's :func:`estimate`; the
estimate is reserved at once (so concurrent calls cannot all pass the same check) and replaced by
the actual usage when the call ends, once: a reservation settled again is left as its first
settlement left it, and only the meter that admitted it settles it. Items are counted the same
way whether they arrive as one batch or as many single calls, so splitting a batch never escapes
an ``items`` budget. The
:class:`Meter` here keeps its usage in memory, per process: it starts at zero with every ``Runtime``
and is not shared between processes; :mod:`actionspace.ledger.budget_store` keeps it in the store
every process shares, and reclaims the reservations of processes that died before settling.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from actionspace.catalog.registry import Catalog
from actionspace.catalog.spec import ToolSpec
from actionspace.errors import ActionError
from actionspace.policy._budget_limits import UNITS, Budget, Budgets, Unit
from actionspace.policy._budget_usage import ZERO as ZERO
from actionspace.policy._budget_usage import Usage
from actionspace.policy._budget_usage import admissible as _admissible
from actionspace.policy._budget_usage import as_usage as _usage
from actionspace.policy._budget_usage import vector as _vector
from actionspace.types import ToolCall
from actionspace.validation.items import count_items

__all__ = [
    "UNITS",
    "Budget",
    "Budgets",
    "Meter",
    "Reservation",
    "Usage",
    "drawing_from",
    "estimate",
    "estimate_calls",
    "item_count",
]


def item_count(spec: ToolSpec, arguments: Mapping[str, Any]) -> int:
    """How many items a call acts on: the batch's item count for batch tools, else 1."""
    return count_items(spec, arguments)


def estimate(spec: ToolSpec, arguments: Mapping[str, Any], *, items: int | None = None) -> Usage:
    """The most a call can use: one call, its items, and ``spec.max_observation_bytes`` per item.

    ``items`` overrides the count taken from the arguments. Bytes are the upper bound a trimmed
    observation never exceeds, so an admitted call cannot push a budget past its limit (a bytes
    budget therefore refuses a call once less than that bound remains); money is
    ``cost.per_call + cost.per_item * items + cost.per_byte * bytes``.
    """
    n = item_count(spec, arguments) if items is None else items
    return charge(spec, calls=1, items=n, nbytes=spec.max_observation_bytes * max(1, n))


def estimate_calls(catalog: Catalog, calls: Iterable[ToolCall]) -> Usage:
    """The most ``calls`` can use together: :func:`estimate` of each, summed.

    A call's ``name@version`` resolves in ``catalog`` (a bare name to the current version); raises
    ``UnknownToolError`` for a tool that is not registered.
    """
    total = Usage()
    for call in calls:
        name, _, version = call.name.partition("@")
        total += estimate(catalog.get(name, version or None), call.arguments)
    return total


def charge(spec: ToolSpec, *, calls: int, items: int, nbytes: int) -> Usage:
    """Usage of a call that dispatched ``calls`` times over ``items`` and showed ``nbytes``.

    Money is ``calls * cost.per_call + items * cost.per_item + nbytes * cost.per_byte``, each term
    by :func:`_priced`: never NaN, never negative, never an exception for a misdeclared cost."""
    cost = spec.cost
    money = _priced(calls, cost.per_call) + _priced(items, cost.per_item) + _priced(nbytes, cost.per_byte)
    return Usage(calls=calls, items=items, bytes=nbytes, money=money)


def _priced(count: int, rate: object) -> float:
    """``count * rate`` as a float: a rate that is not a real number (NaN, a string, a callable) is
    infinite, so it never fits a money limit; a negative rate or an unused unit costs nothing; a
    product too large for a float is infinite."""
    if count <= 0:
        return 0.0
    if isinstance(rate, bool) or not isinstance(rate, int | float) or rate != rate:
        return math.inf
    if rate <= 0:
        return 0.0
    try:
        return float(count * rate)
    except OverflowError:
        return math.inf


@dataclass(slots=True)
class Reservation:
    """Usage admitted for one call and not yet settled."""

    run: list[float]
    principal: list[float]
    amount: Usage
    remaining: dict[str, float]
    """Per limited unit, what the applicable budgets allowed before this call."""
    keys: tuple[str, str] | None = None
    """For a meter kept in a store: the run's and the principal's rows (``run`` and ``principal``
    are then copies, and :meth:`Meter.settle` writes the difference to the store)."""
    scope: tuple[str, tuple[str, str | None]] | None = None
    """The run and the principal it was admitted for."""
    token: str | None = None
    """For a meter kept in a store: the row recording this reservation and its owner, so that it is
    reclaimed should its process die first, and settled once by all its copies (None: no row)."""
    ledger_key: str | None = None
    """The ledger key it was admitted under (an atomic group's, for a group's hold): admissions
    drawing on a hold are sent exactly when it is, so a meter in a store records them under it."""
    if_sent: Usage | None = None
    """What it is charged should its process die once its ledger key was sent (a hold's: what the
    members that have not drawn on it yet would be charged, without observation bytes)."""
    drawn: Usage | None = None
    """What of ``amount`` it drew on an atomic group's hold (``drawn_from``); an undo of the group
    gives that back to the hold (:meth:`Meter.settle_all` with ``refill``), not to the budgets."""
    drawn_from: Reservation | None = field(default=None, compare=False, repr=False)
    """The hold it drew ``drawn`` on."""
    settled: bool = field(default=False, compare=False)
    """Settled (or released) already: a meter settles a reservation once, and a later settle of
    it is a no-op; a hold settled is no longer drawn on nor refilled. This process's mark only: a
    meter kept in a store also asks the store, which settles the row once across processes."""
    issuer: object = field(default=None, compare=False, repr=False)
    """The meter that admitted it, the only one that settles it."""


_DRAWING: ContextVar[Reservation | None] = ContextVar("actionspace_budget_drawing", default=None)


@contextmanager
def drawing_from(hold: Reservation | None) -> Iterator[None]:
    """Admissions inside draw first on ``hold`` (an atomic group's reservation of its members'
    estimates, for the same run and principal), so a member is never refused for the room its own
    group holds, and what it draws is no longer held: releasing the hold afterwards (settling it at
    nothing) gives back only what no member drew. None draws on nothing."""
    if hold is None:
        yield
        return
    token = _DRAWING.set(hold)
    try:
        yield
    finally:
        _DRAWING.reset(token)


def _draw_on(hold: Reservation | None, need: tuple[float, ...]) -> list[float]:
    """Per unit, what an admission of ``need`` takes from ``hold`` (0 without one)."""
    if hold is None:
        return [0, 0, 0, 0.0]
    left = _vector(hold.amount)
    return [min(need[i], left[i]) for i in range(4)]


def _holding(run_id: str, principal: tuple[str, str | None]) -> Reservation | None:
    """The hold admissions of ``run_id`` and ``principal`` draw on in this context, if any (a hold
    already settled is none)."""
    hold = _DRAWING.get()
    if hold is None or hold.settled or hold.scope != (run_id, principal):
        return None
    return hold


def _held_if_sent(hold: Reservation, drawn: list[float], sent: tuple[float, ...]) -> list[float] | None:
    """The hold's ``if_sent`` once an admission charged ``sent`` itself (should the process die)
    drew ``drawn`` of it: lowered by ``sent``, and never above what the hold still counts, so a
    reclaim never charges more than was reserved. None when the hold has no ``if_sent``."""
    if hold.if_sent is None:
        return None
    before, left = _vector(hold.if_sent), _vector(hold.amount)
    return [min(max(0, before[i] - sent[i]), max(0, left[i] - drawn[i])) for i in range(4)]


def _capped(if_sent: Usage, hold: Reservation, back: Usage = ZERO) -> list[float]:
    """``if_sent`` per unit, never above what ``hold`` still counts once ``back`` is given back to
    it (so a reclaim never charges more than was reserved)."""
    wanted, left = _vector(if_sent), _vector(hold.amount + back)
    return [min(wanted[i], max(0, left[i])) for i in range(4)]


def _refilled(reservation: Reservation, hold: Reservation | None, actual: Usage = ZERO) -> Usage | None:
    """What ``reservation``, settled at ``actual``, gives back to the ``hold`` it drew on when undone:
    what it drew, less what ``actual`` used of it (per unit, what its reservation did not use), so
    the hold and what it used never count more than they counted together before; None if nothing
    (or when ``hold`` was settled already: then nothing holds that room any more)."""
    if hold is None or hold.settled or reservation.drawn_from is not hold or reservation.drawn is None:
        return None
    drew, amount, used = _vector(reservation.drawn), _vector(reservation.amount), _vector(actual)
    back = [min(drew[i], max(0, amount[i] - used[i])) for i in range(4)]
    return _usage(back) if any(back) else None


def _refill(hold: Reservation | None, back: Usage, undone: Iterable[Reservation]) -> None:
    """Count ``back`` in ``hold`` again, once the reservations ``undone`` gave it back (so never twice)."""
    for reservation in undone:
        reservation.drawn = reservation.drawn_from = None
    if hold is not None and back != ZERO:
        hold.amount = hold.amount + back


def _take(drawn: list[float], if_sent: list[float] | None = None) -> None:
    """Lower the hold being drawn on by ``drawn`` (after the admission that drew it took effect),
    its ``if_sent`` set to ``if_sent`` when given (:func:`_held_if_sent`)."""
    hold = _DRAWING.get()
    if hold is not None and any(drawn):
        hold.amount = hold.amount - _usage(drawn)
        if if_sent is not None:
            hold.if_sent = _usage(if_sent)


_EPSILON = 1e-9
"""Slack for money sums (0.1 + 0.2 > 0.3 in floating point)."""
_INDEX: dict[Unit, int] = {unit: i for i, unit in enumerate(UNITS)}


class Meter:
    """Usage per run and per principal (id and tenant), thread-safe, in memory (``memory://``;
    :mod:`actionspace.ledger.budget_store` keeps it in the database every process shares).

    Usage includes what in-flight calls have reserved. Nothing is ever forgotten during the life of
    the meter: a long-lived process with many runs should call :meth:`forget_run` for finished runs.
    """

    def __init__(self, budgets: Budgets) -> None:
        self.budgets = budgets
        self._limits = [
            (b, b.per == "principal", [(unit, _INDEX[unit], limit) for unit, limit in b.limits().items()])
            for b in budgets
        ]
        self._limited = frozenset(i for _b, _p, limits in self._limits for _u, i, _l in limits)
        self._lock = threading.Lock()
        self._runs: dict[str, dict[tuple[str, str | None], list[float]]] = {}
        """Run id → principal → its usage in that run (a run's usage is kept per principal)."""
        self._principals: dict[tuple[str, str | None], list[float]] = {}

    def used(self, *, run_id: str | None = None, principal: tuple[str, str | None] | None = None) -> Usage:
        """Usage of a principal in a run (of every principal in it, without ``principal``), or of
        a principal across its runs (without ``run_id``)."""
        with self._lock:
            if run_id is not None:
                rows = self._runs.get(run_id, {})
                if principal is not None:
                    vector = rows.get(principal)
                else:
                    vector = [sum(v[i] for v in rows.values()) for i in range(4)] if rows else None
            else:
                vector = self._principals.get(principal) if principal is not None else None
            return ZERO if vector is None else _usage(vector)

    def remaining(self, run_id: str | None, principal: tuple[str, str | None]) -> dict[str, float]:
        """Per limited unit, the least that any applicable budget still allows (never negative)."""
        with self._lock:
            run = self._runs.get(run_id, {}).get(principal, [0, 0, 0, 0.0]) if run_id is not None else None
            return self._remaining(run, self._principals.get(principal, [0, 0, 0, 0.0]))

    def admit(
        self,
        run_id: str,
        principal: tuple[str, str | None],
        amount: Usage,
        *,
        key: str | None = None,
        if_sent: Usage | None = None,
    ) -> Reservation | ActionError:
        """Reserve ``amount`` when every applicable budget has room; else a ``budget_exceeded`` error.

        ``key`` (the ledger key the call will be sent under, if any) and ``if_sent`` (what the call
        costs when it ran but nobody saw its result; default ``amount`` without its bytes) tell a
        meter kept in a store what to charge should this process die before settling; in memory
        the reservation dies with the process, and they are not used.
        """
        need, amount = _admissible(amount, self._limited)
        with self._lock:
            rows = self._runs.get(run_id)
            if rows is None:
                rows = self._runs[run_id] = {}
            run = rows.get(principal)
            if run is None:
                run = rows[principal] = [0, 0, 0, 0.0]
            shared = self._principals.get(principal)
            if shared is None:
                shared = self._principals[principal] = [0, 0, 0, 0.0]
            hold = _holding(run_id, principal)
            if hold is not None and hold.run is not run:  # its run was forgotten: it holds nothing of it
                hold = None
            drawn = _draw_on(hold, need)
            extra = [need[i] - drawn[i] for i in range(4)]
            refused = self._check(run, shared, amount, extra)
            if refused is not None:
                return refused
            remaining = self._remaining(run, shared)
            for i in range(4):
                run[i] += extra[i]
                shared[i] += extra[i]
            hold = hold if any(drawn) else None
            _take(drawn)
            return Reservation(
                run,
                shared,
                amount,
                remaining,
                scope=(run_id, principal),
                drawn=None if hold is None else _usage(drawn),
                drawn_from=hold,
                issuer=self,
            )

    def _check(
        self, run: list[float], shared: list[float], amount: Usage, need: list[float] | None = None
    ) -> ActionError | None:
        """The ``budget_exceeded`` error when ``amount`` (``need`` of it still to find room for,
        when part of it is drawn on a hold) does not fit every applicable budget."""
        if need is None:
            need = list(_vector(amount))
        for budget, per_principal, limits in self._limits:
            used = shared if per_principal else run
            for unit, i, limit in limits:
                if not need[i] <= limit - used[i] + _EPSILON:  # NaN anywhere refuses
                    return _exceeded(budget, unit, _usage(used), amount)
        return None

    def settle(self, reservation: Reservation, actual: Usage) -> None:
        """Replace a reservation by what the call actually used, once.

        A reservation already settled (or released) is left as its first settlement left it: a
        later settle of it is a no-op, so a cleanup path may settle what another one already did
        and the budget never counts less (nor more) than what was used. Raises ``ValueError`` for
        a reservation this meter did not admit (another meter's, or one built by hand)."""
        self._own((reservation,))
        with self._lock:
            self._apply(reservation, actual)

    def _apply(self, reservation: Reservation, actual: Usage) -> None:
        """Settle ``reservation`` at ``actual`` unless it was settled already (the lock held)."""
        if reservation.settled:
            return
        reservation.settled = True
        reserved, spent = _vector(reservation.amount), _vector(actual)
        for i in range(4):
            delta = spent[i] - reserved[i]
            reservation.run[i] += delta
            reservation.principal[i] += delta

    def _own(self, reservations: Iterable[Reservation | None]) -> None:
        """Raise ``ValueError`` unless every reservation given (None aside) was admitted here."""
        for reservation in reservations:
            if reservation is not None and reservation.issuer is not self:
                raise ValueError(
                    "this reservation was admitted by another meter (or built by hand): only the meter "
                    "that admitted a reservation settles it"
                )

    def settle_all(
        self,
        settled: Iterable[tuple[Reservation, Usage]],
        *,
        hold: Reservation | None = None,
        if_sent: Usage | None = None,
        refill: bool = False,
    ) -> None:
        """:meth:`settle` each ``(reservation, actual)`` and, with ``hold`` and ``if_sent``, set what
        ``hold`` is charged should its process die once its ledger key was sent (never more than it
        still holds). ``refill``: a reservation drawn on ``hold`` gives what it drew back to
        ``hold``, not to the budgets (an atomic group's undone member: the hold covers it when the
        group is sent again). A reservation settled already is skipped (the first settlement
        stands), and so is a refill of a hold settled already. A meter kept in a store writes all
        of it in one transaction, so a process killed meanwhile leaves all of it or none; raises
        when the store does not take it, and ``ValueError``, settling nothing, when a reservation
        or ``hold`` was admitted by another meter."""
        pairs = list(settled)
        self._own([hold, *(r for r, _a in pairs)])
        with self._lock:
            back, undone = ZERO, list[Reservation]()
            for reservation, actual in pairs:
                if reservation.settled:
                    continue
                drew = _refilled(reservation, hold, actual) if refill else None
                self._apply(reservation, actual if drew is None else actual + drew)
                if drew is not None:
                    back = back + drew
                    undone.append(reservation)
            _refill(hold, back, undone)
            if hold is not None and if_sent is not None and not hold.settled:
                hold.if_sent = _usage(_capped(if_sent, hold))

    def forget_run(self, run_id: str) -> None:
        """Drop a finished run's usage, of every principal in it (principal usage is kept)."""
        with self._lock:
            self._runs.pop(run_id, None)

    def reclaim(self) -> int:
        """Settle the reservations of processes that died before settling them; how many (in memory,
        none: they died with their process)."""
        return 0

    def close(self) -> None:
        """Release what the meter holds (nothing in memory)."""

    def _remaining(self, run: list[float] | None, shared: list[float]) -> dict[str, float]:
        out: dict[str, float] = {}
        for _, per_principal, limits in self._limits:
            used = shared if per_principal else run
            if used is None:
                continue
            for unit, i, limit in limits:
                left = limit - used[i]
                if left < 0:
                    left = 0
                known = out.get(unit)
                if known is None or left < known:
                    out[unit] = left
        return out


def _exceeded(budget: Budget, unit: Unit, used: Usage, amount: Usage) -> ActionError:
    limits = budget.limits()
    left = {u: max(0, limit - getattr(used, u)) for u, limit in limits.items()}
    return ActionError.of(
        "budget_exceeded",
        f"the {unit} budget per {budget.per} would be exceeded: this call needs up to "
        f"{getattr(amount, unit)} and {left[unit]} of {limits[unit]} {unit} remain",
        details={
            "budget": budget.to_dict(),
            "unit": unit,
            "used": used.to_dict(),
            "estimate": amount.to_dict(),
            "remaining": left,
        },
    )
