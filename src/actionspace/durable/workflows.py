"""The DBOS plan workflow: each wave of ready nodes runs as one step of the plan's workflow.

The plan workflow checks the plan (the same checks as the in-process scheduler), then repeats:
take the nodes that are ready (in plan order, up to the concurrency limit) and run them at once
in one async DBOS step, the way the in-process scheduler runs a node (same engine calls, trace
buffered and stored before the step's checkpoint); then settle their observations, which
releases their successors. A failed node blocks only its descendants. One checkpoint per wave,
instead of a workflow, a queue hand-off and a message per node.

DBOS numbers a workflow's operations in the order they are started, so a resumed plan must start
them in the same order: every decision between two waves depends only on the checkpointed
outputs before it. A plan resumed on another worker therefore replays its finished waves from
their checkpoints and makes the same decisions; the wave that was cut short runs again, its
finished nodes found committed in the ledger and its interrupted ones settled through their
status query first (:func:`actionspace.durable.nodes.begin_attempts`).

A node that has to wait — for a person's approval, or for a cluster-wide slot of a limited tool —
gets a child workflow (:func:`actionspace.durable.nodes.node_workflow`) that sends its final
observation back as a message; the plan reads those with ``DBOS.recv`` (checkpointed as well)
before every wave and when nothing else can run. Before a wave it first asks, without a checkpoint,
whether a message is there at all (:mod:`actionspace.durable.inbox`): a plan nobody writes to
records one checkpoint per wave and nothing else.

Cancelling (:meth:`actionspace.durable.PlanClient.cancel`, or a ``CancelScope`` given to
``run_plan``: what it asked before the plan began comes in the plan's input and applies before the
first wave) is a message on the same topic, read at the same points, so it is never missed between
two waves and is replayed in order: nodes not dispatched yet are removed (``cancelled``,
``phase: not_dispatched``), the nodes that wait for them are blocked, a waiting child is told (it
answers ``cancelled``, or with its call's outcome if the call had begun), and a wave already
running ends as it does — a cancel never undoes an effect. A removed node's ``plan_node_cancelled``
is recorded by the plan's next step (a wave, or the step that closes the trace), so it comes after
``plan_started`` and a replay does not record it twice.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import deque
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, cast

from dbos import DBOS, SetWorkflowID

from actionspace.discovery.runs import RunState
from actionspace.durable.engine import bound, node_workflow_id
from actionspace.durable.inbox import Inbox, next_operation
from actionspace.durable.nodes import (
    APPROVAL_TOPIC,
    NODE_TOPIC,
    begin_attempts,
    bound_to_dict,
    cancel_message,
    cancel_request,
    node_slots,
    node_workflow,
    principal_from_dict,
    principal_to_dict,
    running,
    settle_interrupted,
    waiting_request,
)
from actionspace.errors import ActionError
from actionspace.plan.check import CheckedPlan
from actionspace.plan.model import PlanResult
from actionspace.plan.run import DEFAULT_CONCURRENCY, preflight
from actionspace.plan.scheduler import Scheduler, _status
from actionspace.policy.flow import bindings
from actionspace.policy.principal import Principal
from actionspace.trace.recorder import Recorder
from actionspace.types import Observation

if TYPE_CHECKING:
    from actionspace.runtime import Runtime

__all__ = [
    "APPROVAL_TOPIC",
    "NODE_TOPIC",
    "PLAN_WORKFLOW",
    "node_workflow",
    "plan_workflow",
    "principal_to_dict",
    "register",
    "settle_interrupted",
]

PLAN_WORKFLOW: Final = "actionspace.plan"
_ENDED: Final = frozenset({"ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"})


def register() -> None:
    """Importing this module registers the workflows with DBOS; called before ``DBOS.launch``."""


@DBOS.workflow(name=PLAN_WORKFLOW)
async def plan_workflow(request: dict[str, Any]) -> dict[str, Any]:
    """Run one plan; ``request``: ``run_id``, ``plan`` (JSON form), ``principal``, ``max_concurrency``."""
    return (await _drive(request)).to_dict()


async def _drive(request: Mapping[str, Any]) -> PlanResult:
    rt = bound().runtime
    run_id: str = request["run_id"]
    principal = principal_from_dict(request.get("principal"))
    if request.get("rejected") is not None:  # too deep to carry: rejected before it was sent
        return await _rejected(run_id, ActionError.from_dict(request["rejected"]))
    # the run's state and the plan's checks read the store: off the loop other plans share
    run, who, checked = await asyncio.to_thread(_check, request["plan"], run_id, principal)
    if isinstance(checked, ActionError):
        return await _rejected(run_id, checked)
    unsupported = sorted(k for k, c in checked.nodes.items() if c.members or c.node.first_of)
    if unsupported:
        error = ActionError.of(
            "invalid_arguments",
            f"nodes {unsupported} use atomic groups or speculation, which only the in-process backend runs",
            details={"nodes": unsupported},
        )
        return await _rejected(run_id, error)
    # as in process: at least one node at a time, whatever the caller asked
    limit = max(1, int(request.get("max_concurrency") or checked.max_concurrency or DEFAULT_CONCURRENCY))
    sched = Scheduler(
        rt.engine, run, who, checked, max_concurrency=limit, tool_limits=None, cancel=None, retry_of=None
    )
    waves = _Waves(sched, checked, run_id, principal_to_dict(who), limit)
    for message in request.get("cancel") or ():  # a CancelScope's cancels asked before the plan began
        asked = cancel_request(message)
        if asked is not None:
            await waves._cancel(*asked)
    await waves.run()
    nodes = {k: sched.results[k] for k in checked.order if k in sched.results}
    result = PlanResult(
        run_id=run_id,
        status=_status(nodes.values()),
        nodes=nodes,
        edges=list(checked.edges),
        added_edges=list(checked.added_edges),
        stats={
            "max_parallel": waves.max_parallel,
            "backend": "dbos",
            "plan_workflow": waves.parent,
            "waves": waves.count,
            "cancelled": sorted(sched.cancelled),
        },
    )
    if not waves.closed:  # the last wave's step did not close the trace: close it here
        await _finish_step(waves, result.nodes)
        waves.cancels.clear()
    if sched.pending:
        await asyncio.to_thread(sched._flush_pending, time.monotonic())
    ended = time.time()
    result.stats["wall_s"] = round(ended - (waves.started or ended), 6)
    return result


def _check(
    plan: Mapping[str, Any], run_id: str, principal: Principal | None
) -> tuple[RunState, Principal, CheckedPlan | ActionError]:
    rt = bound().runtime
    run = rt.run_state(run_id, principal)
    who = principal or run.principal
    return run, who, preflight(rt.engine, plan, run, who, rt.environments)


class _Waves:
    """The plan loop: waves of steps, child workflows for the nodes that wait."""

    def __init__(
        self,
        sched: Scheduler,
        checked: CheckedPlan,
        run_id: str,
        principal: dict[str, Any] | None,
        limit: int,
    ) -> None:
        self.sched, self.checked, self.run_id, self.principal = sched, checked, run_id, principal
        self.limit = limit
        self.parent = cast(str, DBOS.workflow_id)
        self.ready: deque[str] = deque(
            k for k in checked.order if k in checked.nodes and sched.waiting[k] == 0
        )
        self.children: dict[str, str] = {}  # node id -> the workflow id of its child workflow
        self.max_parallel = 0
        self.count = 0
        self.started: float | None = None
        """When the first wave began (seconds since the epoch), as its checkpoint holds it."""
        self.closed = False
        """True when the last wave's step recorded ``plan_finished`` with its own trace."""
        self.cancels: list[str] = []
        """Nodes cancelled before dispatch since the last step: the next step records them."""
        engine = bound()
        self.inbox = Inbox(engine.heartbeat.pool, engine.config.system_schema, self.parent, NODE_TOPIC)

    def opening(self) -> dict[str, Any]:
        """The data of the plan's ``plan_started`` trace event."""
        return {"nodes": len(self.checked.nodes), "backend": "dbos"}

    async def run(self) -> None:
        sched, total = self.sched, len(self.checked.nodes)
        while sched.settled < total:
            await self._receive(timeout_s=0.0)  # cancels, and children that ended, before a wave
            if sched.settled == total:
                break
            wave = await self._take_wave()
            self.max_parallel = max(self.max_parallel, len(wave) + len(self.children))
            if wave:
                self.count += 1
                done = await _wave_step(self, wave)
                self.cancels.clear()  # recorded by that step, or by its first run when replayed
                self.started = done["at"] if self.started is None else self.started
                self.closed = done["closed"]
                for (k, arguments), obs in zip(wave, done["observations"], strict=True):
                    request_id = waiting_request(obs)
                    if request_id is None:
                        self._settle(k, Observation.from_dict(obs))
                    else:
                        payload = {**self._payload(k, arguments), "request_id": request_id}
                        await self._start_child(k, payload)
            elif self.children:
                await self._receive(timeout_s=bound().config.wait_poll_s)
            elif not self.ready:
                break  # nothing runs and nothing can start: every remaining node was blocked

    async def _take_wave(self) -> list[tuple[str, Mapping[str, Any]]]:
        """The ready nodes to run now as one step (nodes of limited tools go to their queue)."""
        wave: list[tuple[str, Mapping[str, Any]]] = []
        engine = bound()
        while self.ready and len(wave) + len(self.children) < self.limit:
            k = self.ready.popleft()
            node = self.checked.nodes[k]
            arguments = self.sched._arguments(node, node.node.arguments)
            if not isinstance(arguments, Observation) and node.refs and node.node.writes is not None:
                # a narrowing the check could not verify: the resolved writes must be covered
                arguments = self.sched._undeclared_writes(node, arguments) or arguments
            if isinstance(arguments, Observation):
                self._settle(k, arguments)
                continue
            tool = node.specs[0].name
            if engine.queued(tool):
                payload = self._payload(k, arguments)
                with SetWorkflowID(node_workflow_id(self.run_id, k)):
                    handle = await DBOS.enqueue_workflow_async(engine.queue_of(tool), node_workflow, payload)
                self.children[k] = handle.workflow_id  # a replay gets the id it was begun under
            else:
                wave.append((k, arguments))
        return wave

    def _payload(self, k: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The input of the child workflow of node ``k``."""
        node = self.checked.nodes[k]
        raw = node.node.arguments
        return {
            "parent": self.parent,
            "run_id": self.run_id,
            "node_id": k,
            "tool": node.node.tool,
            "arguments": dict(arguments),
            "provenance": dict(self.sched._provenance(node, raw)),
            "principal": self.principal,
            # the labels its $ref arguments carry, as the in-process call binds them
            "bound": bound_to_dict(bindings(raw, self.sched._ref_label)) if node.refs else None,
        }

    async def _start_child(self, k: str, payload: dict[str, Any]) -> None:
        with SetWorkflowID(node_workflow_id(self.run_id, k)):
            handle = await DBOS.start_workflow_async(node_workflow, payload)
        self.children[k] = handle.workflow_id  # a replay gets the id it was begun under

    def _settle(self, k: str, obs: Observation) -> None:
        self.sched._settle(k, obs)
        self.ready.extend(self.sched._newly_ready)
        self.sched._newly_ready.clear()

    async def _receive(self, *, timeout_s: float) -> None:
        """Apply the cancels and settle the children that sent their observation (waiting up to
        ``timeout_s`` for a message).

        A child that ended without a message (it failed, or was cancelled) settles as an internal
        error once a wait of ``timeout_s`` > 0 brought nothing. A message of any other shape is
        ignored.
        """
        got = False
        while True:
            if (got or timeout_s == 0.0) and not self.children and not await self._waiting():
                break
            message = await DBOS.recv_async(NODE_TOPIC, timeout_seconds=0.0 if got else timeout_s)
            if message is None:
                break
            got = True
            asked = cancel_request(message)
            if asked is not None:
                await self._cancel(*asked)
                continue
            k = message.get("node") if isinstance(message, Mapping) else None
            if isinstance(k, str) and self.children.pop(k, None) is not None:
                self._settle(k, Observation.from_dict(message["observation"]))
        if got or timeout_s == 0.0 or not self.children:
            return
        for k, status in (await _ended_children(dict(self.children))).items():
            why = f"the workflow of node {k} ended {status} without a result"
            error = ActionError.of("internal", why)
            self._settle(k, Observation.failure(error, call_id=self.children.pop(k), tool=""))

    async def _waiting(self) -> bool:
        """Whether a look that does not wait reads a message (:mod:`~actionspace.durable.inbox`).

        Asked only while no child runs: a look that reads nothing is then followed by a wave, a
        child's start or the plan's end, never by a read, so its replay can tell the reads apart.
        """
        return await asyncio.to_thread(self.inbox.waiting, next_operation())

    async def _cancel(self, nodes: list[str] | None, reason: str) -> None:
        """Cancel ``nodes`` (None: all) that have not settled, as the in-process scheduler does
        for nodes not dispatched; a waiting child is told and answers for its node."""
        sched = self.sched
        chosen = None if nodes is None else set(nodes)
        targets = [
            k for k in self.checked.order if (chosen is None or k in chosen) and k not in sched.results
        ]
        for k in targets:  # first, so nodes released below are blocked, not started
            sched.cancelled.add(k)
            if k not in self.ready and k not in self.children:
                sched.blocked_by.setdefault(k, (k, reason))
        for k in targets:
            if k in self.children:
                await DBOS.send_async(self.children[k], cancel_message([k], reason), topic=APPROVAL_TOPIC)
            elif k in self.ready:
                self.ready.remove(k)
                self.cancels.append(k)  # recorded by the next step: once, however often it is replayed
                self._settle(k, sched._cancelled_obs(k, "not_dispatched", reason))


@DBOS.step(name="actionspace.plan.wave")
async def _wave_step(waves: _Waves, wave: list[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """Run a wave's nodes at once, as the in-process scheduler does, and store their trace.

    Returns ``at`` (when the wave began, seconds since the epoch), ``observations`` (dicts, in the
    wave's order) and ``closed``. One step, so one checkpoint, per wave. A wave cut short runs
    again whole: its nodes that had finished find their action committed in the ledger, the others
    are settled first by :func:`~actionspace.durable.nodes.begin_attempts`. The first wave also
    opens the plan's trace; the last (``closed``: every node settles with it) also closes it.
    """
    at = time.time()
    sched, run_id, rt = waves.sched, waves.run_id, bound().runtime
    if waves.count == 1:
        sched._record(None, "plan_started", waves.opening())
    await _record_cancels(waves)
    attempts = {k: uuid.uuid4().hex for k, _ in wave}

    async def one(k: str, arguments: Mapping[str, Any]) -> Observation:
        node = waves.checked.nodes[k]
        async with node_slots():
            sched.dispatched_args[k] = arguments
            return sched._verify(node, await sched._call(node, k, node.node.tool, arguments))

    noted = True
    with running(attempts.values()):
        try:
            await asyncio.to_thread(begin_attempts, rt, run_id, attempts)
        except Exception as exc:  # the store failed us: every node of the wave says so
            noted = False
            calls = [Recorder(sched.run_state, f"{run_id}:{k}") for k in attempts]
            observations = [rt.engine.internal(exc, rec) for rec in calls]
        else:
            observations = await asyncio.gather(*(one(k, arguments) for k, arguments in wave))
    # the last wave closes the plan's trace in its own write (its checkpoint keeps that from
    # happening twice): every other node has settled, and none of this wave waits for approval
    closed = sched.settled + len(wave) == len(waves.checked.nodes) and not waves.children
    outputs = [o.to_dict() for o in observations]
    if closed and not any(waiting_request(o) for o in outputs):
        final = {**sched.results, **{k: o for (k, _), o in zip(wave, observations, strict=True)}}
        ordered = {k: final[k] for k in waves.checked.order if k in final}
        # a wave run again (its worker died before the checkpoint) may have closed the trace already
        again = not noted or await asyncio.to_thread(bound().heartbeat.attempted_before, run_id, attempts)
        if not await _closed_before(waves, ordered, again=again):
            sched._record(None, "plan_finished", _closing(ordered))
    else:
        closed = False
    await asyncio.to_thread(sched._flush_pending, time.monotonic())
    return {"at": at, "observations": outputs, "closed": closed}


@DBOS.step(name="actionspace.plan.finish")
async def _finish_step(waves: _Waves, nodes: Mapping[str, Observation]) -> None:
    """Close the plan's trace when no wave's step did (its last node settled in a child workflow,
    or by a cancel), with ``plan_started`` first when no wave ran. A step cut short runs again:
    the trace is read first, so the plan is closed once."""
    sched = waves.sched
    if await _closed_before(waves, nodes, again=True):
        return
    if waves.started is None:  # no wave ran to open the trace
        sched._record(None, "plan_started", waves.opening())
    await _record_cancels(waves)
    sched._record(None, "plan_finished", _closing(nodes))
    await asyncio.to_thread(sched._flush_pending, time.monotonic())


async def _record_cancels(waves: _Waves) -> None:
    """Record ``plan_node_cancelled`` for the nodes cancelled since the last step, inside a step
    (after ``plan_started``) so a replay does not record them again. A step cut short before its
    checkpoint runs again, and a plan begun before cancels were recorded this way may have
    recorded them already: the trace is read first, and only when there are cancels to record."""
    if not waves.cancels:
        return
    rt = bound().runtime
    events = await asyncio.to_thread(rt.trace.events, waves.run_id)
    done = {e.data.get("node") for e in events if e.kind == "plan_node_cancelled"}
    for k in waves.cancels:
        if k not in done:
            waves.sched._record(None, "plan_node_cancelled", {"node": k, "phase": "not_dispatched"})


async def _closed_before(waves: _Waves, nodes: Mapping[str, Observation], *, again: bool) -> bool:
    """The plan's end, as in process: the model is shown every node's observation (which joins
    the run's context label, saved with the trace that closes the plan). True when an earlier
    attempt at the closing step recorded ``plan_finished`` already (the state is saved then);
    False when the caller records it now.

    ``again``: an earlier attempt may have closed the trace (the trace is read only then).
    """
    sched, rt = waves.sched, bound().runtime
    sched.run_state.flow.observed_many(nodes.values())
    if again and await asyncio.to_thread(_finished_before, rt, waves.run_id):
        await asyncio.to_thread(rt.engine.persist, sched.run_state)
        return True
    return False


def _finished_before(rt: Runtime, run_id: str) -> bool:
    """True when the trace of ``run_id`` holds the ``plan_finished`` of its durable plan (a run
    has one: its workflow id derives from the run id)."""
    return any(e.kind == "plan_finished" and e.data.get("backend") == "dbos" for e in rt.trace.events(run_id))


def _closing(nodes: Mapping[str, Observation]) -> dict[str, Any]:
    """The data of the plan's ``plan_finished`` trace event, from every node's observation."""
    failed = {k: o.error.category for k, o in nodes.items() if o.error is not None}
    return {"status": _status(nodes.values()), "failed": failed, "backend": "dbos"}


@DBOS.step(name="actionspace.plan.ended_children")
async def _ended_children(children: dict[str, str]) -> dict[str, str]:
    by_id = {v: k for k, v in children.items()}
    statuses = await DBOS.list_workflows_async(
        workflow_ids=list(by_id),
        load_input=False,
        load_output=False,
    )
    return {by_id[s.workflow_id]: s.status for s in statuses if s.status in _ENDED}


@DBOS.step(name="actionspace.plan.mark")
async def _mark_step(run_id: str, kind: str, data: dict[str, Any]) -> float:
    """Record a plan trace event; returns the time it was recorded (seconds since the epoch)."""
    await asyncio.to_thread(bound().runtime.record, run_id, kind, data)
    return time.time()


async def _rejected(run_id: str, error: ActionError) -> PlanResult:
    data = {"category": error.category, "message": error.message[:500]}
    await _mark_step(run_id, "plan_rejected", data)
    return PlanResult(run_id=run_id, status="error", error=error)
