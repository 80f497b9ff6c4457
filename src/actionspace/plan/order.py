"""The edges and the order of a checked plan: declared and referenced edges, Kahn's order, and
an edge for every pair of nodes whose read/write sets do not commute (oriented by that order).
:func:`actionspace.plan.check.check_plan` calls these once the nodes themselves are checked.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING

from actionspace.errors import ActionError, FieldError
from actionspace.plan.conflicts import conflicting

if TYPE_CHECKING:
    from actionspace.plan.check import CheckedNode

__all__ = ["conflict_edges", "declared_edges", "topological"]


def declared_edges(nodes: dict[str, CheckedNode]) -> list[tuple[str, str]]:
    edges: list[tuple[str, str]] = []
    add = edges.append
    for c in nodes.values():
        declared = c.node.depends_on
        if not declared and not c.refs:
            continue
        me, preds, needs = c.node.id, c.preds, c.needs
        for pred in (*declared, *(r.node for r in c.refs)) if c.refs else declared:
            if pred not in preds:
                preds.add(pred)
                needs.add(pred)
                nodes[pred].succs.append(me)
                add((pred, me))
    return edges


def topological(nodes: dict[str, CheckedNode]) -> list[str] | ActionError:
    """Kahn's order, ties broken by listing order; a cycle is an error naming its nodes."""
    if _listed_in_order(nodes):  # what Kahn's order with these ties gives: no heap needed
        return list(nodes)
    indegree = {k: len(c.preds) for k, c in nodes.items()}
    heap = [(c.index, k) for k, c in nodes.items() if indegree[k] == 0]
    heapq.heapify(heap)
    order: list[str] = []
    while heap:
        _, k = heapq.heappop(heap)
        order.append(k)
        for s in nodes[k].succs:
            indegree[s] -= 1
            if indegree[s] == 0:
                heapq.heappush(heap, (nodes[s].index, s))
    if len(order) < len(nodes):
        stuck = [k for k in nodes if indegree[k] > 0]
        return ActionError.of(
            "invalid_arguments",
            f"the plan has a cycle through {stuck[:10]}",
            field_errors=[
                FieldError(path=f"/nodes/{nodes[k].index}/depends_on", message="part of a cycle")
                for k in stuck[:20]
            ],
            details={"cycle": stuck[:50]},
        )
    return order


def _listed_in_order(nodes: dict[str, CheckedNode]) -> bool:
    """Every node is listed after its predecessors (and listing indexes ascend)."""
    last = -1
    for c in nodes.values():
        index = c.index
        if index <= last:
            return False
        last = index
        for p in c.preds:
            pred = nodes.get(p)
            if pred is None or pred.index >= index:
                return False
    return True


def conflict_edges(
    nodes: dict[str, CheckedNode], order: list[str], errors: list[FieldError]
) -> list[dict[str, str]]:
    """Order every non-commuting pair that is not already ordered; reject false independence claims."""
    touching = [c for c in map(nodes.__getitem__, order) if c.writes or c.reads]
    writers = [c for c in touching if c.writes]
    if not writers:
        return []
    position = {k: i for i, k in enumerate(order)}
    ancestors: dict[str, set[str]] = {}
    for k in order:
        acc: set[str] = set()
        for p in nodes[k].preds:
            acc.add(p)
            acc |= ancestors[p]
        ancestors[k] = acc
    added: list[dict[str, str]] = []
    for w in writers:
        for other in touching:
            if other is w or (other.writes and position[other.id] < position[w.id]):
                continue  # writer pairs are seen once, from the earlier writer
            first, second = (w, other) if position[w.id] < position[other.id] else (other, w)
            resource = conflicting(first.reads, first.writes, second.reads, second.writes)
            if resource is None or _commute_by_contract(first, second):
                continue
            claimed = second.id in first.node.independent_of or first.id in second.node.independent_of
            if claimed:
                errors.append(
                    FieldError(
                        path=f"/nodes/{(first if second.id in first.node.independent_of else second).index}"
                        "/independent_of",
                        message=f"{first.id} and {second.id} do not commute: both touch {resource!r}",
                    )
                )
                continue
            if first.id in ancestors[second.id]:
                continue
            if second.needs is second.preds:  # one set so far (check.py): the needs stay as they are
                second.needs = set(second.preds)
            second.preds.add(first.id)
            first.succs.append(second.id)
            ancestors[second.id].add(first.id)
            ancestors[second.id] |= ancestors[first.id]
            added.append({"from": first.id, "to": second.id, "resource": resource})
    return added


def _commute_by_contract(a: CheckedNode, b: CheckedNode) -> bool:
    """Pairs whose declared contract makes them commute although their resource sets overlap.

    Two appends commute when neither reads what the other writes (only the order of the appended
    entries differs). A read pinned to a version (``isolation="at_version"``) reads the same whatever
    a write does to the latest state, so it commutes with writes.
    """
    if _all(a, "write_mode", "append") and _all(b, "write_mode", "append"):
        return (
            conflicting(a.reads, a.writes, b.reads, ()) is None
            and conflicting(a.reads, (), b.reads, b.writes) is None
        )
    # a reader without writes can only conflict through the other's writes: pinned, it does not
    return any(not n.writes and _all(n, "isolation", "at_version") for n in (a, b))


def _all(node: CheckedNode, attribute: str, value: str) -> bool:
    return bool(node.specs) and all(getattr(spec, attribute) == value for spec in node.specs)
