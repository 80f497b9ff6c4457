"""An atomic group's budget, checked once before any of its members runs.

Each member is admitted by the budgets on its own when its turn comes; a group that cannot fit
would run its first members, fail on a later one and roll back, its first calls charged and their
tools called for nothing. So the group's least cost — every member's estimate
(:func:`~actionspace.policy.budget.estimate`, from its tool's declared ``cost``) — is checked
first against what the budgets still allow, and a group that cannot fit is refused whole with
``budget_exceeded``. Only what is known before the group starts counts: a member that may be
served from the read cache counts nothing, and one whose item count depends on another member's
output counts no items. The members are still admitted one by one as they run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from actionspace.catalog.spec import ToolSpec
from actionspace.errors import ActionError
from actionspace.execution.cache import cacheable
from actionspace.plan.refs import find_refs, parse_ref
from actionspace.policy.budget import Meter, Usage, estimate
from actionspace.policy.principal import Principal

__all__ = ["group_estimate", "refuse_over_budget"]

_EPSILON = 1e-9
"""Slack for money sums, as the meter allows (0.1 + 0.2 > 0.3 in floating point)."""


def group_estimate(members: Sequence[tuple[ToolSpec, Mapping[str, Any]]], inside: set[str]) -> Usage:
    """The least the members can use together: ``(spec, arguments)`` each, references to plan
    nodes outside the group resolved, references to members (``inside``) still in place."""
    total = Usage()
    for spec, arguments in members:
        if cacheable(spec):  # a cache hit costs no call
            continue
        counted = spec.batch is not None or spec.items_from is not None
        if counted and any(parse_ref(raw).node in inside for _p, raw in find_refs(dict(arguments))):
            total += estimate(spec, arguments, items=0)  # its items come from a member: not known yet
        else:
            total += estimate(spec, arguments)
    return total


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
    try:
        return await asyncio.to_thread(_refusal, meter, run_id, principal, need, group)
    except Exception:
        return None


def _refusal(meter: Meter, run_id: str, principal: Principal, need: Usage, group: str) -> ActionError | None:
    run_used = meter.used(run_id=run_id)
    shared = meter.used(principal=(principal.id, principal.tenant))
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
