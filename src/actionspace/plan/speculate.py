"""Speculation: read-only alternatives of one node, the first sufficient result wins.

Only ``effect="none"``/``"read"`` tools the principal may call (checked with the plan); the
alternatives launch in order while their estimated cost (``ToolSpec.cost.per_call``) fits the
node's ``cost_cap``; the losers are cancelled, and those that finished anyway are kept in
``PlanResult.speculative``, marked non-authoritative and bound to run, principal and tool version.
The cancelled losers are awaited (at most ``LOSER_GRACE_S``) before the node ends, so none of them
still runs once the plan returned; a node cancelled itself stops its alternatives the same way, and
either way the trace's ``speculation`` event names the alternatives that were cancelled.
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from actionspace.catalog.spec import ToolSpec
from actionspace.errors import ActionError
from actionspace.plan.model import Alternative
from actionspace.types import Observation

if TYPE_CHECKING:
    from actionspace.plan.check import CheckedNode
    from actionspace.plan.scheduler import Scheduler

__all__ = ["LOSER_GRACE_S", "speculate"]

LOSER_GRACE_S = 1.0
"""Seconds the node waits for its cancelled losers to stop before it ends without them."""


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
    race = _Race()
    try:
        try:
            for j, alt, spec, arguments in calls:
                if tasks and not _slot(sched, spec.name, slots):
                    continue  # its tool is at its limit: not launched (the node's own slot is the first's)
                call = sched._call(node, f"{node.id}~{j}", alt.tool, arguments, alt.arguments)
                tasks[asyncio.ensure_future(call)] = j
            sched.extra_calls += len(tasks) - 1
            await _race(sched, node, tasks, race)
        except asyncio.CancelledError:
            race.aborted = True
            raise
        finally:
            for name in slots:
                sched.per_tool[name] -= 1
            await _stop(tasks, race)
    finally:  # a cancelled speculation is recorded too, its alternatives stopped first
        losers = _record(sched, node, race, tasks, offered=len(alternatives), chosen=len(chosen))
    winner, finished = race.winner, race.finished
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


@dataclass(slots=True)
class _Race:
    """How the alternatives of one speculative node fared."""

    winner: tuple[int, Observation] | None = None
    """The first sufficient ok result: (alternative index, observation)."""
    finished: dict[int, Observation] = field(default_factory=dict)
    """Every alternative's observation that finished before the race ended."""
    still_running: list[int] = field(default_factory=list)
    """Losers that had not stopped ``LOSER_GRACE_S`` after they were cancelled."""
    aborted: bool = False
    """The node itself was cancelled while its alternatives ran."""


def _record(
    sched: Scheduler,
    node: CheckedNode,
    race: _Race,
    tasks: dict[asyncio.Task[Observation], int],
    *,
    offered: int,
    chosen: int,
) -> list[int]:
    """Record the ``speculation`` event and keep the losers that finished (non-authoritative);
    returns the losers' indexes."""
    winner, finished = race.winner, race.finished
    losers = sorted(set(tasks.values()) - ({winner[0]} if winner else set()))
    event: dict[str, Any] = {
        "node": node.id,
        "winner": winner[0] if winner else None,
        "launched": len(tasks),
        "skipped_by_cost_cap": offered - chosen,
        "skipped_by_tool_limit": chosen - len(tasks),
        "non_authoritative": [j for j in losers if j in finished],
        "cancelled": [j for j in losers if j not in finished],
    }
    if race.aborted:
        event["aborted"] = True
    if race.still_running:
        event["still_running"] = race.still_running
    sched._record(None, "speculation", event)
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
    return losers


async def _race(
    sched: Scheduler, node: CheckedNode, tasks: dict[asyncio.Task[Observation], int], race: _Race
) -> None:
    """Wait for the first sufficient ok result among ``tasks``, noting in ``race`` the winner and
    every observation that finished."""
    pending = set(tasks)
    while pending and race.winner is None:
        done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        for t in sorted(done, key=lambda t: tasks[t]):
            # cancelled by its own call (only this node's end cancels the others): it lost
            obs = _cancelled(sched, node, tasks[t]) if t.cancelled() else t.result()
            race.finished[tasks[t]] = obs
            if race.winner is None and obs.status == "ok" and sched._verify(node, obs).status == "ok":
                race.winner = (tasks[t], obs)


async def _stop(tasks: dict[asyncio.Task[Observation], int], race: _Race) -> None:
    """Cancel the alternatives still running and wait, at most ``LOSER_GRACE_S``, for them to stop
    (a read that ignores its cancel is left to end on its own, noted in ``race.still_running``)."""
    running = [t for t in tasks if not t.done()]
    for t in running:
        t.cancel()
    if running:
        try:
            await asyncio.wait(running, timeout=LOSER_GRACE_S)
        except asyncio.CancelledError:  # cancelled again while they stop: not waited for further
            race.aborted = True
            raise
        finally:
            race.still_running = sorted(tasks[t] for t in running if not t.done())
    for t in running:
        if t.done() and not t.cancelled():
            t.exception()  # retrieved: a loser's own failure is no error of the node's


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
    if limit.per_second is not None and sched.starts.take(name, limit.per_second) is not None:
        return False
    sched.per_tool[name] = sched.per_tool.get(name, 0) + 1
    slots.append(name)
    return True
