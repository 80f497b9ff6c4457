"""A checked plan and its nodes (:func:`~actionspace.plan.check.check_plan` makes them), and
what each run of a checked plan starts from.

A run's scheduler counts, per node, the predecessors not settled yet, queues the nodes with none,
and at the end lists its observations in the plan's order. Those follow from the checked plan
alone, so :func:`start_of` makes them once per checked plan (a plan object run again keeps its
check: ``plan/_simple_plan.py``) and each run copies them: a copy of a dict of a thousand strings
is one block copied, where building it took a thousand inserts, each a hash table probe.
"""

from __future__ import annotations

import itertools
import operator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from actionspace.catalog.spec import ToolSpec
from actionspace.plan.model import PlanNode
from actionspace.plan.refs import Ref

__all__ = ["CheckedNode", "CheckedPlan", "Start", "start_of"]


@dataclass(slots=True)
class CheckedNode:
    node: PlanNode
    index: int
    specs: tuple[ToolSpec, ...]
    """One spec; several for a speculative node (one per alternative)."""
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    refs: tuple[Ref, ...]
    preds: set[str] = field(default_factory=set)
    """Every node that must end before this one starts."""
    needs: set[str] = field(default_factory=set)
    """The predecessors that must end ok (declared or referenced); conflict edges only order. A
    checked node's ``needs`` is its ``preds`` set itself until a conflict edge is added to
    ``preds`` alone (:func:`~actionspace.plan.order.conflict_edges` copies it first)."""
    succs: list[str] = field(default_factory=list)
    members: tuple[CheckedNode, ...] = ()
    """For an atomic group (see :mod:`actionspace.plan.groups`): its nodes, in the order they run."""
    group: Any = None
    """For an atomic group: the :class:`~actionspace.plan.model.Group` and its environment."""
    scalar_arguments: bool = False
    """Every argument is a scalar: nothing to substitute or copy before the call."""

    @property
    def id(self) -> str:
        return self.node.id


@dataclass(slots=True)
class CheckedPlan:
    nodes: dict[str, CheckedNode]
    """In listing order."""
    edges: list[tuple[str, str]]
    added_edges: list[dict[str, str]]
    order: list[str] = field(default_factory=list)
    """Every node id of the plan, in listing order (group members included)."""
    max_concurrency: int | None = None
    """The plan's own concurrency limit, if it sets one."""
    topo: list[str] = field(default_factory=list)
    """The keys of ``nodes`` in an order where every node follows its predecessors."""
    units: list[str] = field(default_factory=list)
    """The keys of ``nodes`` that stand for an atomic group, in the order of ``nodes``."""
    bare: bool = False
    """Every node is one call of a tool that needs no approval, with no read/write sets and no
    references: ``plan_started`` names only its id and tool."""
    plain: bool = False
    """Every node is plain (:func:`~actionspace.plan.node.is_plain`: no references, alternatives,
    members or verifier), so the driver need not ask each one. Set for a plan checked across the
    plan at once; False (each node asked) otherwise."""
    keys: dict[str, int] | None = field(default=None, compare=False, repr=False)
    """Each node's place in the ready queue (``ready._keys``), made by the first run of the plan."""
    entries: list[dict[str, str]] | None = field(default=None, compare=False, repr=False)
    """A bare plan's ``plan_started`` entries (``run._bare_entries``), made by its first run."""
    start: Start | None = field(default=None, compare=False, repr=False)
    """What each run of the plan starts from (:func:`start_of`), made by its first run."""
    started: dict[bool, Any] | None = field(default=None, compare=False, repr=False)
    """``plan_started``'s data with its encoding made once (``run._started``), by whether the run
    retries a plan: an :class:`~actionspace.trace._encoded.Encoded`, or None when it cannot be."""


class Start(NamedTuple):
    """What each run of a checked plan starts from (never changed: a run copies what it changes)."""

    waiting: dict[str, int]
    """Per node, in listing order, how many predecessors it has."""
    roots: list[str]
    """The nodes without predecessors, in listing order."""
    keys: list[str]
    """The ids a run's result lists, in its order: every node id (group members included), then
    each group's."""
    listed: dict[str, Any]
    """``keys`` as a dict (each value None): copied, then filled, it holds values in that order."""


_PREDS = operator.attrgetter("preds")


def start_of(plan: CheckedPlan) -> Start:
    """:class:`Start` of ``plan``, made on the first call and kept on it."""
    start = plan.start
    if start is None:
        nodes = plan.nodes
        waiting = dict(zip(nodes, map(len, map(_PREDS, nodes.values())), strict=True))
        roots = list(itertools.compress(waiting, map(operator.not_, waiting.values())))
        keys = [*plan.order, *plan.units] or list(nodes)
        start = plan.start = Start(waiting, roots, keys, dict.fromkeys(keys))
    return start
