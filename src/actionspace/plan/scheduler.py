"""Run a checked plan: ready, non-conflicting nodes concurrently, each through the full pipeline.

- A node starts when all its predecessors ended ok; a failed node blocks only its descendants (their
  observation is a ``cancelled`` error naming the failed ancestor; they never run); siblings keep
  their results. Results are keyed by node id.
- Concurrency is bounded globally and per tool. Conflicting nodes never overlap: conflicts were
  turned into edges by :mod:`actionspace.plan.check`.
- Cancellation has three phases: not dispatched → removed; running → abort requested (reads are
  cancelled, a dispatched write is let finish so its outcome is known); committed → only successors
  are blocked. A cancel never claims an effect was undone.
- A speculative node (``first_of``) runs its read-only alternatives under a cost cap; the first
  sufficient ok result wins, the others are cancelled and recorded as non-authoritative.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections import deque
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from actionspace.discovery.runs import RunState
from actionspace.errors import ActionError, FieldError
from actionspace.execution.ready import Ready
from actionspace.plan.atomic import member_of
from actionspace.plan.check import CheckedNode, CheckedPlan
from actionspace.plan.conflicts import overlaps
from actionspace.plan.control import CancelScope, ToolLimit, abort_outcome, named_blocker
from actionspace.plan.engine import PlanEngine
from actionspace.plan.model import PlanResult, PlanStatus
from actionspace.plan.ready import ReadyQueue
from actionspace.plan.refs import MISSING, Ref, find_refs, parse_ref, substitute, walk
from actionspace.policy.flow import bindings, label_of
from actionspace.policy.labels import Label
from actionspace.policy.principal import Principal
from actionspace.trace.events import EventRecord
from actionspace.trace.recorder import Recorder
from actionspace.types import Observation, ToolCall
from actionspace.validation.verdicts import Rejected

__all__ = ["CancelScope", "Scheduler", "ToolLimit"]


_SAFE_TO_ABORT = frozenset({"none", "read"})
_NO_MARKS: Mapping[str, str] = MappingProxyType({})

FLUSH_S = 0.05
"""Trace records of finished nodes reach the store at least this often (seconds), and at the end."""
FLUSH_RECORDS = 2000


def _blocked(call_id: str, node: CheckedNode, blocked_by: str, reason: str) -> Observation:
    error = ActionError.of(
        "cancelled",
        f"node {node.id} did not run: {reason}",
        details={"blocked_by": blocked_by, "phase": "not_dispatched"},
    )
    return Observation.failure(
        error, call_id=call_id, tool=node.specs[0].name, tool_version=node.specs[0].version
    )


class Scheduler:
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
        self.tool_limits = {
            name: limit if isinstance(limit, ToolLimit) else ToolLimit(max_concurrent=limit)
            for name, limit in (tool_limits or {}).items()
        }
        self.starts: dict[str, deque[float]] = {}
        self._timer: asyncio.TimerHandle | None = None
        self.cancel_scope = cancel
        self.retry_of = retry_of
        self.results: dict[str, Observation] = {}
        self.waiting = {k: len(c.preds) for k, c in plan.nodes.items()}
        self.blocked_by: dict[str, tuple[str, str]] = {}
        self.running: dict[str, asyncio.Task[Observation]] = {}
        self.per_tool: dict[str, int] = {}
        self.abort_requested: set[str] = set()
        self.dispatched_args: dict[str, Mapping[str, Any]] = {}
        self.abort_answers: dict[str, asyncio.Future[str]] = {}
        """Per running write asked to abort through its tool's ``cancel`` hook: the hook's answer."""
        self.cancelled: set[str] = set()
        self.max_parallel = 0
        self.extra_calls = 0
        self.reused = 0
        self._newly_ready: list[str] = []
        self.settled = 0
        self.speculative: dict[str, list[Observation]] = {}
        self.member_results: dict[str, Observation] = {}
        self.pending: list[EventRecord] = []
        self.flushed_at = time.monotonic()

    # ------------------------------------------------------------------ main loop
    async def run(self) -> PlanResult:
        started = time.perf_counter()
        loop = asyncio.get_running_loop()
        self._all_settled: asyncio.Future[None] = loop.create_future()
        self._ready = ReadyQueue(self.plan)
        self._ready.extend(k for k, n in self.waiting.items() if n == 0)
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
            for task in list(self.running.values()):
                task.cancel()
            if self._timer is not None:
                self._timer.cancel()
            self._flush_pending(time.monotonic())
        for k, node in self.plan.nodes.items():
            if k not in self.results:  # unreachable unless a bug left a node waiting: never hang, say so
                root = self.blocked_by.get(k, (k, "internal"))[0]
                self.results[k] = _blocked(self._call_id(k), node, root, "its predecessors never settled")
        order = [*self.plan.order, *(k for k, c in self.plan.nodes.items() if c.members)] or list(
            self.plan.nodes
        )
        nodes = {k: self.results[k] for k in order if k in self.results}
        return PlanResult(
            run_id=self.run_state.run_id,
            status=_status(nodes.values()),
            nodes=nodes,
            edges=list(self.plan.edges),
            added_edges=list(self.plan.added_edges),
            speculative=self.speculative,
            stats={
                "max_parallel": self.max_parallel,
                "wall_s": round(time.perf_counter() - started, 6),
                "extra_calls": self.extra_calls,
                "reused": self.reused,
                "cancelled": sorted(self.cancelled),
            },
        )

    def _pump(self) -> None:
        """Start every ready node the limits allow; resolve the plan when everything has settled."""
        ready, deferred = self._ready, self._deferred
        if deferred:  # waiting for a tool's slot: back in line (by priority), checked below
            ready.extend(deferred)
            deferred.clear()
        while ready and len(self.running) < self.limit:
            k = ready.pop()
            if not self._tool_slot(k):
                deferred.append(k)
                continue
            self._start(k)
            ready.extend(self._newly_ready)
            self._newly_ready.clear()
        if len(self.running) > self.max_parallel:
            self.max_parallel = len(self.running)
        settled = self.settled == len(self.plan.nodes) or not (
            self.running or ready or deferred or self._timer
        )
        if settled and not self._all_settled.done():
            self._all_settled.set_result(None)

    def _tool_slot(self, k: str) -> bool:
        if not self.tool_limits:
            return True
        name = self.plan.nodes[k].specs[0].name
        limit = self.tool_limits.get(name)
        if limit is None:
            return True
        if limit.max_concurrent is not None and self.per_tool.get(name, 0) >= limit.max_concurrent:
            return False
        if limit.per_second is None:
            return True
        window = self.starts.setdefault(name, deque())
        now = time.monotonic()
        while window and now - window[0] >= 1.0:
            window.popleft()
        if len(window) < limit.per_second:
            window.append(now)
            return True
        if self._timer is None:  # wake up when the oldest start leaves the window
            self._timer = asyncio.get_running_loop().call_later(1.0 - (now - window[0]), self._tick)
        return False

    def _tick(self) -> None:
        self._timer = None
        self._pump()

    def _start(self, k: str) -> None:
        node = self.plan.nodes[k]
        if self.retry_of is not None:
            before = self.retry_of.nodes.get(k)
            if before is not None and before.status == "ok":
                self.reused += 1
                self._record(None, "plan_node_reused", {"node": k, "call_id": before.call_id})
                self._settle(k, before)
                return
        name = node.specs[0].name
        self.per_tool[name] = self.per_tool.get(name, 0) + 1
        self.running[k] = asyncio.ensure_future(self._run_node(k, node))

    async def _run_node(self, k: str, node: CheckedNode) -> Observation:
        try:
            obs = await self._node(node)
        except asyncio.CancelledError:
            obs = self._aborted_read(k, "abort requested; the read was cancelled")
        except Exception as exc:  # a bug of ours: typed, and the plan goes on
            rec = Recorder(self.run_state, self._call_id(k))
            obs = self.engine.internal(exc, rec)
            self._buffer(rec)
        if self.cancel_scope is not None and self.cancel_scope._pending() and k in self.running:
            self._apply_cancel()  # asked while a read ran inline (it could not be interrupted)
        if k in self.abort_requested and obs.status == "ok" and _safe(node):
            obs = self._aborted_read(k, "abort requested while it ran; its result was discarded")
        answer = self.abort_answers.pop(k, None)
        if answer is not None:
            obs = abort_outcome(obs, await answer)
        if k in self.running:
            self._finish(k, obs)
            self._ready.extend(self._newly_ready)
            self._newly_ready.clear()
            self._pump()
        return obs

    def _finish(self, k: str, obs: Observation) -> None:
        del self.running[k]
        name = self.plan.nodes[k].specs[0].name
        self.per_tool[name] -= 1
        if k in self.abort_requested and obs.status == "ok":
            cancel = {**obs.diagnostics.get("cancel", {}), "phase": "committed", "undone": False}
            diagnostics = {**obs.diagnostics, "cancel": cancel}
            obs = dataclasses.replace(obs, diagnostics=diagnostics)
        self._settle(k, obs)

    def _settle(self, k: str, obs: Observation) -> None:
        """Store a node's final observation and release or block its successors."""
        self.results[k] = obs
        self.settled += 1
        for member in self.plan.nodes[k].members:  # a group: its members' own observations
            self.results[member.id] = self.member_results.get(member.id) or member_of(obs, member, k)
        if obs.status != "ok" or k in self.abort_requested:
            inherited = self.blocked_by.get(k)
            origin = inherited or (k, obs.error.category if obs.error is not None else "cancelled")
            for s in self.plan.nodes[k].succs:
                if k in self.plan.nodes[s].needs:  # a conflict edge only orders: its successor still runs
                    self.blocked_by.setdefault(s, origin)
        for s in self.plan.nodes[k].succs:
            self.waiting[s] -= 1
            if self.waiting[s] > 0:
                continue
            if s in self.blocked_by:
                root, why = self.blocked_by[s]
                node = self.plan.nodes[s]
                if root == s:  # cancelled while it waited: it names the node it waited on, not itself
                    root = named_blocker(self.blocked_by.get(k), k)
                    self.blocked_by[s] = (root, why)
                    reason = f"it was cancelled while waiting for {k}"
                else:
                    reason = f"{root} did not succeed ({why})"
                self._record(None, "plan_node_blocked", {"node": s, "blocked_by": root})
                self._settle(s, _blocked(self._call_id(s), node, root, reason))
            else:
                self._newly_ready.append(s)

    # ------------------------------------------------------------------ cancellation
    def _apply_cancel(self) -> None:
        assert self.cancel_scope is not None
        ready, deferred = self._ready, self._deferred
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
        safe = all(spec.effect in _SAFE_TO_ABORT for spec in node.specs)
        self._record(
            None, "plan_node_cancelled", {"node": k, "phase": "running", "aborted": safe, "reason": reason}
        )
        if safe:
            task = self.running[k]
            if task is not asyncio.current_task():
                task.cancel()
        elif node.specs[0].cancel is not None and k not in self.abort_answers:
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
        """A read (or pure call) stopped by an abort: cancelled, traced as aborted, never as finished."""
        obs = self._cancelled_obs(k, "running", reason)
        event = {"status": "error", "tool": obs.tool, "version": obs.tool_version, "category": "cancelled"}
        self._record(obs.call_id, "observation", {**event, "aborted": True})
        return obs

    def _cancelled_obs(self, k: str, phase: str, reason: str) -> Observation:
        spec = self.plan.nodes[k].specs[0]
        error = ActionError.of("cancelled", f"node {k} was cancelled: {reason}", details={"phase": phase})
        return Observation.failure(error, call_id=self._call_id(k), tool=spec.name, tool_version=spec.version)

    # ------------------------------------------------------------------ one node
    def _call_id(self, k: str) -> str:
        return f"{self.run_state.run_id}:{k}"

    def _record(self, call_id: str | None, kind: str, data: Mapping[str, Any]) -> None:
        rec = Recorder(self.run_state, call_id)
        rec.add(kind, data)
        self._buffer(rec)

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
        self.dispatched_args[node.id] = arguments
        obs = await self._call(node, node.id, node.node.tool, arguments)
        return self._verify(node, obs)

    def _arguments(self, node: CheckedNode, raw: Mapping[str, Any]) -> Mapping[str, Any] | Observation:
        """Substitute references with final values; a missing path or incompatible join fails the node."""
        if not node.refs:
            # a copy: a tool that mutates its arguments must not change the plan (or a retry's key)
            return (
                substitute(raw, _no_refs) if any(isinstance(v, (dict, list)) for v in raw.values()) else raw
            )
        missing: list[FieldError] = []

        def resolve(text: str) -> Any:
            ref = parse_ref(text)
            value = self._ref_value(ref)
            if value is MISSING:
                missing.append(
                    FieldError(
                        path=f"$ref:{text}", message=f"{text} does not exist in {ref.node}'s observation"
                    )
                )
                return None
            return value

        arguments: Mapping[str, Any] = substitute(raw, resolve)
        spec = node.specs[0]
        if missing:
            error = ActionError.of(
                "invalid_arguments", f"node {node.id}: {missing[0].message}", field_errors=missing
            )
            return Observation.failure(
                error, call_id=self._call_id(node.id), tool=spec.name, tool_version=spec.version
            )
        clash = self._join_clash(node)
        if clash is not None:
            return Observation.failure(
                clash, call_id=self._call_id(node.id), tool=spec.name, tool_version=spec.version
            )
        return arguments

    def _ref_value(self, ref: Ref, source: Observation | None = None) -> Any:
        """The value ``ref`` points at (:data:`MISSING` when the path does not exist)."""
        if source is None:
            source = self.results.get(ref.node)
            if source is None:
                return MISSING
        whole = ref.top != "data"  # data is walked in place; anything else needs the dict form
        return walk(source.to_dict(), ref.path) if whole else walk(source.data, ref.path[1:])

    def _ref_label(self, text: str) -> tuple[str, Label] | None:
        """(call id, output label) of the node a reference points at."""
        source = self.results.get(parse_ref(text).node)
        return None if source is None else (source.call_id, label_of(source))

    def _join_clash(self, node: CheckedNode) -> ActionError | None:
        """Inputs read from overlapping resources must report the same resource version."""
        sources = list(dict.fromkeys(r.node for r in node.refs))
        if len(sources) < 2:
            return None
        for i, a in enumerate(sources):
            va = self.results[a].provenance.resource_version
            if va is None:
                continue
            ra = self.plan.nodes[a].reads + self.plan.nodes[a].writes
            for b in sources[i + 1 :]:
                vb = self.results[b].provenance.resource_version
                if vb is None or vb == va:
                    continue
                rb = self.plan.nodes[b].reads + self.plan.nodes[b].writes
                shared = next((x for x in ra for y in rb if overlaps(x, y) and x != "*" and y != "*"), None)
                if shared is not None:
                    return ActionError.of(
                        "stale_reference",
                        f"node {node.id} joins {a} (version {va}) and {b} (version {vb}) of {shared!r}; "
                        "observe again so both come from one version",
                        details={"inputs": {a: va, b: vb}, "resource": shared},
                        current_version=vb,
                    )
        return None

    def _provenance(self, node: CheckedNode, arguments: Mapping[str, Any]) -> Mapping[str, str]:
        if not node.refs and not node.node.provenance:
            return _NO_MARKS
        marks = dict(node.node.provenance)
        for name, value in arguments.items():
            for _pointer, raw in find_refs(value):
                marks[name] = f"tool_result:{self._call_id(parse_ref(raw).node)}"
                break
        return marks

    async def _call(
        self, node: CheckedNode, node_id: str, tool: str, arguments: Mapping[str, Any]
    ) -> Observation:
        raw_args = node.node.arguments if not node.node.first_of else {}
        call = ToolCall(
            name=tool,
            arguments=dict(arguments),
            id=f"{self.run_state.run_id}:{node_id}",
            provenance=self._provenance(node, raw_args),
        )
        rec = Recorder(self.run_state, call.id)
        bound = bindings(raw_args, self._ref_label) if node.refs else None  # $ref args carry their labels
        try:
            ready = await self.engine.aprepare(
                self.run_state, call, principal=self.principal, rec=rec, node_id=node_id, bound=bound
            )
            if isinstance(ready, Ready):
                return await self.engine.aexecute(ready, rec)
            return ready
        except asyncio.CancelledError:
            rec.add("plan_node_cancelled", {"node": node_id, "phase": "running"})
            raise
        except Exception as exc:
            return self.engine.internal(exc, rec)
        finally:
            self._buffer(rec)

    def _buffer(self, rec: Recorder) -> None:
        """Keep a call's whole records; hand them to the store at most every FLUSH_S (and at the end)."""
        self.pending.extend(rec.records)
        rec.records = []
        now = time.monotonic()
        if now - self.flushed_at >= FLUSH_S or len(self.pending) >= FLUSH_RECORDS:
            self._flush_pending(now)

    def _flush_pending(self, now: float) -> None:
        self.flushed_at = now
        if self.pending:
            rec = Recorder(self.run_state, None)
            rec.records, self.pending = self.pending, []
            self.engine.flush(rec)

    def _verify(self, node: CheckedNode, obs: Observation) -> Observation:
        check = node.node.verify
        if check is None or obs.status != "ok":
            return obs
        try:
            verdict = check(obs)
        except Exception as exc:
            verdict = Rejected(
                ActionError.of("internal", f"the verifier of {node.id} raised {type(exc).__name__}: {exc}")
            )
        rejected = isinstance(verdict, Rejected)
        data: dict[str, Any] = {"node": node.id, "verdict": "rejected" if rejected else "accepted"}
        if isinstance(verdict, Rejected):
            data["category"] = verdict.error.category
            data["message"] = verdict.error.message[:300]
        self._record(obs.call_id, "verified", data)
        if not isinstance(verdict, Rejected):
            return obs
        return dataclasses.replace(obs, status="error", error=verdict.error)


def _no_refs(text: str) -> Any:
    return {"$ref": text}


def _status(observations: Any) -> PlanStatus:
    statuses = [o.status for o in observations]
    if all(s == "ok" for s in statuses):
        return "ok"
    if any(s != "error" for s in statuses):  # some node (or some items of a batch node) succeeded
        return "partial"
    return "error"


def _safe(node: CheckedNode) -> bool:
    return all(spec.effect in _SAFE_TO_ABORT for spec in node.specs)
