"""The edges and the order of a checked plan: declared and referenced edges, Kahn's order, and
an edge for every pair of nodes whose read/write sets do not commute (oriented by that order).
:func:`actionspace.plan.check.check_plan` calls these once the nodes themselves are checked.
"""

from __future__ import annotations

import heapq
import itertools
from typing import TYPE_CHECKING

from actionspace.errors import ActionError, FieldError
from actionspace.plan.conflicts import conflicting, overlaps

if TYPE_CHECKING:
    from actionspace.plan.check import CheckedNode

__all__ = ["conflict_edges", "declared_edges", "topological"]


def declared_edges(nodes: dict[str, CheckedNode], start: int = 0) -> list[tuple[str, str]]:
    """The edges declared and referenced by the nodes from the ``start``-th on (those before it
    have theirs), each added to the nodes' sets, in listing order."""
    edges: list[tuple[str, str]] = []
    add = edges.append
    for c in itertools.islice(nodes.values(), start, None):
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
    """Order every non-commuting pair that is not already ordered; reject false independence claims.

    Nodes are taken in ``order``. The earlier nodes a node may conflict with are found through its
    resource patterns (:class:`_Touched`), latest first, and an edge is added from one only when
    the order is not implied yet (it is not an ancestor): writes to one resource form one chain,
    not an edge per pair. The order is the same as an edge for every conflicting pair would give.
    """
    touching = [c for c in map(nodes.__getitem__, order) if c.writes or c.reads]
    if not any(c.writes for c in touching):
        return []
    position = {k: i for i, k in enumerate(order)}
    _false_claims(touching, nodes, position, errors)
    ancestors: dict[str, int] = {}  # node → the positions of its ancestors, as bits
    touched = _Touched()
    added: list[tuple[int, int, dict[str, str]]] = []
    for k in order:
        second = nodes[k]
        before = 0
        for p in second.preds:
            before |= ancestors[p] | (1 << position[p])
        if second.writes or second.reads:
            candidates = sorted(touched.may_conflict(second), key=lambda c: -position[c.id])
            for first in candidates:
                bit = 1 << position[first.id]
                if before & bit:
                    continue
                resource = conflicting(first.reads, first.writes, second.reads, second.writes)
                if resource is None or _commute_by_contract(first, second):
                    continue
                if first.id in second.node.independent_of or second.id in first.node.independent_of:
                    continue  # refused by _false_claims
                if second.needs is second.preds:  # one set so far (check.py): the needs stay as they are
                    second.needs = set(second.preds)
                second.preds.add(first.id)
                first.succs.append(second.id)
                before |= ancestors[first.id] | bit
                edge = {"from": first.id, "to": second.id, "resource": resource}
                added.append((position[first.id], position[second.id], edge))
            touched.add(second)
        ancestors[k] = before
    added.sort(key=lambda e: (e[0], e[1]))
    return [edge for _, _, edge in added]


def _false_claims(
    touching: list[CheckedNode],
    nodes: dict[str, CheckedNode],
    position: dict[str, int],
    errors: list[FieldError],
) -> None:
    """A node that claims independence of a node it does not commute with is an error."""
    seen: set[frozenset[str]] = set()
    for c in touching:
        for other_id in c.node.independent_of:
            other = nodes.get(other_id)
            pair = frozenset((c.id, other_id))
            if other is None or other is c or pair in seen:
                continue
            seen.add(pair)
            first, second = (c, other) if position[c.id] <= position[other_id] else (other, c)
            resource = conflicting(first.reads, first.writes, second.reads, second.writes)
            if resource is None or _commute_by_contract(first, second):
                continue
            claimant = first if second.id in first.node.independent_of else second
            errors.append(
                FieldError(
                    path=f"/nodes/{claimant.index}/independent_of",
                    message=f"{first.id} and {second.id} do not commute: both touch {resource!r}",
                )
            )


class _Touched:
    """The nodes seen so far by the resource patterns they read and write.

    :meth:`may_conflict` gives every seen node that may conflict with a new one (a superset:
    :func:`~actionspace.plan.conflicts.conflicting` decides), without comparing it with the
    others. Two patterns can overlap only when one is a prefix of the other, with ``*`` taken
    off the end (``*`` alone is the empty prefix of everything), so a pattern's candidates are
    the patterns that are prefixes of it and those it is a prefix of. Along one pattern the nodes
    are read latest first and the scan stops at a writer of it (one not only appending): an
    earlier node that touches the pattern conflicts with that writer, so it is ordered before it.
    """

    __slots__ = ("_extending", "_nodes", "_stems")

    def __init__(self) -> None:
        self._nodes: dict[str, list[tuple[CheckedNode, bool]]] = {}
        """Pattern → (node, whether it writes it), in order."""
        self._stems: dict[str, list[str]] = {}
        """Pattern without its ``*`` → the patterns seen with that stem."""
        self._extending: dict[str, list[str]] = {}
        """A proper prefix of a stem → the patterns seen whose stem is longer and starts with it."""

    def add(self, c: CheckedNode) -> None:
        for pattern, writes in _patterns(c):
            seen = self._nodes.get(pattern)
            if seen is None:
                seen = self._nodes[pattern] = []
                stem = _stem(pattern)
                self._stems.setdefault(stem, []).append(pattern)
                for end in range(len(stem)):
                    self._extending.setdefault(stem[:end], []).append(pattern)
            seen.append((c, writes))

    def may_conflict(self, c: CheckedNode) -> list[CheckedNode]:
        found: dict[int, CheckedNode] = {}
        for pattern, writes in _patterns(c):
            stem = _stem(pattern)
            others = [p for end in range(len(stem) + 1) for p in self._stems.get(stem[:end], ())]
            others.extend(self._extending.get(stem, ()))
            for other in others:
                if other == pattern or overlaps(other, pattern):
                    self._scan(self._nodes[other], writes, found)
        return list(found.values())

    @staticmethod
    def _scan(seen: list[tuple[CheckedNode, bool]], writes: bool, found: dict[int, CheckedNode]) -> None:
        for node, node_writes in reversed(seen):
            if writes or node_writes:
                found[id(node)] = node
            if node_writes and not _all(node, "write_mode", "append"):
                return


def _patterns(c: CheckedNode) -> list[tuple[str, bool]]:
    writes = set(c.writes)
    return [(w, True) for w in c.writes] + [(r, False) for r in c.reads if r not in writes]


def _stem(pattern: str) -> str:
    return pattern.removesuffix("*")


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
