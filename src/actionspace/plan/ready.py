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
        self.index = {k: c.index for k, c in plan.nodes.items()}

    def extend(self, ids: Iterable[str]) -> None:
        for k in ids:
            if k not in self.queued:
                self.queued.add(k)
                heapq.heappush(self.heap, (-self.rank[k], self.index[k], k))

    def pop(self) -> str:
        while True:
            k = heapq.heappop(self.heap)[2]
            if k in self.queued:
                self.queued.discard(k)
                return k

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
    rank: dict[str, int] = {}
    pending = {k: len(c.succs) for k, c in plan.nodes.items()}
    stack = [k for k, n in pending.items() if n == 0]
    while stack:
        k = stack.pop()
        node = plan.nodes[k]
        rank[k] = 1 + max((rank[s] for s in node.succs), default=0)
        for p in node.preds:
            pending[p] -= 1
            if pending[p] == 0:
                stack.append(p)
    for k in plan.nodes:  # unreachable for an acyclic plan; never fail on it
        rank.setdefault(k, 1)
    return rank
