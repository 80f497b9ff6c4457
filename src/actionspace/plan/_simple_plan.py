"""Checking a plan of simple nodes listed in dependency order, across the whole plan at once.

The commonest plan (a fan-out of lookups, a DAG of pure steps) has only nodes that
``check._simple_node`` takes — one tool of effect ``none``, scalar arguments, no declared
read/write sets, no independence claims, no alternatives — each depending only on nodes listed
before it. What checking such a plan decides follows from its nodes' fields alone, so
:func:`simple_plan` reads each field across every node with ``map`` (in C) instead of node by
node, and the only loop of ours left makes each node's :class:`~actionspace.plan.check.CheckedNode`.
Anything else — a tool that is not simple or is refused, an edge to a node listed later, a
predecessor named twice, a value of an unexpected type — returns None, and the per-node checks
of :func:`~actionspace.plan.check.check_plan` decide the plan (and name what is wrong).
``tests/plan/test_check_shortcuts.py`` holds both to the same checked plan or the same error.

A plan object run again (a retry, a loop over one plan) is not checked again: :func:`keep` holds
the checked form of a few such plans, and :func:`kept` hands it back while it still says what a
new check would. They are held by the engine the plans ran over (``PlanEngine.checked_plans``,
per plan object by identity: the plan, its check, each tool name's spec in the order the check
resolved them), never by this module, so they go with it: a runtime that is gone leaves none of
its plans, specs or tools' functions behind (``tests/plan/test_kept_check.py``).
A :class:`~actionspace.plan.model.Plan` and its nodes are frozen (tuples of frozen nodes), so
what a check of such a plan reads and a later one could read differently is only each node's
arguments (their values must still be scalars, the one thing the check reads of them) and each
tool's resolution and authorization (the run's resolution, the catalog, the principal), which
are asked again, once per tool. ``tests/plan/test_kept_check.py`` holds a kept
check to a new one under changed arguments, catalogs and principals.
"""

from __future__ import annotations

import itertools
import operator
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, cast

from actionspace.catalog.spec import ToolSpec
from actionspace.errors import ActionError
from actionspace.plan.model import PlanNode
from actionspace.policy.principal import Principal, authorize
from actionspace.validation.verdicts import Rejected

if TYPE_CHECKING:
    from actionspace.plan.check import CheckedNode, CheckedPlan
    from actionspace.plan.model import Plan

__all__ = ["KEPT_MAX", "distinct_ids", "keep", "kept", "plain_tool", "simple_plan", "simple_tools"]

Resolver = Callable[[str], "ToolSpec | ActionError"]
Simple = tuple[tuple[ToolSpec], "ActionError | None"]
"""A tool a simple node may call: its one-spec tuple and the principal's refusal (None: allowed)."""
SimpleTool = Callable[[str], "Simple | None"]

_SCALAR_TYPES = frozenset((str, int, float, bool, type(None)))
_ID = operator.attrgetter("id")
_TOOL = operator.attrgetter("tool")
_DEPENDS_ON = operator.attrgetter("depends_on")
_FIRST_OF = operator.attrgetter("first_of")
_INDEPENDENT_OF = operator.attrgetter("independent_of")
_READS = operator.attrgetter("reads")
_WRITES = operator.attrgetter("writes")
_ARGUMENTS = operator.attrgetter("arguments")
_VALUES = operator.methodcaller("values")
_SUCCS = operator.attrgetter("succs")


def simple_plan(
    nodes: Sequence[PlanNode], ids: Mapping[str, int], tool: SimpleTool, kind: type[CheckedNode]
) -> tuple[dict[str, CheckedNode], list[tuple[str, str]]] | None:
    """The checked nodes (in listing order) and the declared edges of a plan whose every node is
    simple and depends only on nodes listed before it, each named once; None for any other plan.

    ``ids``: each node id → its listing index (distinct ids). ``kind``: the checked node's class.
    Nothing is resolved or authorized before every node's own fields qualify; ``tool`` is asked
    once per tool name, in the order the names first appear.
    """
    chain = itertools.chain.from_iterable
    try:
        if any(map(_FIRST_OF, nodes)) or any(map(_INDEPENDENT_OF, nodes)):
            return None
        n = len(nodes)
        if list(map(_READS, nodes)).count(None) != n or list(map(_WRITES, nodes)).count(None) != n:
            return None
        if not all(map(_SCALAR_TYPES.__contains__, map(type, chain(map(_VALUES, map(_ARGUMENTS, nodes)))))):
            return None
        specs: dict[str, tuple[ToolSpec]] = {}
        for name in dict.fromkeys(map(_TOOL, nodes)):
            simple = tool(name) if name and type(name) is str else None
            if simple is None or simple[1] is not None:  # refused: the per-node checks say so
                return None
            specs[name] = simple[0]
        deps = list(map(_DEPENDS_ON, nodes))
        counts = list(map(len, deps))
        named = list(chain(deps))
        found = list(map(ids.get, named))  # each predecessor's listing index (None: no such node)
        if None in found:
            return None
        at = cast("list[int]", found)
        mine = chain(map(operator.mul, zip(range(n)), counts))  # its node's, for each: (i,) * count
        if not all(map(operator.lt, at, mine)):
            return None  # the node itself, or one listed later
        preds = list(map(set, deps))
        if sum(map(len, preds)) != len(named):  # a predecessor named twice
            return None
    except (TypeError, AttributeError):  # a field of an unexpected type: the per-node checks say what
        return None
    checked: dict[str, CheckedNode] = {}
    new = object.__new__
    for node, i, p in zip(nodes, itertools.count(), preds):
        # CheckedNode(node, i, specs, (), (), (), scalar_arguments=True) with ``p`` as its preds
        # and needs (one set until a conflict edge orders it, order.py), without the generated
        # __init__'s keyword handling
        c: CheckedNode = new(kind)
        c.node, c.index, c.specs = node, i, specs[node.tool]
        c.reads = c.writes = c.refs = c.members = ()
        c.preds = c.needs = p
        c.succs = []
        c.group, c.scalar_arguments = None, True
        checked[node.id] = c
    me = list(chain(map(operator.mul, zip(map(_ID, nodes)), counts)))  # (node id,) * count
    succs = list(map(_SUCCS, checked.values()))
    deque(map(list.append, map(succs.__getitem__, at), me), maxlen=0)  # in the order edges are listed
    return checked, list(zip(named, me, strict=True))


def distinct_ids(names: list[str]) -> dict[str, int] | None:
    """Each id → its listing index, when the ids are distinct ASCII strings; else None."""
    try:
        if not all(map(str.isascii, names)):
            return None
    except TypeError:  # not a string: the general loop says what it says of it
        return None
    ids = dict(zip(names, range(len(names)), strict=True))
    return ids if len(ids) == len(names) else None


def plain_tool(
    name: str, resolve: Resolver, principal: Principal, principal_ok: dict[str, ActionError | None]
) -> Simple | None:
    """((spec,), the principal's refusal or None) of a tool a simple node may call (effect
    ``none``), else None. ``principal_ok`` keeps the refusal per tool key across the plan."""
    spec = resolve(name)
    if isinstance(spec, ActionError) or spec.effect != "none":
        return None
    key = spec.key
    if key not in principal_ok:
        auth = authorize(spec, principal)
        principal_ok[key] = auth.error if isinstance(auth, Rejected) else None
    return (spec,), principal_ok[key]


def simple_tools(
    plain: dict[str, Simple | None],
    resolve: Resolver,
    principal: Principal,
    principal_ok: dict[str, ActionError | None],
) -> SimpleTool:
    """:func:`plain_tool` per name, kept in ``plain`` (the per-node checks read it there too)."""

    def tool(name: str) -> Simple | None:
        if name not in plain:
            plain[name] = plain_tool(name, resolve, principal, principal_ok)
        return plain[name]

    return tool


KEPT_MAX = 8
"""Plans kept at most per engine (all dropped when full): a plan run again is usually run again soon."""


def keep(
    store: dict[int, object], plan: Plan, checked: CheckedPlan, plain: Mapping[str, Simple | None]
) -> None:
    """Keep ``checked``, the check of ``plan`` across the plan (no groups), in ``store`` for
    :func:`kept`; ``plain``: each tool name's simple tool, as the check resolved them (all allowed)."""
    specs = {name: tool[0][0] for name, tool in plain.items() if tool is not None}
    # every node's arguments a dict itself (a frozen node keeps its mapping): kept reads their
    # values with dict.values, not through each one's own values method
    exact = set(map(type, map(_ARGUMENTS, plan.nodes))) <= {dict}
    if len(store) >= KEPT_MAX:
        store.clear()
    store[id(plan)] = (plan, checked, specs, exact)


def kept(store: dict[int, object], plan: Plan, resolve: Resolver, principal: Principal) -> CheckedPlan | None:
    """The check of ``plan`` kept in ``store`` when a new one would give the same: every argument
    is still a scalar, and every tool still resolves to the same spec (asked again, in the same
    order) and is allowed to ``principal``; None otherwise (the plan is checked anew)."""
    entry = cast("tuple[Plan, CheckedPlan, dict[str, ToolSpec], bool] | None", store.get(id(plan)))
    if entry is None or entry[0] is not plan:
        return None
    arguments = map(_ARGUMENTS, plan.nodes)
    values = itertools.chain.from_iterable(
        map(dict.values, arguments) if entry[3] else map(_VALUES, arguments)
    )
    try:
        if not _SCALAR_TYPES.issuperset(map(type, values)):  # what simple_plan reads
            return None
    except (TypeError, AttributeError):
        return None
    principal_ok: dict[str, ActionError | None] = {}
    for name, spec in entry[2].items():
        simple = plain_tool(name, resolve, principal, principal_ok)
        if simple is None or simple[1] is not None or simple[0][0] is not spec:
            return None
    return entry[1]
