"""The ready queue of the plan scheduler: the head of the longest remaining chain goes first."""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator

from actionspace.plan.check import CheckedPlan

__all__ = ["ReadyQueue"]


class ReadyQueue:
    """Ready nodes, the one with the longest chain of successors first (then in listing order).

    Starting the head of the longest remaining chain first shortens the makespan whenever the
    concurrency limits make ready nodes wait.
    """

    def __init__(self, plan: CheckedPlan) -> None:
        self.heap: list[tuple[int, int, str]] = []
        self.queued: set[str] = set()
        self.rank = _chain_lengths(plan)
        self.nodes = plan.nodes

    def extend(self, ids: Iterable[str]) -> None:
        for k in ids:
            if k not in self.queued:
                self.queued.add(k)
                heapq.heappush(self.heap, (-self.rank[k], self.nodes[k].index, k))

    def pop(self) -> str:
        while True:
            k = heapq.heappop(self.heap)[2]
            if k in self.queued:
                self.queued.discard(k)
                return k

    def take_all(self) -> list[str]:
        """Every queued node, in the order :meth:`pop` would give them, and the queue emptied."""
        queued = self.queued
        out = [k for _, _, k in sorted(self.heap) if k in queued]
        self.heap.clear()
        queued.clear()
        return list(dict.fromkeys(out))  # a node queued again after a removal: once

    def remove(self, k: str) -> None:
        self.queued.discard(k)  # its heap entry is skipped when it surfaces

    def __contains__(self, k: object) -> bool:
        return k in self.queued

    def __iter__(self) -> Iterator[str]:
        return iter(list(self.queued))

    def __len__(self) -> int:
        return len(self.queued)


def _chain_lengths(plan: CheckedPlan) -> dict[str, int]:
    """Per node, the most nodes on a path from it to a sink (itself included)."""
    nodes = plan.nodes
    order = plan.topo if len(plan.topo) == len(nodes) else _sinks_first(plan)[::-1]
    rank: dict[str, int] = {}
    for k in reversed(order):  # successors first
        longest = 0
        for s in nodes[k].succs:
            r = rank.get(s, 0)
            if r > longest:
                longest = r
        rank[k] = longest + 1
    return rank


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
