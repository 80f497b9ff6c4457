"""The call engine: every proposed call, whoever proposes it, runs through here.

``Engine.calls`` / ``acalls`` (:mod:`actionspace.pipeline.messages`) take a model's raw output
(or a ToolCall), parse it, and for each call run the stages (:mod:`actionspace.pipeline.stages`)
and then :meth:`Engine.execute` / :meth:`Engine.aexecute`: budgets and the read cache, batches,
streams, and — for a side-effecting call — the ledger's commit protocol, driven by the one
driver :meth:`Engine.drive_stream`. The plan scheduler, atomic groups, streams, durable
workflows, the session and the gateway are clients of these public methods.

Blocking store I/O (SQLite, PostgreSQL) leaves the event loop on the async path: every ledger
step (:class:`~actionspace.pipeline.commit.LedgerDriver`), the trace flush, and the gates of calls
that may read or file approval requests run on a worker thread; the sync path runs them inline.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Coroutine, Mapping, Sequence
from functools import reduce
from typing import Any, Literal, TypeVar, overload

from actionspace._epoch import bump
from actionspace.catalog.registry import Catalog
from actionspace.catalog.spec import ToolSpec
from actionspace.discovery.runs import RunState
from actionspace.errors import ActionError, said_safely
from actionspace.execution.batch import arun_batch, run_batch
from actionspace.execution.errors import map_exception
from actionspace.execution.executor import Executor, Outcome
from actionspace.execution.ready import Ready
from actionspace.execution.streaming import StreamPolicy, is_streaming
from actionspace.ledger.commit import Protocol
from actionspace.ledger.entries import LedgerStore
from actionspace.ledger.memory import MemoryLedgerStore
from actionspace.ledger.run_state import RunStateStore
from actionspace.observation import ArtifactStore
from actionspace.observation.pagination import cursor_scope
from actionspace.outcomes import Failed, Succeeded
from actionspace.pipeline.calls import dispatched_event
from actionspace.pipeline.commit import Dispatch, LedgerDriver
from actionspace.pipeline.contract import dry_run, gone_is_stale, postcheck, preview_outcome
from actionspace.pipeline.fast import FastPath
from actionspace.pipeline.fast_nodes import plain_node as _plain_node
from actionspace.pipeline.messages import Messages
from actionspace.pipeline.observe import fail, observe, observe_ready
from actionspace.pipeline.runs import MAX_LIVE_RUNS, RunRegistry, unreserved
from actionspace.pipeline.stages import CallInput, Draft, Stage, Stages, proposed, ready_of, record_proposed
from actionspace.pipeline.streaming import final_of, stream_ready
from actionspace.plan.conflicts import ANY, conflicting, expand
from actionspace.policy.flow import Binding
from actionspace.policy.labels import Label
from actionspace.policy.principal import Principal
from actionspace.trace.events import TraceStore
from actionspace.trace.recorder import Recorder, RecordSink
from actionspace.types import Observation, ToolCall

__all__ = ["Engine", "run_sync"]

T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends (the engine's blocking mode) to its result, without a loop."""
    try:
        coro.send(None)
    except StopIteration as stop:
        result: T = stop.value
        return result
    coro.close()
    raise RuntimeError("a blocking engine step suspended; this is a bug in actionspace")


class Engine:
    """The stages, the executor and the ledger driver of one Runtime. Thread-safe."""

    def __init__(
        self,
        *,
        catalog: Catalog,
        ledger: LedgerStore,
        artifacts: ArtifactStore,
        executor: Executor,
        trace: TraceStore,
        sink: RecordSink,
        stages: Stages,
        default_principal: Principal,
        on_first_run: Callable[[], object] | None = None,
        run_states: RunStateStore | None = None,
        max_live_runs: int = MAX_LIVE_RUNS,
    ) -> None:
        self.catalog = catalog
        self.ledger = ledger
        self.artifacts = artifacts
        self.executor = executor
        self.trace = trace
        self.sink = sink
        self.stages, stages.ledger = stages, ledger  # a call the ledger replays spends no budget
        self.default_principal = default_principal
        self._extra: list[Stage] = []
        self._late: list[Stage] = []
        self.writing: dict[str, None] = {}  # keys of writes in the ledger protocol (noted at close)
        self.checked_plans: dict[int, object] = {}  # plans' checks kept for a rerun (plan/_simple_plan.py)
        self._ordered = stages.ordered()
        self._checks = stages.checks
        """How many stages (resolve, authorize, validate) read only memory."""
        self._offload = not isinstance(ledger, MemoryLedgerStore)
        self.runs = RunRegistry(
            trace,
            run_states,
            max_live_runs=max_live_runs,
            on_first_run=on_first_run,
            in_memory=not self._offload,
        )
        """The open runs, their state and their events (pipeline/runs.py)."""
        self.driver = LedgerDriver(ledger, offload=self._offload)
        self.fast = FastPath(stages)
        """The precompiled path of simple calls (pipeline/fast.py); anything else runs the stages."""
        self.messages = Messages(self)
        """Whole messages (pipeline/messages.py): :meth:`Messages.calls` and its async forms."""
        self.calls, self.acalls = self.messages.calls, self.messages.acalls
        self.aquick, self.quick = self.messages.aquick, self.messages.direct  # quick: no coroutine

    @property
    def ordered(self) -> Sequence[Stage]:
        """The stages every call runs, in order (they change when a stage is added)."""
        return self._ordered

    # ------------------------------------------------------------------ stages
    def add_stage(self, stage: Stage, *, after: Literal["validate", "flow"] = "validate") -> None:
        """Add a stage after validation and before the approval, flow and budget gates (the
        default), or after the flow gate (``after="flow"``: the call's output label is known
        then, in ``draft.label``, and the stage may join more into it)."""
        if stage in self._extra or stage in self._late:
            return
        (self._late if after == "flow" else self._extra).append(stage)
        self._ordered = self.stages.ordered(self._extra, self._late)
        bump()  # a precompiled entry kept for a plan's tool is checked again (pipeline/fast_nodes.py)

    def set_guard(self, guard: Any) -> None:
        """Budgets and the read cache admit calls last (None: neither applies)."""
        self.stages.guard = guard
        self._ordered = self.stages.ordered(self._extra, self._late)

    # ------------------------------------------------------------------ runs and records
    def run(self, run_id: str, principal: Principal | None = None) -> RunState:
        """The state of ``run_id``, opened (and ``run_started`` recorded) on first use.

        A run another process (or this one, before evicting it) worked on comes back from the
        run-state store: its principal, context label, turn and pins, whoever continues it.
        ``principal`` names the principal of a run that has none yet.
        """
        run = self.runs.known(run_id)
        if run is not None:
            return run
        return self.runs.open(run_id, principal or self.default_principal, self._started)

    def _started(self, run: RunState) -> None:
        rec = Recorder(run, None)
        started = {"principal": run.principal.id}
        if run.principal.tenant is not None:  # listings are filtered by tenant
            started["tenant"] = run.principal.tenant
        rec.add("run_started", started)
        self.flush(rec)

    def persist(self, run: RunState) -> None:
        """Save the run's state if it changed (see :class:`~actionspace.pipeline.runs.RunRegistry`)."""
        self.runs.persist(run)

    def forget(self, run_id: str) -> None:
        """Save a run's state and drop it from memory (a finished or idle run); it comes back on use."""
        self.runs.forget(run_id)

    def known_run(self, run_id: str) -> RunState | None:
        """The state of ``run_id`` if this engine has opened it, else None (never opens one)."""
        return self.runs.known(run_id)

    def record(self, run_id: str, kind: str, data: Mapping[str, Any], *, call_id: str | None = None) -> None:
        """Append one event to a run's trace."""
        rec = Recorder(self.run(run_id), call_id)
        rec.add(kind, data)
        self.flush(rec)

    def flush(self, rec: Recorder) -> None:
        """Hand a call's events to the trace store, the run's state saved first if it changed
        (:meth:`RunRegistry.flush <actionspace.pipeline.runs.RunRegistry.flush>`)."""
        self.runs.flush(rec, self.sink)

    async def aflush(self, rec: Recorder) -> None:
        """:meth:`flush` from async code: off the loop when it may wait for store I/O."""
        if self.runs.flush_blocks(rec):
            await asyncio.to_thread(self.flush, rec)
        else:
            self.flush(rec)

    def flush_blocks(self, rec: Recorder) -> bool:
        """Whether :meth:`flush` of ``rec`` may wait for store I/O (``RunRegistry.flush_blocks``)."""
        return self.runs.flush_blocks(rec)

    # ------------------------------------------------------------------ the stages
    def prepare(
        self,
        run: RunState,
        call: ToolCall,
        *,
        principal: Principal,
        rec: Recorder,
        node_id: str | None = None,
        provenance: Mapping[str, str] | None = None,
        sources: Mapping[str, Sequence[str]] | None = None,
        bound: Mapping[str, Binding] | None = None,
        occurrence: int = 1,
    ) -> Ready | Observation:
        """Run every stage over one call: a Ready call, or the error observation that ends it."""
        inp = CallInput(
            run=run, call=call, principal=principal, rec=rec, node_id=node_id,
            provenance=provenance, sources=sources, bound=bound, occurrence=occurrence,
        )  # fmt: skip
        return proposed(inp, self.prepare_input(inp))

    async def aprepare(
        self,
        run: RunState,
        call: ToolCall,
        *,
        principal: Principal,
        rec: Recorder,
        node_id: str | None = None,
        provenance: Mapping[str, str] | None = None,
        sources: Mapping[str, Sequence[str]] | None = None,
        bound: Mapping[str, Binding] | None = None,
        occurrence: int = 1,
    ) -> Ready | Observation:
        """:meth:`prepare` from async code: the stages' store reads (approvals, budgets) run off the loop."""
        inp = CallInput(
            run=run, call=call, principal=principal, rec=rec, node_id=node_id,
            provenance=provenance, sources=sources, bound=bound, occurrence=occurrence,
        )  # fmt: skip
        return proposed(inp, await self.aprepare_input(inp))

    async def anode(
        self,
        run: RunState,
        call: ToolCall,
        *,
        principal: Principal,
        rec: Recorder,
        node_id: str,
    ) -> Observation:
        """:meth:`aprepare` then :meth:`aexecute` of one call a plan node makes: what they give,
        events included, on the precompiled path when the call qualifies (pipeline/fast.py)."""
        inp = CallInput(run=run, call=call, principal=principal, rec=rec, node_id=node_id)
        quick = self.fast.ready(inp, self._ordered)
        if quick is not None:  # no stage ran that could have recorded ``proposed``
            record_proposed(inp, quick)
            if quick.key is not None:  # side effects: the ledger runs it
                return await self.run_ready(quick, rec, False)
            return await self.fast.execute(quick, rec, executor=self.executor, artifacts=self.artifacts)
        ready = proposed(inp, await self.aprepare_input(inp))
        return await self.run_ready(ready, rec, False) if isinstance(ready, Ready) else ready

    plain_node = _plain_node
    """A plain plan node's call on the precompiled path (pipeline/fast_nodes.py ``plain_node``,
    bound as a method with no frame of its own): its observation, a coroutine giving it, or None
    (nothing recorded) to take :meth:`anode`."""

    def prepare_input(self, inp: CallInput) -> Ready | Observation:
        """:meth:`prepare` over a ready-made :class:`CallInput`, in the calling thread."""
        quick = self.fast.ready(inp, self._ordered)  # what the stages would decide, decided once
        return quick if quick is not None else self._stages(inp, self._draft(inp), 0)

    async def aprepare_input(self, inp: CallInput) -> Ready | Observation:
        """:meth:`prepare_input` from async code.

        Resolve, authorize and validate read only memory and run on the loop. The gates after
        them may read or file approval requests (the approval gate; a flow policy asking to
        declassify): for a call that can reach them — a side-effecting tool or one that needs
        approval — they run on a worker thread when the stores are not in memory.
        """
        quick = self.fast.ready(inp, self._ordered)  # what the stages would decide, decided once
        if quick is not None:
            return quick
        draft = self._draft(inp)
        first = self._checks
        result = self._stages(inp, draft, 0, first)
        if result is not None:
            return result
        spec = draft.spec
        assert spec is not None
        if self._offload and (spec.has_side_effects or spec.requires_approval):
            return await asyncio.to_thread(self._stages, inp, draft, first)
        return self._stages(inp, draft, first)

    def _draft(self, inp: CallInput) -> Draft:
        node = inp.node_id or f"n{next(inp.run.nodes)}"
        draft = Draft(call_id=inp.call.id or f"{inp.run.run_id}:{node}", node=node)
        inp.rec.call_id = draft.call_id
        if inp.bound:  # fed by plan references: their labels mark its events, flow-checked or refused
            held = reduce(Label.join, (b.label for b in inp.bound.values()))
            if held.secret or held.readers is not None:
                inp.run.flow.pending[draft.call_id] = held
        return draft

    @overload
    def _stages(self, inp: CallInput, draft: Draft, start: int) -> Ready | Observation: ...
    @overload
    def _stages(self, inp: CallInput, draft: Draft, start: int, stop: int) -> Observation | None: ...

    def _stages(
        self, inp: CallInput, draft: Draft, start: int, stop: int | None = None
    ) -> Ready | Observation | None:
        """Stages ``start``..``stop`` (None: to the end, then the Ready call); an error ends the call."""
        for stage in self._ordered[start:stop]:
            error = stage(inp, draft)
            if error is not None:
                spec = draft.spec
                if spec is None:
                    return fail(inp.rec, error, draft.call_id, inp.call.name[:200])
                return fail(inp.rec, error, draft.call_id, spec.name, spec.version)
        return ready_of(inp, draft) if stop is None else None

    # ------------------------------------------------------------------ one accepted call
    def execute(self, ready: Ready, rec: Recorder) -> Observation:
        """Run an accepted call in the calling thread: budgets, cache, batch, stream, ledger,
        then the tool's post-conditions."""
        return run_sync(self.run_ready(ready, rec, True))

    def aexecute(self, ready: Ready, rec: Recorder) -> Coroutine[Any, Any, Observation]:
        """Async :meth:`execute` (await it)."""
        return self.run_ready(ready, rec, False)

    async def run_ready(self, ready: Ready, rec: Recorder, blocking: bool) -> Observation:
        """:meth:`execute` (``blocking``) or :meth:`aexecute` as one coroutine."""
        spec = ready.compiled.spec
        cursors = self.stages.cursor_key
        if cursors is None:
            obs = await self._execute(ready, rec, blocking)
        else:  # the cursors it mints or reads are bound to its run and tool (Stages.cursor_key)
            with cursor_scope(cursors, run_id=rec.run_id, tool=spec.name):
                obs = await self._execute(ready, rec, blocking)
        if spec.bindings and obs.error is not None:
            obs = gone_is_stale(ready, obs)
        if spec.verify or spec.completion is not None:
            obs = postcheck(ready, obs, rec)
        return obs

    async def dry_run(self, inp: CallInput, blocking: bool) -> Observation:
        """The stages up to the gates, then the tool's preview instead of the tool."""
        draft = self._draft(inp)
        stopped = self._stages(inp, draft, 0, self._checks + len(self._extra))
        if stopped is not None:
            return stopped
        ready = ready_of(inp, draft)
        pending: list[Any] = []

        def run(value: Any) -> Any:
            if not inspect.isawaitable(value):
                return value
            if blocking:
                return self.executor.block_on(_awaited(value))
            pending.append(value)
            return None

        outcome = preview_outcome(ready, run)
        if pending:
            try:
                outcome = Succeeded(await pending[0], 1)
            except Exception as exc:
                outcome = Failed(map_exception(exc, side_effects=False), 1)
        return dry_run(ready, outcome, lambda out: self.observe(ready, out, inp.rec), inp.rec)

    async def _execute(self, ready: Ready, rec: Recorder, blocking: bool, part: bool = False) -> Observation:
        if ready.admission is not None:  # budgets or the read cache apply
            admission, ready.admission = ready.admission, None
            if blocking:
                return admission.run(rec.add, lambda: run_sync(self._execute(ready, rec, True, part)))
            return await admission.arun(rec.add, lambda: self._execute(ready, rec, False, part))
        spec = ready.compiled.spec
        if spec.batch is not None and not part:  # ``part``: one sub-call of a batch
            if blocking:
                return run_batch(
                    ready, rec, self.ledger, lambda sub: run_sync(self._execute(sub, rec, True, True))
                )
            return await arun_batch(ready, rec, self.ledger, lambda sub: self._execute(sub, rec, False, True))
        if is_streaming(spec):
            if blocking:
                final: Observation = self.executor.block_on(final_of(self.stream(ready, rec)))
                return final
            return await final_of(self.stream(ready, rec))
        if ready.key is None:
            rec.add("dispatched", dispatched_event(ready, spec))
            if blocking:
                outcome = self.executor.run(spec, ready.kwargs, rec.retry)
            else:
                outcome = await self.executor.arun(spec, ready.kwargs, rec.retry)
            return observe_ready(ready, outcome, rec, self.artifacts)  # a plain result put in directly

        async def dispatch() -> AsyncIterator[Observation | Outcome]:
            rec.add("dispatched", dispatched_event(ready, spec))
            if blocking:
                yield self.executor.run(spec, ready.kwargs, rec.retry)
            else:
                yield await self.executor.arun(spec, ready.kwargs, rec.retry)

        last: Observation | None = None
        self.writing[ready.key] = None
        try:
            async for obs in self.drive_stream(ready, rec, dispatch, blocking=blocking):
                last = obs
        finally:
            self.writing.pop(ready.key, None)
            self._invalidate(spec, ready.arguments, rec)
        assert last is not None
        return last

    def _invalidate(self, spec: ToolSpec, arguments: Mapping[str, Any], rec: Recorder) -> None:
        """A write (which may have committed, whatever it answered) drops the cached reads its
        write set overlaps (an undeclared set overlaps everything)."""
        guard = self.stages.guard
        cache = None if guard is None else guard.cache
        if cache is None or not len(cache):
            return
        writes = expand(spec.writes, arguments) if spec.writes else (ANY,)

        def stale(read: ToolSpec, args: Mapping[str, Any]) -> bool:
            reads = expand(read.reads, args) if read.reads else (ANY,)
            return conflicting(reads, (), (), writes) is not None

        dropped = cache.invalidate(stale)
        if dropped:
            rec.add("cache_invalidated", {"tool": spec.name, "writes": list(writes[:20]), "dropped": dropped})

    def stream(
        self, ready: Ready, rec: Recorder, policy: StreamPolicy | None = None
    ) -> AsyncGenerator[Observation, None]:
        """An accepted streaming call's observations: provisional ones, then exactly one final."""
        admission, ready.admission = ready.admission, None
        stream = stream_ready(self, ready, rec, policy=policy or StreamPolicy())
        return stream if admission is None else admission.stream(rec.add, stream)

    def observe(
        self, ready: Ready, outcome: Outcome, rec: Recorder, *, keep_raw: bool = False
    ) -> Observation:
        """Shape a tool outcome into its observation (the observe stage) and record it."""
        return observe(ready, outcome, artifacts=self.artifacts, rec=rec, keep_raw=keep_raw)

    # ------------------------------------------------------------------ the ledger protocol
    def drive_stream(
        self,
        ready: Ready,
        rec: Recorder,
        dispatch: Dispatch,
        *,
        blocking: bool = False,
        on_outcome: Callable[[Outcome], Observation] | None = None,
    ) -> AsyncGenerator[Observation, None]:
        """A side-effecting call through the ledger (:meth:`LedgerDriver.drive_call`)."""
        observe_outcome = on_outcome or (lambda out: self.observe(ready, out, rec))
        return self.driver.drive_call(ready, rec, dispatch, observe_outcome, blocking=blocking)

    def drive(
        self, steps: Protocol, dispatch: Dispatch, *, blocking: bool = False, key: str | None = None
    ) -> AsyncGenerator[Observation, None]:
        """Step a commit protocol to its end (:meth:`LedgerDriver.drive`); atomic groups use it
        (``key``: their entry's, noted in ``LedgerDriver.sending`` once their send began)."""
        return self.driver.drive(steps, dispatch, blocking=blocking, key=key)

    # ------------------------------------------------------------------ failures of ours
    def internal(self, exc: BaseException, rec: Recorder, call: ToolCall | None = None) -> Observation:
        """A bug of ours (or of a validator) as an ``internal`` observation; never raised at the model.
        A node number the run-state store could not reserve is its outage: ``transient``."""
        error = unreserved(exc) or ActionError.of(
            "internal",
            f"actionspace failed while handling this call: {type(exc).__name__}: {said_safely(exc, 300)}",
            vendor_code=type(exc).__name__,
        )
        call_id = rec.call_id or (call.id if call is not None and call.id else f"{rec.run_id}:internal")
        rec.add("observation", {"status": "error", "category": error.category, "message": error.message})
        return Observation.failure(error, call_id=call_id, tool="" if call is None else call.name[:200])


async def _awaited(value: Any) -> Any:
    return await value
