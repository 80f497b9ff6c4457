"""The Runtime's call path: prepare, execute (sync and async), stream, commit through the ledger.

A mixin of :class:`~actionspace.runtime.Runtime`, as :mod:`actionspace._runtime_ops` is; the plan
scheduler, the streaming driver and the durable backend reach these methods on the Runtime.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from actionspace._calls import dispatched_event, parse_raw
from actionspace._pipeline import Ready, Recorder, RunState, observe, prepare
from actionspace.errors import ActionError
from actionspace.execution.batch import arun_batch, run_batch
from actionspace.execution.executor import Outcome
from actionspace.execution.streaming import StreamPolicy, final_of, is_streaming, stream_ready
from actionspace.ledger.commit import Protocol, Sleep, new_entry, protocol
from actionspace.policy.flow import Binding
from actionspace.policy.principal import Principal
from actionspace.types import Observation, ToolCall

if TYPE_CHECKING:
    from actionspace._pipeline import Compiler
    from actionspace.approval.gate import Approvals
    from actionspace.catalog.registry import Catalog
    from actionspace.execution.executor import Executor
    from actionspace.execution.guarded import Guard
    from actionspace.ledger.entries import LedgerStore
    from actionspace.observation import ArtifactStore
    from actionspace.policy.flow import FlowPolicy

__all__ = ["Execution"]


class Execution:
    """Prepare, execute, stream and internal-failure methods of :class:`~actionspace.runtime.Runtime`."""

    if TYPE_CHECKING:
        catalog: Catalog
        approvals: Approvals
        ledger: LedgerStore
        artifacts: ArtifactStore
        flow_policy: FlowPolicy | None
        _compiler: Compiler
        _executor: Executor
        _guard: Guard | None
        _ctx: Any

        def _run(self, run_id: str | None, principal: Principal | None) -> RunState: ...
        def _flush(self, rec: Recorder) -> None: ...

    def _call_sync(
        self,
        raw: Any,
        run_id: str | None,
        node_id: str | None,
        principal: Principal | None,
        provenance: Mapping[str, str] | None,
        sources: Mapping[str, Sequence[str]] | None = None,
    ) -> tuple[str, list[Observation]]:
        """(run id, one observation per call in ``raw``)."""
        run = self._run(run_id, principal)
        who = principal or run.principal
        rec = Recorder(run, None)
        try:
            calls = parse_raw(raw, rec)
            if isinstance(calls, Observation):
                return run.run_id, [calls]
            node = node_id if len(calls) == 1 else None
            out = []
            for call in calls:
                ready = self._prepare(run, call, node, who, provenance, rec, sources=sources)
                out.append(self._execute(ready, rec) if isinstance(ready, Ready) else ready)
                run.flow.observed(out[-1])
            return run.run_id, out
        except Exception as exc:  # a bug of ours or of a validator: typed, never raised at the model
            return run.run_id, [self._internal(exc, rec)]
        finally:
            self._flush(rec)

    def _prepare(
        self,
        run: RunState,
        call: ToolCall,
        node_id: str | None,
        principal: Principal,
        provenance: Mapping[str, str] | None,
        rec: Recorder,
        *,
        sources: Mapping[str, Sequence[str]] | None = None,
        bound: Mapping[str, Binding] | None = None,
    ) -> Ready | Observation:
        return prepare(
            catalog=self.catalog,
            compiler=self._compiler,
            run=run,
            call=call,
            node_id=node_id,
            principal=principal,
            provenance=provenance,
            rec=rec,
            ctx_factory=self._ctx,
            approvals=self.approvals.store,
            guard=self._guard,
            flow_policy=self.flow_policy,
            sources=sources,
            bound=bound,
        )

    def _execute(self, ready: Ready, rec: Recorder, *, part: bool = False) -> Observation:
        if ready.admission is not None:  # budgets or the read cache apply
            admission, ready.admission = ready.admission, None
            return admission.run(rec.add, lambda: self._execute(ready, rec, part=part))
        spec = ready.compiled.spec
        if spec.batch is not None and not part:  # ``part``: one sub-call of a batch
            return run_batch(ready, rec, self.ledger, lambda sub: self._execute(sub, rec, part=True))
        if is_streaming(spec):
            final: Observation = self._executor.block_on(final_of(self._stream(ready, rec)))
            return final
        if ready.key is None:
            rec.add("dispatched", dispatched_event(ready, spec))
            outcome = self._executor.run(spec, ready.kwargs, rec.retry)
            return observe(ready, outcome, artifacts=self.artifacts, rec=rec)
        steps = self._protocol(ready, rec)
        try:
            command = next(steps)
            while True:
                if isinstance(command, Sleep):
                    time.sleep(command.seconds)
                    command = steps.send(None)
                else:
                    rec.add("dispatched", dispatched_event(ready, spec))
                    command = steps.send(self._executor.run(spec, ready.kwargs, rec.retry))
        except StopIteration as stop:
            result: Observation = stop.value
            return result

    async def _aexecute(self, ready: Ready, rec: Recorder, *, part: bool = False) -> Observation:
        if ready.admission is not None:
            admission, ready.admission = ready.admission, None
            return await admission.arun(rec.add, lambda: self._aexecute(ready, rec, part=part))
        spec = ready.compiled.spec
        if spec.batch is not None and not part:
            return await arun_batch(ready, rec, self.ledger, lambda sub: self._aexecute(sub, rec, part=True))
        if is_streaming(spec):
            return await final_of(self._stream(ready, rec))
        if ready.key is None:
            rec.add("dispatched", dispatched_event(ready, spec))
            outcome = await self._executor.arun(spec, ready.kwargs, rec.retry)
            return observe(ready, outcome, artifacts=self.artifacts, rec=rec)
        steps = self._protocol(ready, rec)
        try:
            command = next(steps)
            while True:
                if isinstance(command, Sleep):
                    await asyncio.sleep(command.seconds)
                    command = steps.send(None)
                else:
                    rec.add("dispatched", dispatched_event(ready, spec))
                    command = steps.send(await self._executor.arun(spec, ready.kwargs, rec.retry))
        except StopIteration as stop:
            result: Observation = stop.value
            return result

    def _stream(
        self, ready: Ready, rec: Recorder, policy: StreamPolicy | None = None
    ) -> AsyncGenerator[Observation, None]:
        admission, ready.admission = ready.admission, None
        stream = stream_ready(
            ready,
            rec,
            artifacts=self.artifacts,
            protocol=lambda fin: self._protocol(ready, rec, on_outcome=fin),
            policy=policy or StreamPolicy(),
        )
        return stream if admission is None else admission.stream(rec.add, stream)

    def _protocol(
        self, ready: Ready, rec: Recorder, *, on_outcome: Callable[[Outcome], Observation] | None = None
    ) -> Protocol:
        spec = ready.compiled.spec
        assert ready.key is not None
        entry = new_entry(
            key=ready.key, run_id=rec.run.run_id, node_id=ready.node_id, spec=spec, arguments=ready.arguments
        )

        def fail(error: ActionError) -> Observation:
            obs = Observation.failure(error, call_id=ready.call_id, tool=spec.name, tool_version=spec.version)
            rec.add(
                "observation",
                {
                    "status": "error",
                    "category": error.category,
                    "recovery": list(error.recovery),
                    "message": error.message[:300],
                },
            )
            return obs

        return protocol(
            spec=spec,
            entry=entry,
            store=self.ledger,
            observe=on_outcome or (lambda out: observe(ready, out, artifacts=self.artifacts, rec=rec)),
            fail=fail,
            record=rec.add,
        )

    def _internal(self, exc: Exception, rec: Recorder) -> Observation:
        error = ActionError.of(
            "internal",
            f"actionspace failed while handling this call: {type(exc).__name__}: {str(exc)[:300]}",
            vendor_code=type(exc).__name__,
        )
        call_id = rec.call_id or f"{rec.run.run_id}:internal"
        rec.add("observation", {"status": "error", "category": "internal", "message": error.message})
        return Observation.failure(error, call_id=call_id, tool="")
