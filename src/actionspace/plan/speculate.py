"""Speculation: read-only alternatives of one node, the first sufficient result wins.

Only ``effect="none"``/``"read"`` tools the principal may call (checked with the plan); the
alternatives launch in order while their estimated cost (``ToolSpec.cost.per_call``) fits the
node's ``cost_cap``; the losers are cancelled, and those that finished anyway are kept in
``PlanResult.speculative``, marked non-authoritative and bound to run, principal and tool version.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections import deque
from typing import TYPE_CHECKING

from actionspace.catalog.spec import ToolSpec
from actionspace.errors import ActionError
from actionspace.plan.model import Alternative
from actionspace.types import Observation

if TYPE_CHECKING:
    from actionspace.plan.check import CheckedNode
    from actionspace.plan.scheduler import Scheduler

__all__ = ["speculate"]


async def speculate(sched: Scheduler, node: CheckedNode) -> Observation:
    """Run a ``first_of`` node: alternatives under the cost cap; the first sufficient ok result wins."""
    alternatives = list(zip(node.node.first_of, node.specs, strict=True))
    cap = node.node.cost_cap
    chosen: list[tuple[int, Alternative, ToolSpec]] = []
    spent = 0.0
    for j, (alt, spec) in enumerate(alternatives):
        cost = spec.cost.per_call
        if chosen and cap is not None and spent + cost > cap:
            break
        spent += cost
        chosen.append((j, alt, spec))
    calls = []
    for j, alt, spec in chosen:  # every alternative's arguments, before any of them is launched
        arguments = sched._arguments(node, alt.arguments)
        if isinstance(arguments, Observation):
            return arguments
        calls.append((j, alt, spec, arguments))
    tasks: dict[asyncio.Task[Observation], int] = {}
    slots: list[str] = []  # the tool slots the alternatives after the first took
    try:
        for j, alt, spec, arguments in calls:
            if tasks and not _slot(sched, spec.name, slots):
                continue  # its tool is at its limit: not launched (the node's own slot is the first's)
            call = sched._call(node, f"{node.id}~{j}", alt.tool, arguments, alt.arguments)
            tasks[asyncio.ensure_future(call)] = j
        sched.extra_calls += len(tasks) - 1
        winner, finished = await _race(sched, node, tasks)
    finally:
        for name in slots:
            sched.per_tool[name] -= 1
    losers = sorted(set(tasks.values()) - ({winner[0]} if winner else set()))
    sched._record(
        None,
        "speculation",
        {
            "node": node.id,
            "winner": winner[0] if winner else None,
            "launched": len(tasks),
            "skipped_by_cost_cap": len(alternatives) - len(chosen),
            "skipped_by_tool_limit": len(chosen) - len(tasks),
            "non_authoritative": [j for j in losers if j in finished],
            "cancelled": [j for j in losers if j not in finished],
        },
    )
    bound = {"run": sched.run_state.run_id, "principal": sched.principal.id}
    for j in losers:
        if j in finished:  # kept for inspection, never fed to another node
            loser = finished[j]
            sched.speculative.setdefault(node.id, []).append(
                dataclasses.replace(
                    loser,
                    diagnostics={
                        **loser.diagnostics,
                        "authoritative": False,
                        "bound_to": {**bound, "tool": f"{loser.tool}@{loser.tool_version}"},
                    },
                )
            )
    if winner is None:
        last = finished[max(finished)] if finished else None
        if last is not None and last.status == "error":
            return last
        error = ActionError.of("permanent", f"no alternative of {node.id} gave a sufficient result")
        return Observation.failure(error, call_id=sched._call_id(node.id), tool=node.specs[0].name)
    j, obs = winner
    diagnostics = {
        **obs.diagnostics,
        "speculation": {
            "winner": j,
            "tool": obs.tool,
            "extra_calls": len(tasks) - 1,
            "non_authoritative": [f"{node.id}~{i}" for i in losers if i in finished],
        },
    }
    return dataclasses.replace(obs, diagnostics=diagnostics)


async def _race(
    sched: Scheduler, node: CheckedNode, tasks: dict[asyncio.Task[Observation], int]
) -> tuple[tuple[int, Observation] | None, dict[int, Observation]]:
    """The first sufficient ok result among ``tasks`` (alternative index, observation), and every
    observation that finished; the others are cancelled."""
    winner: tuple[int, Observation] | None = None
    finished: dict[int, Observation] = {}
    pending = set(tasks)
    try:
        while pending and winner is None:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for t in sorted(done, key=lambda t: tasks[t]):
                # cancelled by its own call (only this node's end cancels the others): it lost
                obs = _cancelled(sched, node, tasks[t]) if t.cancelled() else t.result()
                finished[tasks[t]] = obs
                if winner is None and obs.status == "ok" and sched._verify(node, obs).status == "ok":
                    winner = (tasks[t], obs)
    finally:
        for t in pending:
            t.cancel()
    return winner, finished


def _cancelled(sched: Scheduler, node: CheckedNode, j: int) -> Observation:
    """Alternative ``j``, whose own call raised ``CancelledError``: a read that was stopped, one
    alternative's failure (the others still race), never a cancel of the node."""
    spec = node.specs[j]
    call_id = sched._call_id(f"{node.id}~{j}")
    error = ActionError.of(
        "cancelled",
        f"alternative {j} of {node.id} ({spec.name}) was cancelled by its own call",
        details={"phase": "running", "alternative": j},
    )
    obs = Observation.failure(error, call_id=call_id, tool=spec.name, tool_version=spec.version)
    event = {"status": "error", "tool": spec.name, "version": spec.version, "category": "cancelled"}
    sched._record(call_id, "observation", event)
    return obs


def _slot(sched: Scheduler, name: str, slots: list[str]) -> bool:
    """Take a slot of tool ``name``'s limit (:class:`~actionspace.plan.control.ToolLimit`) for one
    more alternative, if one is free now; a slot taken is noted in ``slots``."""
    limit = sched.tool_limits.get(name)
    if limit is None:
        return True
    if limit.max_concurrent is not None and sched.per_tool.get(name, 0) >= limit.max_concurrent:
        return False
    if limit.per_second is not None:
        window = sched.starts.setdefault(name, deque())
        now = time.monotonic()
        while window and now - window[0] >= 1.0:
            window.popleft()
        if len(window) >= limit.per_second:
            return False
        window.append(now)
    sched.per_tool[name] = sched.per_tool.get(name, 0) + 1
    slots.append(name)
    return True
