"""Streaming tools: a tool whose function is a generator yields its output chunk by chunk (DESIGN §5).

A streaming tool is a sync or async generator function. Each yielded chunk is ``str``, ``bytes``
or any JSON-able value (written as one line of canonical JSON); a yielded :class:`ToolResult`
with ``data=None`` sets the envelope facts of the final observation (effects, versions,
``complete``). While it runs, :meth:`Runtime.astream` yields *provisional* observations
(``provisional=True``, ``complete=False``, ``data`` = the output so far shaped by the tool's
trimming rule, so never above ``max_observation_bytes``), then exactly one final observation:
the whole output shaped as any other result, its raw bytes always written to the artifact store
(``artifact_ref``). Only the final observation may feed another action. ``Runtime.call`` and
``Runtime.acall`` return the final observation only.

Memory stays bounded whatever the length of the stream: the raw output is spooled (in memory up
to ``SPOOL_MEMORY_BYTES``, then in a temporary file) and the provisional view is a trimming rule
fed incrementally. A stream is never retried once started; ``timeout_s`` of the tool bounds the
wait for each next chunk. A tool failing midway ends in an error observation (its category from
the usual exception map; a ``BaseException`` of the tool's own too, as for any tool, while
``KeyboardInterrupt`` and ``SystemExit`` go on up) and stores no artifact claiming a complete
output. Side-effecting streaming tools go through the ledger like every other write.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import copy
import inspect
import tempfile
import time
from collections.abc import AsyncGenerator, Callable, Coroutine, Iterator
from dataclasses import replace
from hashlib import sha256
from typing import Any, Final, Protocol, cast

from actionspace.catalog.spec import ToolSpec
from actionspace.discovery.render import once_per_id
from actionspace.discovery.runs import RunState
from actionspace.errors import ActionError
from actionspace.execution.deadlines import with_timeout
from actionspace.execution.executor import Executor, Failed, Outcome, Succeeded
from actionspace.execution.pulls import END, Pull, Stopped
from actionspace.execution.raised import passes_on
from actionspace.execution.ready import Ready
from actionspace.execution.result import ToolResult
from actionspace.execution.streaming import StreamPolicy, is_streaming
from actionspace.observation import canonical_bytes
from actionspace.observation.rules import RULES, JsonRule, TrimRule
from actionspace.parse import ids_apart, parse
from actionspace.pipeline.calls import InFlight, dispatched_event, parse_raw, per_call_id
from actionspace.pipeline.commit import Dispatch
from actionspace.pipeline.runs import check_id
from actionspace.policy.principal import Principal
from actionspace.trace.recorder import Recorder
from actionspace.types import Observation, Provenance, ToolCall, Trimming


class _Runs(Protocol):
    @property
    def closed(self) -> bool:
        """The runtime closed: a call not begun yet is not sent."""
        ...


class _Messages(Protocol):
    @property
    def in_flight(self) -> InFlight: ...


class Engine(Protocol):
    """What streaming needs of :class:`actionspace.pipeline.Engine` (it imports this module)."""

    executor: Executor
    writing: dict[str, None]
    """Keys of the writes in the ledger protocol (noted ``unknown`` when the runtime closes)."""

    @property
    def runs(self) -> _Runs: ...

    @property
    def messages(self) -> _Messages:
        """Its calls in flight (``messages.in_flight``), which ``Runtime.close()`` cuts."""
        ...

    def run(self, run_id: str, principal: Principal | None = None) -> RunState: ...

    async def aprepare(
        self,
        run: RunState,
        call: ToolCall,
        *,
        principal: Principal,
        rec: Recorder,
        node_id: str | None = None,
    ) -> Ready | Observation: ...

    def aexecute(self, ready: Ready, rec: Recorder) -> Coroutine[Any, Any, Observation]: ...

    def stream(
        self, ready: Ready, rec: Recorder, policy: StreamPolicy | None = None
    ) -> AsyncGenerator[Observation, None]: ...

    def observe(
        self, ready: Ready, outcome: Outcome, rec: Recorder, *, keep_raw: bool = False
    ) -> Observation: ...

    def drive_stream(
        self,
        ready: Ready,
        rec: Recorder,
        dispatch: Dispatch,
        *,
        blocking: bool = False,
        on_outcome: Callable[[Outcome], Observation] | None = None,
    ) -> AsyncGenerator[Observation, None]: ...

    def internal(self, exc: BaseException, rec: Recorder, call: ToolCall | None = None) -> Observation: ...

    def flush(self, rec: Recorder) -> None: ...

    async def aflush(self, rec: Recorder) -> None: ...


__all__ = ["SPOOL_MEMORY_BYTES", "astream", "final_of", "stream_ready"]

SPOOL_MEMORY_BYTES: Final = 256 * 1024
"""Raw output held in memory before the spool moves to a temporary file."""
_READ_BYTES: Final = 64 * 1024


class _Output:
    """The output so far: raw bytes in a spool, text fed to a trimming rule for provisional views."""

    def __init__(self, spec: ToolSpec) -> None:
        rule = RULES.get(spec.trim, JsonRule)
        self._view: TrimRule = rule(max_bytes=spec.max_observation_bytes)
        self.rule = rule
        self._spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY_BYTES)  # noqa: SIM115
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._pending = False
        self.size = 0
        self.chunks = 0
        self.facts: ToolResult | None = None
        self.rest: Pull | None = None
        """A side-effecting sync stream's pull: once its waiter gave up, a worker thread runs the
        rest of the stream into this output, closed when that outcome's value is read, not before."""

    def add(self, chunk: Any) -> None:
        if isinstance(chunk, ToolResult):
            self.facts = replace(chunk.checked(), data=None)
            if chunk.data is None:
                return
            chunk = chunk.data
        self.chunks += 1
        if isinstance(chunk, bytes | bytearray | memoryview):
            raw = bytes(chunk)
            self._pending = True
            text = self._decoder.decode(raw)
        else:
            self._flush_decoder()
            text = chunk if isinstance(chunk, str) else canonical_bytes(chunk).decode("utf-8") + "\n"
            raw = text.encode("utf-8", "surrogatepass")
        self._spool.write(raw)
        self.size += len(raw)
        if text:
            self._view.feed(text)

    def _flush_decoder(self) -> None:
        if self._pending:
            self._pending = False
            text = self._decoder.decode(b"", final=True)
            if text:
                self._view.feed(text)

    def snapshot(self) -> tuple[Any, bool]:
        """The trimming rule's data for the output so far, and whether it cut anything.

        The rule's state is bounded by the byte budget, so copying it costs O(max bytes).
        """
        return copy.deepcopy(self._view).finish()

    def pieces(self) -> Iterator[bytes]:
        """The whole raw output, re-read from the spool in bounded pieces."""
        self._spool.seek(0)
        while piece := self._spool.read(_READ_BYTES):
            yield piece
        if self._handed_off():
            self._spool.close()

    def value(self) -> Any:
        """The tool's result: the raw output, with the envelope facts it yielded."""
        return replace(self.facts, data=self.pieces()) if self.facts is not None else self.pieces()

    def close(self) -> None:
        if not self._handed_off():
            self._spool.close()

    def _handed_off(self) -> bool:
        return self.rest is not None and self.rest.abandoned


def _provisional(ready: Ready, output: _Output, rec: Recorder) -> Observation:
    spec = ready.compiled.spec
    data, cut = output.snapshot()
    kept = canonical_bytes(data)
    digest = sha256(kept).hexdigest()
    trimming = None
    if cut or output.rule is not JsonRule:
        trimming = Trimming(
            rule=output.rule.name,
            rule_version=output.rule.version,
            original_bytes=output.size,
            kept_bytes=len(kept),
        )
    obs = Observation(
        call_id=ready.call_id,
        tool=spec.name,
        tool_version=spec.version,
        data=data,
        complete=False,
        provisional=True,
        content_hash=digest,
        trimming=trimming,
        diagnostics={"bytes_so_far": output.size, "chunks_so_far": output.chunks},
        provenance=Provenance(
            fetched_at=time.time(), trust=spec.labels.integrity, labels=ready.compiled.output_labels
        ),
    )
    rec.add(
        "observation",
        {
            "status": "ok",
            "tool": spec.name,
            "version": spec.version,
            "provisional": True,
            "content_hash": digest,
            "bytes_so_far": output.size,
        },
    )
    return obs


def _idle_timeout(spec: ToolSpec, output: _Output) -> ActionError:
    details = {"timeout_s": spec.timeout_s, "chunks_received": output.chunks, "bytes_received": output.size}
    if spec.has_side_effects:
        message = f"{spec.name} sent no output for {spec.timeout_s}s; it may have committed"
        return ActionError.of("unknown_commit", message, details=details)
    return ActionError.of("transient", f"{spec.name} sent no output for {spec.timeout_s}s", details=details)


async def _chunks(
    spec: ToolSpec, kwargs: Any, executor: Executor, output: _Output
) -> AsyncGenerator[Any, None]:
    """The tool's chunks; each wait for the next one is bounded by ``timeout_s`` (TimeoutError). A
    blocking sync generator is stepped on the executor's threads (:meth:`Executor.apull`)."""
    assert spec.fn is not None
    produced = spec.fn(**kwargs)
    if inspect.isasyncgen(produced):
        async with contextlib.aclosing(produced):
            while True:
                try:
                    # No timer for a chunk that is ready at once: a long stream of ready chunks would
                    # otherwise pile up cancelled timers until the loop next turns.
                    chunk = await with_timeout(
                        cast(Coroutine[Any, Any, Any], anext(produced)), spec.timeout_s
                    )
                except StopAsyncIteration:
                    return
                yield chunk
        return
    pull = Pull(produced, drain=output.add if spec.has_side_effects else None, finish=output.value)
    if spec.has_side_effects:
        output.rest = pull
    try:
        while True:
            chunk = await executor.apull(spec, pull) if spec.blocking else next(produced, END)
            if chunk is END:
                return
            yield chunk  # a Stopped one last
    finally:
        pull.close()  # unless its rest runs on a worker thread


async def _run(
    ready: Ready, rec: Recorder, policy: StreamPolicy, output: _Output, executor: Executor
) -> AsyncGenerator[Observation | Outcome, None]:
    """Drive the tool once: provisional observations, then its Outcome as the last item."""
    spec = ready.compiled.spec
    every_bytes = spec.max_observation_bytes if policy.every_bytes is None else policy.every_bytes
    reported: int | None = None
    last = time.monotonic()
    try:
        async with contextlib.aclosing(_chunks(spec, ready.kwargs, executor, output)) as chunks:
            async for chunk in chunks:
                if isinstance(chunk, Stopped):  # its step may still run, and a write's rest with it
                    error = _idle_timeout(spec, output) if chunk.error is None else chunk.error
                    yield Failed(error, 1, running=chunk.running)
                    return
                output.add(chunk)
                if output.size == reported:
                    continue  # nothing new to show (an empty chunk, or only envelope facts)
                now = time.monotonic()
                if reported is None or output.size - reported >= every_bytes or now - last >= policy.every_s:
                    reported, last = output.size, now
                    yield _provisional(ready, output, rec)
    except TimeoutError:
        yield Failed(_idle_timeout(spec, output), 1)
        return
    except BaseException as exc:  # a BaseException of the tool's own is its failure, as for any tool
        if passes_on(exc, in_task=True):  # the process stops, its reader closed it, or a cancel
            raise
        error = executor.map_error(exc, side_effects=spec.has_side_effects)
        details = {**error.details, "chunks_received": output.chunks, "bytes_received": output.size}
        yield Failed(replace(error, details=details), 1)
        return
    yield Succeeded(output.value(), 1)


def _cancelled(ready: Ready, rec: Recorder) -> None:
    spec = ready.compiled.spec
    rec.add(
        "observation",
        {
            "status": "error",
            "tool": spec.name,
            "version": spec.version,
            "category": "cancelled",
            "message": "the stream was abandoned by its reader before it ended",
        },
    )


async def stream_ready(
    engine: Engine, ready: Ready, rec: Recorder, *, policy: StreamPolicy
) -> AsyncGenerator[Observation, None]:
    """The observations of one accepted streaming call: provisional ones, then exactly one final.

    A side-effecting call goes through the engine's ledger driver like every other write. A reader
    that stops early closes the tool's generator; the trace records the call as cancelled (a
    side-effecting one is left ``unknown`` in the ledger, noted as abandoned: the same action
    proposed again is settled at once, by its status query or as ``unknown_commit``).
    """
    spec = ready.compiled.spec

    def final(outcome: Outcome) -> Observation:
        return engine.observe(ready, outcome, rec, keep_raw=isinstance(outcome, Succeeded))

    outputs = [_Output(spec)]

    async def dispatch() -> AsyncGenerator[Observation | Outcome, None]:
        rec.add("dispatched", dispatched_event(ready, spec))
        outputs[-1].close()
        outputs.append(_Output(spec))
        async for item in _run(ready, rec, policy, outputs[-1], engine.executor):
            yield item

    try:
        if ready.key is None:
            async for item in dispatch():
                yield item if isinstance(item, Observation) else final(item)
            return
        engine.writing[ready.key] = None
        async for obs in engine.drive_stream(ready, rec, dispatch, on_outcome=final):
            yield obs
    except (GeneratorExit, asyncio.CancelledError):
        _cancelled(ready, rec)
        raise
    finally:
        if ready.key is not None:
            engine.writing.pop(ready.key, None)
        outputs[-1].close()


def _not_begun(run: RunState, call: ToolCall) -> Observation:
    error = ActionError.of(
        "cancelled", "the Runtime was closed before this call began; it was not sent", details={"sent": False}
    )
    return Observation.failure(
        error, call_id=call.id or f"{run.run_id}:n{next(run.nodes)}", tool=call.name[:200]
    )


async def final_of(observations: AsyncGenerator[Observation, None]) -> Observation:
    """The last observation of a stream (its final one), reading and discarding the rest."""
    last: Observation | None = None
    async with contextlib.aclosing(observations) as stream:
        async for obs in stream:
            last = obs
    assert last is not None
    return last


async def astream(
    engine: Engine,
    raw: Any,
    *,
    run_id: str,
    node_id: str | None,
    principal: Principal | None,
    policy: StreamPolicy,
) -> AsyncGenerator[Observation, None]:
    """:meth:`Runtime.astream`: every call in ``raw`` in turn, each as its stream of observations.

    A non-streaming tool yields its one (final) observation; a call rejected before execution
    yields its error observation. A message none of whose calls runs (a ``parse_error``: cut off,
    one call id twice) yields that error once per distinct call id the model gave, in the order
    the ids first appear, as ``call_all`` answers (a provider takes one answer per id).
    The trace is flushed after every observation, so a reader of the trace sees the progress while
    the stream runs. Once the runtime closes, a call not begun yet ends ``cancelled``, not sent; one
    waiting for its tool is cut there, its final observation ``cancelled`` (a read) or
    ``unknown_commit`` (a write) (:class:`~actionspace.pipeline.calls.InFlight`).
    Raises ValueError, before anything is recorded, for a node id no store can write
    (:func:`~actionspace.pipeline.runs.check_id`).
    """
    if node_id is not None:
        check_id("node id", node_id)
    run = engine.run(run_id, principal)
    who = principal or run.principal
    rec = Recorder(run, None)
    try:
        parsed = None if isinstance(raw, ToolCall) else parse(raw)
        if parsed is not None and parsed.error is None and len(parsed.calls) > 1:  # ids set apart
            parsed = ids_apart(parsed, f"{run.run_id}:", run.nodes)  # as call_all sets them
        calls = parse_raw(raw, rec, None, parsed)
        if isinstance(calls, Observation):  # nothing runs: each call id the model gave is answered
            for failed in once_per_id(per_call_id(raw, calls, rec)):
                yield failed
            return
        node = node_id if len(calls) == 1 else None
        for call in calls:
            if engine.runs.closed:  # closed while an earlier call ran: this one is not sent
                yield _not_begun(run, call)
                continue
            ready = await engine.aprepare(run, call, principal=who, rec=rec, node_id=node)
            if not isinstance(ready, Ready):
                run.flow.observed(ready)
                await engine.aflush(rec)
                yield ready
                continue
            spec, in_flight = ready.compiled.spec, engine.messages.in_flight
            if not is_streaming(spec):
                opened = in_flight.open()  # close() cuts it while its tool runs, waits for its events
                try:
                    obs = await in_flight.cuttable(
                        engine.aexecute(ready, rec), rec, spec, ready.call_id, ready.key
                    )
                    run.flow.observed(obs)
                    await engine.aflush(rec)
                finally:
                    in_flight.done(opened)
                yield obs
                continue
            async with contextlib.aclosing(engine.stream(ready, rec, policy)) as observations:
                begins = True
                while True:
                    opened = in_flight.open()  # each step apart: never while its reader holds it
                    try:
                        step = anext(observations)
                        try:
                            obs = await in_flight.cuttable(
                                step, rec, spec, ready.call_id, ready.key, begins=begins
                            )
                        except StopAsyncIteration:
                            break
                        if obs.provisional:  # shown to the model too: joins its context at once
                            run.flow.glimpsed(obs)
                        else:
                            run.flow.observed(obs)
                        await engine.aflush(rec)
                    finally:
                        in_flight.done(opened)
                    yield obs
                    if begins and obs.error is not None and obs.error.details.get("sent") is False:
                        break  # closed before it began: never sent
                    begins = False
    except Exception as exc:
        yield engine.internal(exc, rec)
    finally:
        engine.flush(rec)
