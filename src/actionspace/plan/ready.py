"""The ready queue of the plan scheduler: the head of the longest remaining chain goes first."""

from __future__ import annotations

import heapq
import itertools
import operator
from collections.abc import Iterable, Iterator

from actionspace.plan.check import CheckedPlan

__all__ = ["ReadyQueue"]


class ReadyQueue:
    """Ready nodes, the one with the longest chain of successors first (then in listing order).

    Starting the head of the longest remaining chain first shortens the makespan whenever the
    concurrency limits make ready nodes wait.

    A node's place is one integer (:func:`_keys`): the heap and :meth:`take_all`'s sort compare
    integers, not (rank, index, id) tuples, and no tuple is made per node queued. Queuing a node
    only notes it; the heap takes what was noted when a node is popped (a wave taken whole sorts
    the queued nodes instead, and never needs the heap).
    """

    def __init__(self, plan: CheckedPlan) -> None:
        self.heap: list[int] = []
        self.queued: set[str] = set()
        key = plan.keys  # made once per checked plan (a plan run again keeps its check)
        if key is None:
            key = plan.keys = _keys(plan)
        self.key = key
        self._ids: dict[int, str] | None = None
        """The node of each key, made on the first :meth:`pop` (taking a whole wave needs none)."""
        self._noted: list[str] = []
        """Nodes queued since the heap last took them (one may be there twice: see :meth:`pop`)."""

    def extend(self, ids: Iterable[str]) -> None:
        noted = self._noted
        if noted:
            ids = list(ids)
            noted += ids
            self.queued.update(ids)
        else:  # (the usual case: the last wave was taken whole)
            noted += ids
            self.queued.update(noted)

    def pop(self) -> str:
        ids = self._ids
        if ids is None:
            ids = self._ids = {v: k for k, v in self.key.items()}
        heap, noted = self.heap, self._noted
        if noted:  # a node queued twice, or removed and queued again, is in the heap twice:
            push, key = heapq.heappush, self.key  # the copy that surfaces second is skipped
            for k in noted:
                push(heap, key[k])
            noted.clear()
        while True:
            k = ids[heapq.heappop(heap)]
            if k in self.queued:
                self.queued.discard(k)
                return k

    def take_all(self) -> list[str]:
        """Every queued node, in the order :meth:`pop` would give them, and the queue emptied."""
        queued = self.queued
        out = sorted(queued, key=self.key.__getitem__)  # keys are unique: each node once, in order
        self.heap.clear()
        self._noted.clear()
        queued.clear()
        return out

    def remove(self, k: str) -> None:
        self.queued.discard(k)  # its heap entry is skipped when it surfaces

    def __contains__(self, k: object) -> bool:
        return k in self.queued

    def __iter__(self) -> Iterator[str]:
        return iter(list(self.queued))

    def __len__(self) -> int:
        return len(self.queued)


def _keys(plan: CheckedPlan) -> dict[str, int]:
    """Per node, a distinct integer that orders as ``(-chain length, listing index, id)`` does
    (its chain length: the most nodes on a path from it to a sink, itself included)."""
    nodes = plan.nodes
    order = plan.topo if len(plan.topo) == len(nodes) else _sinks_first(plan)[::-1]
    width = max(map(_index, nodes.values()), default=0) + 1
    rank: dict[str, int] = {}
    for k in reversed(order):  # successors first
        succs = nodes[k].succs
        rank[k] = max(map(rank.get, succs, _ZEROS)) + 1 if succs else 1  # rank.get(s, 0)
    # index - rank * width per node, in C (in the order of ``order``, reversed, as it was filled)
    at = list(reversed(order))
    scaled = map(width.__mul__, map(rank.__getitem__, at))
    key = dict(zip(at, map(operator.sub, map(_index, map(nodes.__getitem__, at)), scaled), strict=True))
    if len(set(key.values())) < len(key):  # two nodes of one listing index (none in a checked plan)
        place = {k: i for i, k in enumerate(sorted(key))}  # their ids break the tie
        key = {k: v * len(place) + place[k] for k, v in key.items()}
    return key


_index = operator.attrgetter("index")
_ZEROS = itertools.repeat(0)


def _sinks_first(plan: CheckedPlan) -> list[str]:
    """The plan's nodes, each after all of its successors (a plan checked without an order)."""
    done: list[str] = []
    pending = {k: len(c.succs) for k, c in plan.nodes.items()}
    stack = [k for k, n in pending.items() if n == 0]
    while stack:
        k = stack.pop()
        done.append(k)
        for p in plan.nodes[k].preds:
            pending[p] -= 1
            if pending[p] == 0:
                stack.append(p)
    seen = set(done)
    return done + [k for k in plan.nodes if k not in seen]  # unreachable for an acyclic plan
