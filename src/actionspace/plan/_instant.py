"""A plain node begun and, when its tool answered at once with ``ok``, settled in one frame.

The driver steps a wave's plain nodes inline (``Driver._drive``); most nodes of a zero-latency
plan end there, ``ok``, without waiting. Beginning such a node (:meth:`NodeRunner._plain_now`)
and settling it (``Scheduler._finish``) were two frames a node, each reading the scheduler's
state again and deciding again what the wave already knew. :meth:`Instant._instant` is both
written out in one: the node's call on the precompiled path, its records buffered, and, for an
``ok`` observation while no tool limit or abort applies (the driver calls it only while nothing
can ask to cancel a node, and a plain node has no members), the node taken off the running set,
its result stored and read for the plan's end, its successors released — as ``Scheduler._finish``
ends it. Anything else is handed back to the driver as :meth:`NodeRunner._plain_now` would hand
it (``tests/plan/test_plain_equivalence.py`` and ``test_plan_node_records.py`` hold the results,
records and events to the general path).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, cast

from actionspace.plan.check import CheckedNode
from actionspace.plan.control import ToolLimit
from actionspace.plan.node import FLUSH_RECORDS, FLUSH_S, NodeRunner, Started, _monotonic, _no_refs
from actionspace.plan.ready import ReadyQueue
from actionspace.plan.refs import substitute
from actionspace.policy.stamped import Taken
from actionspace.trace.recorder import Recorder
from actionspace.types import Observation

__all__ = ["SETTLED", "Instant"]

SETTLED = cast("Observation", object())
"""What :meth:`Instant._instant` returns for a node it settled itself (typed so no cast is
called per node)."""


class Instant(NodeRunner):
    """:meth:`_instant`, for the driver; the state it settles is the scheduler's."""

    running: dict[str, asyncio.Task[Any] | None]
    """Running nodes → the task stepping them (None: in a wave, not stepped yet)."""
    tool_limits: dict[str, ToolLimit]
    abort_requested: set[str]
    settled: int
    waiting: dict[str, int]
    blocked_by: dict[str, tuple[str, str]]
    _notes: dict[str, Taken | None]
    _newly_ready: list[str]
    _ready: ReadyQueue

    def _settle_all(self, k: str, obs: Observation, node: CheckedNode, stack: list[tuple[str, str]]) -> None:
        raise NotImplementedError

    def _blocked_now(self, s: str, k: str) -> tuple[str, Observation, CheckedNode]:
        raise NotImplementedError

    def _instant(self, k: str, node: CheckedNode) -> Observation | Started | None:
        """:meth:`_plain_now` of running node ``k`` of a wave stepped inline while nothing can ask
        to cancel it, and ``Scheduler._finish`` of an ``ok`` observation of a tool that answered
        at once: :data:`SETTLED` then; else what :meth:`_plain_now` gives (the driver ends it)."""
        spec = node.node
        if spec.provenance:
            return None
        raw = spec.arguments
        # a copy when nested: a tool that mutates its arguments must not change the plan
        arguments = raw if node.scalar_arguments else substitute(raw, _no_refs)
        run = self.run_state
        rec = self._spare  # an emptied recorder of a node that answered at once, or a new one
        if rec is None:
            rec = Recorder(run, f"{run.run_id}:{k}")
        else:
            self._spare = None
            rec.call_id = f"{run.run_id}:{k}"
        engine = self.engine
        try:
            obs = engine.plain_node(run, spec.tool, dict(arguments), k, self.principal, rec, self.kept)
        except asyncio.CancelledError:  # the tool's first step raised it: as _plain, then _body
            rec.add("plan_node_cancelled", {"node": k, "phase": "running"})
            self._buffer(rec)
            return self._aborted_read(k, "abort requested; the read was cancelled")
        except Exception as exc:
            obs = engine.internal(exc, rec)
        if obs is None:  # nothing recorded: the recorder serves the next node
            self._spare = rec
            return None
        if type(obs) is not Observation:  # its tool waits: the driver ends it
            return rec, cast("Awaitable[Observation]", obs)
        nodes = rec.nodes
        if nodes is None or rec.records:
            self._buffer(rec)
        else:  # _buffer for the one compact record of a node that answered at once
            held = self.pending_nodes
            held += nodes  # (the list itself, extended in place)
            rec.nodes = None
            now = _monotonic()
            if (
                now - self.flushed_at >= FLUSH_S
                or len(self.pending) + 5 * len(held) >= FLUSH_RECORDS
                or self._closed
            ):
                self._flush_pending(now)
        if rec.call is None:  # emptied, and held by nothing else: the next node's
            self._spare = rec
        if obs.status != "ok" or self.tool_limits or self.abort_requested:
            return obs  # Driver._finish and the scheduler's settling decide
        # Scheduler._finish of an ok node outside any group, written out
        del self.running[k]
        self.results[k] = obs
        if obs.items or obs.artifact_ref is not None:  # taken(obs), read while at hand
            self._notes[k] = (None, None, None, None, "ok", obs.error, obs.tool)
        else:
            p = obs.provenance
            self._notes[k] = (obs.call_id, p.labels, p.trust, obs.data, "ok", obs.error, obs.tool)
        self.settled += 1
        waiting, blocked_by, newly = self.waiting, self.blocked_by, self._newly_ready
        released: list[tuple[str, str]] | None = None
        for s in node.succs:
            left = waiting[s] = waiting[s] - 1
            if left > 0:
                continue
            if s not in blocked_by:
                newly.append(s)
                continue
            if released is None:
                released = []
            released.append((s, k))
        if released is not None:  # blocked while they waited (cancelled, or by another predecessor)
            released.reverse()  # the first released is settled first
            s, k = released.pop()
            self._settle_all(*self._blocked_now(s, k), released)
        # what it released stays noted in ``newly`` (``_newly_ready``) while the driver steps its
        # wave (nothing else runs meanwhile): the driver's next wave takes it into the ready
        # queue, and a cancel or a close that arrives while a node of the wave waits does first
        return SETTLED
