"""Which observations of an earlier run of a plan a retry (``retry_of``) may take as its own.

A node's ok observation is reused only when the retry asks the same of it: the same run, the
same tools at the same versions, the same arguments (references unresolved), reads and writes,
and every predecessor whose output it consumes was itself reused. Anything else runs again
(a write through the ledger with its key, where changed arguments are a ``conflict``).
"""

from __future__ import annotations

from collections.abc import Container
from typing import TYPE_CHECKING, Any

from actionspace._canonical import args_digest
from actionspace.types import Observation

if TYPE_CHECKING:
    from actionspace.plan.check import CheckedNode
    from actionspace.plan.model import PlanResult

__all__ = ["reusable"]


def reusable(
    retry_of: PlanResult, run_id: str, node: CheckedNode, reused: Container[str]
) -> Observation | None:
    """``node``'s ok observation in ``retry_of`` when the retry may take it; None otherwise.

    ``reused``: the ids of the nodes this retry already took from ``retry_of``."""
    before = retry_of.nodes.get(node.id)
    if before is None or before.status != "ok" or retry_of.run_id != run_id:
        return None
    was = retry_of.planned.get(node.id)
    asked = None if was is None else _action(was)
    if asked is None or asked != _action(node):
        return None
    if not all(p in reused for p in node.needs):  # an input ran again: its value may differ
        return None
    return before


def _action(node: CheckedNode) -> str | None:
    """A digest of what ``node`` asks (None when its arguments are no JSON)."""
    try:
        return args_digest(_shape(node))
    except (ValueError, TypeError, RecursionError):
        return None


def _shape(node: CheckedNode) -> list[Any]:
    plan_node = node.node
    return [
        plan_node.id,
        [spec.key for spec in node.specs],
        plan_node.tool,
        plan_node.arguments,
        [[alt.tool, alt.arguments] for alt in plan_node.first_of],
        None if plan_node.reads is None else list(plan_node.reads),
        None if plan_node.writes is None else list(plan_node.writes),
        [_shape(m) for m in node.members],
    ]
