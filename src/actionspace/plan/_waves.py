"""Taking a plan's next wave: every ready node the limits admit now (``Driver`` takes it from here).

A wave is taken whole when it fits the limits: the nodes released since the last wave, when
nothing else waits in the ready queue (the usual case: a wave's nodes settled and released the
next), are sorted in the queue's order as they are, never queued; any other wave goes through the
ready queue (:class:`~actionspace.plan.ready.ReadyQueue`), by priority, with the per-tool limits
and a retried plan's reusable results read node by node.

A per-second limit counts a tool's starts over a sliding window (:class:`StartWindows`): a node
refused a start waits for a timer set to when the oldest start leaves the window.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from actionspace.plan._instant import Instant
from actionspace.plan.model import PlanResult
from actionspace.plan.retry import reusable
from actionspace.types import Observation

__all__ = ["StartWindows", "Waves"]


class StartWindows:
    """Per tool, when its calls of the last ``window_s`` seconds started (``clock`` seconds): what a
    :class:`~actionspace.plan.control.ToolLimit` ``per_second`` counts, one per plan run.

    ``window_s`` (default 1.0) and ``clock`` (default ``time.monotonic``) are set where the plan's
    scheduler builds it; a test gives a clock it moves itself, so that what it asserts is which
    starts one window admits, never how many seconds passed.
    """

    __slots__ = ("_starts", "clock", "window_s")

    def __init__(self, *, window_s: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.window_s = window_s
        self.clock = clock
        self._starts: dict[str, deque[float]] = {}

    def take(self, name: str, most: float) -> float | None:
        """Note a start of tool ``name`` now if fewer than ``most`` began within the window (None);
        else note nothing and answer the seconds until its oldest start leaves the window."""
        window = self._starts.setdefault(name, deque())
        now, span = self.clock(), self.window_s
        while window and now - window[0] >= span:
            window.popleft()
        if len(window) < most:
            window.append(now)
            return None
        return span - (now - window[0])


class Waves(Instant):
    """:meth:`_take_wave`, for the driver; the state it reads is the scheduler's."""

    limit: int
    starts: StartWindows
    per_tool: dict[str, int]
    retry_of: PlanResult | None
    reused: int
    reused_nodes: set[str]
    """The nodes settled with their observation of ``retry_of``."""
    max_parallel: int
    _timer: asyncio.TimerHandle | None
    _loop: asyncio.AbstractEventLoop
    _deferred: deque[str]

    def _settle(self, k: str, obs: Observation, node: Any = None) -> None:
        raise NotImplementedError

    def _pump(self) -> None:
        raise NotImplementedError

    def _take_wave(self) -> list[str]:
        """Every ready node the limits admit now, marked running, in the ready queue's order."""
        ready, deferred, newly = self._ready, self._deferred, self._newly_ready
        running = self.running
        if (
            newly
            and not (ready.queued or deferred or self.tool_limits or self.retry_of is not None)
            and len(newly) <= self.limit - len(running)
        ):
            # only what settling released since the last wave, and all of it fits: in the order
            # the queue gives (take_all's: each node is released once), never queued
            wave = sorted(newly, key=ready.key.__getitem__)
            newly.clear()
            running.update(dict.fromkeys(wave))  # each running, not stepped yet (None)
            if len(running) > self.max_parallel:
                self.max_parallel = len(running)
            return wave
        if newly:
            ready.extend(newly)
            newly.clear()
        if deferred:  # waiting for a tool's slot: back in line (by priority), checked below
            ready.extend(deferred)
            deferred.clear()
        queued = ready.queued
        if not queued:
            return []
        limited, per_tool = bool(self.tool_limits), self.per_tool
        retrying = self.retry_of is not None
        if not (limited or retrying) and len(queued) <= self.limit - len(running):
            wave = ready.take_all()  # every ready node fits: no heap to pop one by one
            running.update(dict.fromkeys(wave))  # each running, not stepped yet (None)
            if len(running) > self.max_parallel:
                self.max_parallel = len(running)
            return wave
        wave = []
        while queued and len(running) < self.limit:
            k = ready.pop()
            if limited and not self._tool_slot(k):
                deferred.append(k)
                continue
            if retrying and self._reuse(k):
                if newly:
                    ready.extend(newly)
                    newly.clear()
                continue
            if limited:  # counted only where the limits read it
                name = self.plan.nodes[k].specs[0].name
                per_tool[name] = per_tool.get(name, 0) + 1
            running[k] = None
            wave.append(k)
        if len(running) > self.max_parallel:
            self.max_parallel = len(running)
        return wave

    def _reuse(self, k: str) -> bool:
        """Settle ``k`` with its ok observation of the plan run retried, if it has one."""
        assert self.retry_of is not None
        before = reusable(self.retry_of, self.run_state.run_id, self.plan.nodes[k], self.reused_nodes)
        if before is None:
            return False
        self.reused += 1
        self.reused_nodes.add(k)
        self._record(None, "plan_node_reused", {"node": k, "call_id": before.call_id})
        self._settle(k, before)
        return True

    def _tool_slot(self, k: str) -> bool:
        name = self.plan.nodes[k].specs[0].name
        limit = self.tool_limits.get(name)
        if limit is None:
            return True
        if limit.max_concurrent is not None and self.per_tool.get(name, 0) >= limit.max_concurrent:
            return False
        if limit.per_second is None:
            return True
        wait = self.starts.take(name, limit.per_second)
        if wait is None:
            return True
        if self._timer is None:  # wake up when the oldest start leaves the window
            self._timer = self._loop.call_later(wait, self._tick)
        return False

    def _tick(self) -> None:
        self._timer = None
        self._pump()
