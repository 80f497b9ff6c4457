"""Entry point behind ``Runtime.arun_plan``: read, check, trace and schedule one plan."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from actionspace._pipeline import Recorder, resolve
from actionspace.errors import ActionError
from actionspace.plan.check import CheckedNode, check_plan
from actionspace.plan.model import InvalidPlan, Plan, PlanResult
from actionspace.plan.scheduler import CancelScope, Scheduler, ToolLimit
from actionspace.policy.principal import Principal

if TYPE_CHECKING:
    from actionspace.runtime import Runtime

__all__ = ["DEFAULT_CONCURRENCY", "arun_plan"]

DEFAULT_CONCURRENCY = 16
"""Nodes running at once when neither the call nor the plan says."""


async def arun_plan(
    rt: Runtime,
    plan: Plan | Mapping[str, Any],
    *,
    run_id: str | None = None,
    principal: Principal | None = None,
    max_concurrency: int | None = None,
    tool_limits: Mapping[str, int | ToolLimit] | None = None,
    cancel: CancelScope | None = None,
    retry_of: PlanResult | None = None,
) -> PlanResult:
    """Check ``plan`` and run it; a rejected plan is a result with ``status="error"`` and ``error`` set."""
    run = rt._run(run_id, principal)
    who = principal or run.principal
    if not isinstance(plan, Plan):
        try:
            plan = Plan.from_dict(plan)
        except InvalidPlan as exc:
            return _rejected(rt, run.run_id, run, exc.error)
    checked = check_plan(plan, lambda name: resolve(rt.catalog, run, name), who, rt._environments)
    if isinstance(checked, ActionError):
        return _rejected(rt, run.run_id, run, checked)
    rec = Recorder(run, None)
    rec.add(
        "plan_started",
        {
            "nodes": [_node_event(c) for c in itertools.islice(checked.nodes.values(), 1000)],
            "edges": [list(e) for e in checked.edges][:5000],
            "added_edges": checked.added_edges[:1000],
            "retry": retry_of is not None,
        },
    )
    rt._flush(rec)
    limit = max_concurrency or plan.max_concurrency or DEFAULT_CONCURRENCY
    scheduler = Scheduler(
        rt,
        run,
        who,
        checked,
        max_concurrency=limit,
        tool_limits=tool_limits,
        cancel=cancel,
        retry_of=retry_of,
    )
    result = await scheduler.run()
    for obs in result.nodes.values():  # the model is shown every node's observation now
        run.flow.observed(obs)
    rec = Recorder(run, None)
    rec.add(
        "plan_finished",
        {
            "status": result.status,
            "failed": {k: e.category for k, e in result.failed.items()},
            **result.stats,
        },
    )
    rt._flush(rec)
    return result


def _node_event(c: CheckedNode) -> dict[str, Any]:
    event: dict[str, Any] = {"id": c.id, "tool": c.specs[0].key}
    if c.reads:
        event["reads"] = list(c.reads)
    if c.writes:
        event["writes"] = list(c.writes)
    if c.refs:
        event["refs"] = sorted({r.node for r in c.refs})
    if any(spec.requires_approval for spec in c.specs):
        event["requires_approval"] = True  # held for a person before it runs; its branch waits
    return event


def _rejected(rt: Runtime, run_id: str, run: Any, error: ActionError) -> PlanResult:
    rec = Recorder(run, None)
    rec.add("plan_rejected", {"category": error.category, "message": error.message[:500]})
    rt._flush(rec)
    return PlanResult(run_id=run_id, status="error", error=error)
