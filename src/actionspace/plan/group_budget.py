"""An atomic group's budget, checked once before any of its members runs.

Each member is admitted by the budgets on its own when its turn comes; a group that cannot fit
would run its first members, fail on a later one and roll back, its first calls charged and their
tools called for nothing. So the group's least cost — every member's estimate
(:func:`~actionspace.policy.budget.estimate`, from its tool's declared ``cost``) — is checked
first against what the budgets still allow, and a group that cannot fit is refused whole with
``budget_exceeded``. Only what is known before the group starts counts: a member whose item count
depends on another member's output counts no items. A member the read cache could serve counts its
whole estimate: the group runs it inside its transaction all the same and charges its call in full
(:func:`settle_members`), whatever its own admission reserved for the hit. The members are still
admitted one by one as they run.

A group about to be sent does not only check that least cost, it reserves it
(:func:`reserve_group`): a check alone let groups and calls running at the same time all see the
same room, start their members, and fail half-way for the budget (their first members' tools
called for nothing). Its members' admissions draw on that hold
(:func:`~actionspace.policy.budget.drawing_from`), and :func:`release_group` gives back what no
member drew when the group ends. The hold names the group's ledger key and what its members are
charged once it was sent (:func:`group_if_sent`), and its members' admissions are recorded under
that key, so should the process die with the hold open, a meter kept in a store settles it as the
group's entry says: a group never sent frees the hold and its members' reservations; a group sent
stays charged what its members would have been charged (without the observation bytes nobody saw).

Each member's reservation is settled with its group (:func:`settle_members`), never by the member's
own call: to what the member used when the group committed (or may have), to nothing when the
group rolled back (:func:`undo_members`, which also charges the hold nothing should the process die
before releasing it), so a group that never became visible costs nothing. Each member's reservation
records what it drew on the hold, and an undo gives that back to the hold, not to the budgets: a
group sent again (its commit unknown, then found not committed) is covered by its hold alone, and
:func:`rearm_hold` charges it, should the process die, what the whole group is charged once sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from actionspace.catalog.spec import ToolSpec
from actionspace.errors import ActionError, said_safely
from actionspace.execution.guarded import Admission, observation_bytes
from actionspace.plan.refs import find_refs, parse_ref
from actionspace.policy.budget import ZERO, Meter, Reservation, Usage, charge, estimate, item_count
from actionspace.policy.principal import Principal
from actionspace.types import Observation

__all__ = [
    "group_estimate",
    "group_if_sent",
    "over_budget",
    "rearm_hold",
    "refuse_over_budget",
    "release_group",
    "reserve_group",
    "settle_members",
    "undo_members",
]

_EPSILON = 1e-9
"""Slack for money sums, as the meter allows (0.1 + 0.2 > 0.3 in floating point)."""


def group_estimate(members: Sequence[tuple[ToolSpec, Mapping[str, Any]]], inside: set[str]) -> Usage:
    """The least the members can use together: ``(spec, arguments)`` each, references to plan
    nodes outside the group resolved, references to members (``inside``) still in place."""
    total = Usage()
    for spec, arguments, items in _counted(members, inside):
        total += estimate(spec, arguments, items=items)
    return total


def group_if_sent(members: Sequence[tuple[ToolSpec, Mapping[str, Any]]], inside: set[str]) -> Usage:
    """What the members counted by :func:`group_estimate` are charged once the group was sent,
    should nobody see their results (its process killed): one call, its items and their money
    each, without the observation bytes."""
    total = Usage()
    for spec, arguments, items in _counted(members, inside):
        n = item_count(spec, arguments) if items is None else items
        total += charge(spec, calls=1, items=n, nbytes=0)
    return total


def _counted(
    members: Sequence[tuple[ToolSpec, Mapping[str, Any]]], inside: set[str]
) -> Iterator[tuple[ToolSpec, Mapping[str, Any], int | None]]:
    """The members a group's estimate counts (all of them: a cache hit is run by the group all
    the same), each with its item count when not the arguments'."""
    for spec, arguments in members:
        counted = spec.batch is not None or spec.items_from is not None
        if counted and any(parse_ref(raw).node in inside for _p, raw in find_refs(dict(arguments))):
            yield spec, arguments, 0  # its items come from a member: not known yet
        else:
            yield spec, arguments, None


async def refuse_over_budget(
    meter: Meter | None, run_id: str, principal: Principal, need: Usage, group: str
) -> ActionError | None:
    """``budget_exceeded`` when ``need`` does not fit what some budget still allows; else None.

    The meter's store is read off the event loop unless it is kept in memory; a store that does
    not answer refuses nothing here (each member's own admission still applies)."""
    if meter is None:
        return None
    if type(meter) is Meter:
        return _refusal(meter, run_id, principal, need, group)
    return await asyncio.to_thread(over_budget, meter, run_id, principal, need, group)


async def reserve_group(
    meter: Meter | None,
    run_id: str,
    principal: Principal,
    need: Usage,
    group: str,
    *,
    key: str | None = None,
    if_sent: Usage | None = None,
) -> Reservation | ActionError | None:
    """Reserve ``need`` for the group's members (the hold they draw on); ``budget_exceeded`` when
    it does not fit what some budget still allows; None without a meter, or when the meter's store
    does not answer (each member's own admission still applies). Release it with
    :func:`release_group` once the group has ended.

    ``key``: the group's ledger key; ``if_sent``: what its members are charged once it was sent
    (:func:`group_if_sent`). Should this process die before releasing the hold, a meter kept in a
    store settles the hold and the members' admissions drawn on it as the group's ledger entry
    says: never sent, freed; sent, charged ``if_sent`` in all (no observation bytes)."""
    if meter is None:
        return None
    if type(meter) is Meter:
        return _reserved(meter, run_id, principal, need, group, key, if_sent)
    return await asyncio.to_thread(_reserved, meter, run_id, principal, need, group, key, if_sent)


def _reserved(
    meter: Meter,
    run_id: str,
    principal: Principal,
    need: Usage,
    group: str,
    key: str | None,
    if_sent: Usage | None,
) -> Reservation | ActionError | None:
    try:
        held = meter.admit(run_id, (principal.id, principal.tenant), need, key=key, if_sent=if_sent)
    except Exception:
        return None
    if isinstance(held, Reservation):
        held.ledger_key, held.if_sent = key, if_sent  # what its members' admissions are sent with
        return held
    details = held.details
    unit, budget = details["unit"], details["budget"]
    return ActionError.of(
        "budget_exceeded",
        f"group {group} needs at least {getattr(need, unit)} {unit} for its members together and "
        f"{details['remaining'][unit]} of {budget[unit]} {unit} per {budget['per']} remain; "
        "none of its members was run",
        details={**details, "group": group},
    )


def release_group(meter: Meter | None, hold: Reservation | None) -> str | None:
    """Give back what no member drew of a group's hold, in the calling thread (so no cancel comes
    between the group's end and its release); why the meter's store did not take it, or None. A
    hold the store did not release stays counted: the budget errs on the side of spent."""
    if meter is None or hold is None:
        return None
    try:
        meter.settle(hold, ZERO)
    except Exception as exc:
        return f"{type(exc).__name__}: {said_safely(exc, 200)}"
    return None


def over_budget(
    meter: Meter, run_id: str, principal: Principal, need: Usage, group: str
) -> ActionError | None:
    """:func:`refuse_over_budget` in the calling thread (the meter's store read here)."""
    try:
        return _refusal(meter, run_id, principal, need, group)
    except Exception:
        return None


def _refusal(meter: Meter, run_id: str, principal: Principal, need: Usage, group: str) -> ActionError | None:
    who = (principal.id, principal.tenant)
    run_used, shared = meter.used(run_id=run_id, principal=who), meter.used(principal=who)
    for budget in meter.budgets:
        used = shared if budget.per == "principal" else run_used
        for unit, limit in budget.limits().items():
            needed, spent = getattr(need, unit), getattr(used, unit)
            if needed <= limit - spent + _EPSILON:
                continue
            left = {u: max(0, lim - getattr(used, u)) for u, lim in budget.limits().items()}
            return ActionError.of(
                "budget_exceeded",
                f"group {group} needs at least {needed} {unit} for its members together and "
                f"{left[unit]} of {limit} {unit} per {budget.per} remain; none of its members was run",
                details={
                    "budget": budget.to_dict(),
                    "unit": unit,
                    "used": used.to_dict(),
                    "estimate": need.to_dict(),
                    "remaining": left,
                    "group": group,
                },
            )
    return None


def settle_members(
    admitted: Mapping[str, Admission], done: Mapping[str, Observation], *, kept: bool
) -> list[tuple[str, Usage, str | None]]:
    """Settle the reservation of every member in ``admitted`` (member id → its admission).

    ``kept``: the group committed, or may have: each member is charged what it used (one call, its
    items, the bytes of its observation in ``done``); else each reservation is released. Returns
    (member, charged, why the meter's store did not take it or None) per settled member. Settles in
    the calling thread, as a plain call's admission does, so no cancel can come between the group's
    end and its members' settlement.
    """
    out: list[tuple[str, Usage, str | None]] = []
    for member, admission in admitted.items():
        if admission.meter is None or admission.reservation is None:
            continue
        obs = done.get(member)
        if not kept:
            used = ZERO
        elif obs is None:  # admitted, never observed: it stays charged its estimate
            used = admission.reservation.amount
        else:
            used = _used(admission, obs)
        try:
            admission.meter.settle(admission.reservation, used)
        except Exception as exc:  # the group's outcome stands; its reservation stays counted
            out.append((member, used, f"{type(exc).__name__}: {said_safely(exc, 200)}"))
        else:
            out.append((member, used, None))
    return out


def undo_members(
    meter: Meter | None, admitted: Mapping[str, Admission], hold: Reservation | None
) -> list[tuple[str, Usage, str | None]]:
    """Release the reservations of a group that rolled back (or never began) and charge its hold
    nothing should its process die now, in one write of the meter's store: the group never became
    visible, so a process killed before the hold is released is charged nothing for it (its
    members that ran, were undone, or never ran alike). What a member drew on the hold goes back
    to the hold, not to the budgets, so the hold alone covers the group should it be sent again
    (no call running meanwhile can take that room). Returns what :func:`settle_members` does.
    Before the group is sent again, :func:`rearm_hold` restores what the hold is charged if sent."""
    settled = [
        (member, admission.reservation)
        for member, admission in admitted.items()
        if admission.meter is not None and admission.reservation is not None
    ]
    if meter is None:
        meter = next((a.meter for a in admitted.values() if a.meter is not None), None)
    if meter is None or (not settled and hold is None):
        return []
    try:
        zeroed = [(reservation, ZERO) for _m, reservation in settled]
        meter.settle_all(zeroed, hold=hold, if_sent=ZERO, refill=True)
    except Exception as exc:  # the rollback stands; what was reserved stays counted
        why = f"{type(exc).__name__}: {said_safely(exc, 200)}"
        return [(member, ZERO, why) for member, _r in settled]
    return [(member, ZERO, None) for member, _r in settled]


def rearm_hold(meter: Meter | None, hold: Reservation | None, if_sent: Usage | None) -> str | None:
    """Set what ``hold`` is charged, should its process die once the group was sent, back to
    ``if_sent`` (:func:`group_if_sent`; never more than the hold counts, which is its whole
    reservation again after :func:`undo_members`) before the group is sent again; why the meter's
    store did not take it, or None. A group whose hold was not rearmed must not be sent."""
    if meter is None or hold is None or if_sent is None:
        return None
    try:
        meter.settle_all((), hold=hold, if_sent=if_sent)
    except Exception as exc:
        return f"{type(exc).__name__}: {said_safely(exc, 200)}"
    return None


def _used(admission: Admission, obs: Observation) -> Usage:
    spec = admission.spec
    items = admission.items
    if admission.hit is not None:  # the group ran it all the same: its items as sent
        items = item_count(spec, admission.arguments or {})
    return charge(spec, calls=1, items=items, nbytes=observation_bytes(obs))
