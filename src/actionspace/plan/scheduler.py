"""Run a checked plan: ready, non-conflicting nodes concurrently, each through the full pipeline.

- A node starts when all its predecessors ended ok; a failed node blocks only its descendants (their
  observation is a ``cancelled`` error naming the failed ancestor; they never run); siblings keep
  their results. Results are keyed by node id.
- Concurrency is bounded globally and per tool. Conflicting nodes never overlap: conflicts were
  turned into edges by :mod:`actionspace.plan.check`.
- Cancellation has three phases: not dispatched → removed; running → abort requested (reads are
  cancelled, a dispatched write is let finish so its outcome is known, an atomic group whose commit
  has not begun is stopped and its transaction rolled back); committed → only successors are
  blocked. A cancel never claims an effect was undone unless a rollback did undo it.
- A speculative node (``first_of``) runs its read-only alternatives under a cost cap; the first
  sufficient ok result wins, the others are cancelled and recorded as non-authoritative.
- A plan runs registered with its engine from its start to its ``plan_finished``
  (:meth:`Scheduler.open_to_close`, one add and one discard per plan): ``Runtime.close()`` finds
  it there (:func:`running_plans`) and ends it from any thread (:meth:`Scheduler.end_by_close`):
  every running node's call is cancelled (a read ends ``cancelled``, a write ``unknown_commit``),
  every queued node ends not sent and blocks its successors.

This module settles nodes and applies cancellation; :mod:`actionspace.plan.driver` starts them
(waves of ready nodes, run inline until one waits) and :mod:`actionspace.plan.node` runs one
node's call.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import weakref
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from actionspace.discovery.runs import RunState
from actionspace.errors import ActionError
from actionspace.plan._checked import start_of
from actionspace.plan._ending import read_results
from actionspace.plan._waves import StartWindows
from actionspace.plan.atomic import GroupAttempt, member_of
from actionspace.plan.check import CheckedNode, CheckedPlan
from actionspace.plan.control import CancelScope, ToolLimit, named_blocker, tool_limits_of
from actionspace.plan.driver import Driver, is_safe
from actionspace.plan.engine import PlanEngine
from actionspace.plan.model import PlanResult, PlanStatus
from actionspace.plan.node import FLUSH_RECORDS, FLUSH_S
from actionspace.plan.ready import ReadyQueue
from actionspace.policy.principal import Principal
from actionspace.policy.stamped import Taken, taken
from actionspace.trace.events import CompactNode, EventRecord
from actionspace.types import Observation

__all__ = ["FLUSH_RECORDS", "FLUSH_S", "CancelScope", "Scheduler", "ToolLimit", "running_plans"]

_running: weakref.WeakKeyDictionary[PlanEngine, set[Scheduler]] = weakref.WeakKeyDictionary()
"""Per engine, the plans running over it (:meth:`Scheduler.open_to_close`)."""
_running_lock = threading.Lock()


def running_plans(engine: PlanEngine) -> list[Scheduler]:
    """The plans running in process over ``engine`` now, each until its ``plan_finished`` is recorded."""
    with _running_lock:
        return list(_running.get(engine, ()))


def _blocked(
    call_id: str, node: CheckedNode, blocked_by: str, reason: str, *, closed: bool = False
) -> Observation:
    """``closed``: the runtime closed before the node began; it says it was not sent, as every
    node not begun at a close says (``details["sent"]`` False)."""
    details: dict[str, Any] = {"blocked_by": blocked_by, "phase": "not_dispatched"}
    if closed:
        details["sent"] = False
    error = ActionError.of("cancelled", f"node {node.id} did not run: {reason}", details=details)
    return Observation.failure(
        error, call_id=call_id, tool=node.specs[0].name, tool_version=node.specs[0].version
    )


class Scheduler(Driver):
    """One plan execution. Build, then ``await run()``."""

    def __init__(
        self,
        engine: PlanEngine,
        run: RunState,
        principal: Principal,
        plan: CheckedPlan,
        *,
        max_concurrency: int,
        tool_limits: Mapping[str, int | ToolLimit] | None,
        cancel: CancelScope | None,
        retry_of: PlanResult | None,
    ) -> None:
        self.engine = engine
        self.run_state = run
        self.principal = principal
        self.plan = plan
        self.limit = max(1, max_concurrency)
        self.tool_limits = tool_limits_of(tool_limits)
        self.starts = StartWindows()
        self._timer: asyncio.TimerHandle | None = None
        self.cancel_scope = cancel
        self.retry_of = retry_of
        self.results: dict[str, Observation] = {}
        self._start = start_of(plan)
        self._notes: dict[str, Taken | None] = self._start.listed.copy()  # (None: not settled)
        """Per result, what the plan's end reads of it, read when it settled (``taken``)."""
        self._shown: list[Taken] = []
        self._result: PlanResult | None = None
        self.failed: dict[str, str] = {}
        """Once the plan ended: node id → error category, for every observation with an error."""
        self.waiting = self._start.waiting.copy()
        """Per node, its predecessors not settled yet."""
        self.blocked_by: dict[str, tuple[str, str]] = {}
        self.running: dict[str, asyncio.Task[Any] | None] = {}
        self.per_tool: dict[str, int] = {}
        self.abort_requested: set[str] = set()
        self.dispatched_args: dict[str, Mapping[str, Any]] = {}
        self.abort_answers: dict[str, asyncio.Future[str]] = {}
        """Per running write asked to abort through its tool's ``cancel`` hook: the hook's answer."""
        self.cancelled: set[str] = set()
        self.max_parallel = 0
        self.extra_calls = 0
        self.reused = 0
        self.reused_nodes: set[str] = set()
        self._newly_ready: list[str] = []
        self.settled = 0
        self.speculative: dict[str, list[Observation]] = {}
        self.member_results: dict[str, Observation] = {}
        self.group_attempts: dict[str, GroupAttempt] = {}
        """Per group whose send is under way: what its attempt is doing (see ``plan/atomic.py``)."""
        self.stopped_groups: dict[str, Observation] = {}
        """Per group stopped while its members ran and settled as not committed: its observation."""
        self.pending: list[EventRecord] = []
        self.pending_nodes: list[CompactNode] = []
        self.flushed_at = time.monotonic()
        self._spare = None
        self.kept = {}
        self._closed = False
        self._waits: set[str] = set()

    # ------------------------------------------------------------------ main loop
    async def run(self) -> PlanResult:
        started = time.perf_counter()
        loop = self._loop = asyncio.get_running_loop()
        self._all_settled: asyncio.Future[None] = loop.create_future()
        self._ready = ReadyQueue(self.plan)
        self._ready.extend(self._start.roots)
        self._deferred: deque[str] = deque()
        if self.cancel_scope is not None:
            early = self.cancel_scope._bind(lambda: loop.call_soon_threadsafe(self._apply_cancel))
            if early:
                self._apply_cancel()
        try:
            self._pump()
            if self.settled < len(self.plan.nodes):
                await self._all_settled
        finally:
            self._closed = True
            for task in list(self.running.values()):
                if task is not None:
                    task.cancel()
            if self._timer is not None:
                self._timer.cancel()
            self._flush_pending(time.monotonic())
        results = self.results
        if self.plan.nodes.keys() - results.keys():
            for k, node in self.plan.nodes.items():
                if k not in results:  # unreachable unless a bug left a node waiting: never hang, say so
                    root = self.blocked_by.get(k, (k, "internal"))[0]
                    results[k] = _blocked(self._call_id(k), node, root, "its predecessors never settled")
        nodes, statuses = read_results(self._start, results, self._notes, self._shown, self.failed)
        self._result = PlanResult(
            run_id=self.run_state.run_id,
            status=_status_of(statuses),
            nodes=nodes,
            edges=list(self.plan.edges),
            added_edges=list(self.plan.added_edges),
            speculative=self.speculative,
            planned=self.plan.nodes,
            stats={
                "max_parallel": self.max_parallel,
                "wall_s": round(time.perf_counter() - started, 6),
                "extra_calls": self.extra_calls,
                "reused": self.reused,
                "cancelled": sorted(self.cancelled),
            },
        )
        return self._result

    def shown(self) -> Iterator[tuple[Observation, Taken]]:
        """Once the plan ended: each observation of its result, in order, with what was read of it
        when it settled (:func:`~actionspace.policy.stamped.taken`), for ``FlowState.observed_taken``."""
        assert self._result is not None, "the plan has not ended"
        return zip(self._result.nodes.values(), self._shown, strict=True)

    def _settle(self, k: str, obs: Observation, node: CheckedNode | None = None) -> None:
        """Store a node's final observation and release or block its successors (the blocked
        ones settled too, and theirs in turn: :meth:`_settle_all`)."""
        self._settle_all(k, obs, self.plan.nodes[k] if node is None else node, [])

    def _finish(self, k: str, obs: Observation, node: CheckedNode | None = None) -> None:
        """``Driver._finish``; its commonest end (an ok node outside any group, no tool limits,
        no abort asked) written out in one frame, as :meth:`_settle_all` would end it."""
        if node is None:
            node = self.plan.nodes[k]
        if self.tool_limits or self.abort_requested or node.members or obs.status != "ok":
            super()._finish(k, obs, node)
            return
        del self.running[k]
        self.results[k] = obs
        # taken(obs), read while at hand
        if obs.items or obs.artifact_ref is not None:
            self._notes[k] = (None, None, None, None, obs.status, obs.error, obs.tool)
        else:
            p = obs.provenance
            self._notes[k] = (obs.call_id, p.labels, p.trust, obs.data, obs.status, obs.error, obs.tool)
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
        if newly:  # queued now, so a cancel arriving before the next wave finds them
            self._ready.extend(newly)
            newly.clear()

    def _settle_all(self, k: str, obs: Observation, node: CheckedNode, stack: list[tuple[str, str]]) -> None:
        """:meth:`_settle` of any node, then of each blocked node on ``stack`` (blocked node, the
        predecessor that released it), the last first."""
        blocked_by, waiting, results, notes = self.blocked_by, self.waiting, self.results, self._notes
        while True:
            results[k] = obs
            notes[k] = taken(obs)  # read while at hand
            self.settled += 1
            for member in node.members:  # a group: its members' own observations
                own = self.member_results.get(member.id)
                if own is None:
                    own = member_of(obs, member, k)
                    if obs.status != "ok":  # the group never ran: the trace names each member too
                        self._unrun_member(member.id, k)
                results[member.id] = own
                notes[member.id] = taken(own)
            if obs.status != "ok" or k in self.abort_requested:
                inherited = blocked_by.get(k)
                origin = inherited or (k, obs.error.category if obs.error is not None else "cancelled")
                for s in node.succs:
                    if k in self.plan.nodes[s].needs:  # a conflict edge only orders: its successor still runs
                        blocked_by.setdefault(s, origin)
            released: list[tuple[str, str]] | None = None
            for s in node.succs:
                left = waiting[s] = waiting[s] - 1
                if left > 0:
                    continue
                if s not in blocked_by:
                    self._newly_ready.append(s)
                    continue
                if released is None:
                    released = []
                released.append((s, k))
            if released is not None:
                stack.extend(reversed(released))  # the first released is settled first
            if not stack:
                return
            k, obs, node = self._blocked_now(*stack.pop())

    def _blocked_now(self, s: str, k: str) -> tuple[str, Observation, CheckedNode]:
        """Node ``s``, blocked, released by ``k``: its observation, recorded as blocked."""
        blocked_by = self.blocked_by
        root, why = blocked_by[s]
        if root == s:  # cancelled while it waited: it names the node it waited on, not itself
            root = named_blocker(blocked_by.get(k), k)
            blocked_by[s] = (root, why)
            reason = f"it was cancelled while waiting for {k}"
        else:
            reason = f"{root} did not succeed ({why})"
        self._record(None, "plan_node_blocked", {"node": s, "blocked_by": root})
        node = self.plan.nodes[s]
        return s, _blocked(self._call_id(s), node, root, reason, closed=self.engine.executor.closed), node

    def _unrun_member(self, member: str, group: str) -> None:
        """Record that ``member`` never ran: blocked with its group, or cancelled before it began."""
        root = self.blocked_by.get(group, (group, ""))[0]
        if root != group:
            self._record(None, "plan_node_blocked", {"node": member, "blocked_by": root, "group": group})
        else:
            self._record(
                None, "plan_node_cancelled", {"node": member, "phase": "not_dispatched", "group": group}
            )

    # ------------------------------------------------------------------ the runtime closing
    @contextlib.contextmanager
    def open_to_close(self) -> Iterator[None]:
        """Registered as running (:func:`running_plans`) inside the block, on the plan's loop; then
        :attr:`ended` is set."""
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self.ended = threading.Event()
        self.cut_seen = threading.Event()
        """Set once the plan's loop took the close's cut (:meth:`end_by_close`)."""
        engine = self.engine
        with _running_lock:
            _running.setdefault(engine, set()).add(self)
        try:
            yield
        finally:
            with _running_lock:
                plans = _running.get(engine)
                if plans is not None:
                    plans.discard(self)
                    if not plans:
                        del _running[engine]
            self.ended.set()

    def on_this_thread(self) -> bool:
        """The calling thread runs the plan's loop (it cannot wait for the plan to end)."""
        return threading.get_ident() == self._thread

    def cut_writes(self) -> list[str]:
        """From any thread: the ledger node ids of the writes running now (a group's is ``group:<id>``)."""
        nodes = self.plan.nodes
        return [f"group:{k}" if nodes[k].members else k for k in list(self.running) if not is_safe(nodes[k])]

    def end_by_close(self) -> None:
        """From any thread, once the runtime began to close (``Executor.closed`` set): end the plan
        on its loop (:meth:`_cut_by_close`)."""
        with contextlib.suppress(RuntimeError):  # its loop is closed: the plan ended with it
            self._loop.call_soon_threadsafe(self._cut_by_close)

    def _cut_by_close(self) -> None:
        """Cancel every running node's call and settle every queued node as not sent (successors
        blocked); nodes released later find ``Executor.closed`` set and are not sent either."""
        self.cut_seen.set()
        if self._closed or not hasattr(self, "_all_settled"):
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for task in {t for t in self.running.values() if t is not None}:
            task.cancel()
        ready, deferred, newly = self._ready, self._deferred, self._newly_ready
        while ready.queued or deferred or newly:
            queued = [*ready.take_all(), *deferred, *newly]
            deferred.clear()
            newly.clear()
            for k in queued:
                if k not in self.results and k not in self.running:
                    self._settle(k, self._not_begun(k))
        self._check_settled()

    # ------------------------------------------------------------------ cancellation
    def _apply_cancel(self) -> None:
        assert self.cancel_scope is not None
        ready, deferred = self._ready, self._deferred
        ready.extend(self._newly_ready)  # released by a node that answered at once: queued (_instant)
        self._newly_ready.clear()
        for nodes, reason in self.cancel_scope._take():
            targets = [k for k in self.plan.nodes if (nodes is None or k in nodes) and k not in self.results]
            queued = set(ready) | set(deferred)
            for k in targets:  # first, so nodes released below are blocked, not started
                self.cancelled.add(k)
                if k not in self.running and k not in queued:
                    self.blocked_by.setdefault(k, (k, reason))
            for k in targets:
                if k in self.running:
                    self._abort(k, reason)
                elif k in queued:
                    (ready if k in ready else deferred).remove(k)
                    self._record(None, "plan_node_cancelled", {"node": k, "phase": "not_dispatched"})
                    self._settle(k, self._cancelled_obs(k, "not_dispatched", reason))
        ready.extend(self._newly_ready)
        self._newly_ready.clear()
        if hasattr(self, "_all_settled"):
            self._pump()

    def _abort(self, k: str, reason: str) -> None:
        node = self.plan.nodes[k]
        self.abort_requested.add(k)
        attempt = self.group_attempts.get(k)
        # a group whose members run has committed nothing: stopped, its transaction rolls back (a
        # group not stoppable now stops at its next member, see plan/atomic.py)
        safe = is_safe(node) or (attempt is not None and attempt.stoppable())
        self._record(
            None,
            "plan_node_cancelled",
            {"node": k, "phase": "running", "aborted": safe, "reason": reason},
        )
        if safe:
            task = self.running[k]  # None: not stepped yet, it ends as aborted when its turn comes
            if task is not None and task is not asyncio.current_task():
                task.cancel()
        elif not node.members and node.specs[0].cancel is not None and k not in self.abort_answers:
            self.abort_answers[k] = asyncio.get_running_loop().run_in_executor(None, self._ask_to_abort, k)

    def _ask_to_abort(self, k: str) -> str:
        """Call the tool's ``cancel`` hook (on a worker thread): ``cancelled``, ``committed``, ``unknown``."""
        spec = self.plan.nodes[k].specs[0]
        assert spec.cancel is not None
        try:
            entry = self.engine.ledger.get_node(self.run_state.run_id, k)
            answer = spec.cancel(dict(self.dispatched_args.get(k, {})), None if entry is None else entry.key)
        except Exception:
            answer = None
        said = answer if answer in ("cancelled", "committed") else "unknown"
        self._record(self._call_id(k), "plan_node_abort_answered", {"node": k, "answer": said})
        return said

    def _aborted_read(self, k: str, reason: str) -> Observation:
        """A read (or pure call) stopped by an abort: cancelled, traced as aborted, never as finished.

        A node with side effects is never stopped by the plan's aborts; a cancel that reached its
        call anyway (raised by its own tool, or the plan's caller cancelling) leaves its outcome
        unknown, as its ledger entry says: ``unknown_commit``, never ``cancelled`` -- unless the
        ledger says the send never began (withdrawn: ``failed``, ``details["sent"]`` False)."""
        node = self.plan.nodes[k]
        stopped = self.stopped_groups.pop(k, None)
        if stopped is not None:  # its transaction was rolled back, its entry settled as not committed
            assert stopped.error is not None
            shown: dict[str, Any] = {"status": "error", "tool": stopped.tool, "group": k, "rolled_back": True}
            self._record(stopped.call_id, "observation", {**shown, "category": stopped.error.category})
            return stopped
        if not is_safe(node):
            spec = node.specs[0]
            error = ActionError.of(
                "unknown_commit",
                f"the call of node {k} was cancelled while it ran; whether {spec.name} committed is not "
                "established: query its status",
                details={"phase": "running"},
            )
            if not node.members:  # a group's entry is its own (``group:<id>``), settled above
                # a ledger that cannot answer (closed meanwhile) leaves the outcome not established
                with contextlib.suppress(Exception):
                    entry = self.engine.ledger.get_node(self.run_state.run_id, k)
                    said = None if entry is None or entry.state != "failed" else entry.error
                    if said is not None and said.get("details", {}).get("sent") is False:
                        error = ActionError.from_dict(said)
            obs = Observation.failure(
                error, call_id=self._call_id(k), tool=spec.name, tool_version=spec.version
            )
            outcome = {"status": "error", "tool": spec.name, "version": spec.version}
            outcome["category"] = error.category
            self._record(obs.call_id, "observation", outcome)
            return obs
        obs = self._cancelled_obs(k, "running", reason)
        event = {"status": "error", "tool": obs.tool, "version": obs.tool_version, "category": "cancelled"}
        self._record(obs.call_id, "observation", {**event, "aborted": True})
        return obs

    def _cancelled_obs(self, k: str, phase: str, reason: str) -> Observation:
        spec = self.plan.nodes[k].specs[0]
        error = ActionError.of("cancelled", f"node {k} was cancelled: {reason}", details={"phase": phase})
        return Observation.failure(error, call_id=self._call_id(k), tool=spec.name, tool_version=spec.version)

    # ------------------------------------------------------------------ one node
    async def _node(self, node: CheckedNode) -> Observation:
        if node.node.first_of:
            from actionspace.plan.speculate import speculate

            return await speculate(self, node)
        if node.members:
            from actionspace.plan.atomic import run_group

            return await run_group(self, node)
        arguments = self._arguments(node, node.node.arguments)
        if isinstance(arguments, Observation):
            return arguments
        if node.refs and node.node.writes is not None:  # a narrowing the check could not verify
            undeclared = self._undeclared_writes(node, arguments)
            if undeclared is not None:
                return undeclared
        self.dispatched_args[node.id] = arguments
        obs = await self._call(node, node.id, node.node.tool, arguments)
        return self._verify(node, obs)


def _status(observations: Iterable[Observation]) -> PlanStatus:
    return _status_of({o.status for o in observations})


def _status_of(statuses: set[str]) -> PlanStatus:
    if statuses <= {"ok"}:
        return "ok"
    if statuses - {"error"}:  # some node (or some items of a batch node) succeeded
        return "partial"
    return "error"
