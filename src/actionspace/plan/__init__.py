"""Plans: DAGs of tool calls over read/write sets, checked and scheduled by the runtime (DESIGN §7)."""

from actionspace.plan.conflicts import commute, conflicting, expand, overlaps
from actionspace.plan.model import Alternative, InvalidPlan, Plan, PlanNode, PlanResult, PlanStatus
from actionspace.plan.run import arun_plan
from actionspace.plan.scheduler import CancelScope, ToolLimit
from actionspace.plan.schema import PLAN_SCHEMA

__all__ = [
    "PLAN_SCHEMA",
    "Alternative",
    "CancelScope",
    "InvalidPlan",
    "Plan",
    "PlanNode",
    "PlanResult",
    "PlanStatus",
    "ToolLimit",
    "arun_plan",
    "commute",
    "conflicting",
    "expand",
    "overlaps",
]
