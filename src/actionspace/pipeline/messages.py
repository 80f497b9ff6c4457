"""A model message through the engine: its calls parsed, each run through the stages and
executed, every event of the message stored once at the end.

:class:`Messages` is the front of :class:`~actionspace.pipeline.engine.Engine` (``engine.calls``,
``engine.acalls``, ``engine.aquick`` are its methods): a simple call of an open run takes the
precompiled path (:mod:`actionspace.pipeline.fast`), anything else the stages. From async code,
the calls of a message of several run together where their read/write sets commute and no
decision can differ (:meth:`Messages._together`); from sync code, one after the other. A failure
of ours is an ``internal`` observation, never raised at the model; a cancellation stores what was
recorded before it propagates.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from actionspace.discovery.runs import RunState
from actionspace.errors import ActionError
from actionspace.execution.ready import Ready
from actionspace.pipeline.calls import parse_raw
from actionspace.pipeline.observe import fail
from actionspace.pipeline.stages import CallInput
from actionspace.plan.conflicts import call_sets, conflicting
from actionspace.policy.flow import FlowState
from actionspace.policy.labels import PUBLIC_TRUSTED, Label
from actionspace.policy.principal import Principal
from actionspace.trace.recorder import Recorder
from actionspace.types import Observation, ToolCall

if TYPE_CHECKING:
    from actionspace.pipeline.engine import Engine


__all__ = ["Messages"]

_log = logging.getLogger("actionspace")


class Messages:
    """Whole messages through one engine (see the module docstring)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.together = True
        """False: the calls of a message of several run one after the other, each begun once the
        one before it was shown (for comparisons and the equivalence test)."""

    def calls(
        self,
        raw: Any,
        *,
        run_id: str,
        node_id: str | None = None,
        principal: Principal | None = None,
        provenance: Mapping[str, str] | None = None,
        sources: Mapping[str, Sequence[str]] | None = None,
        dry_run: bool = False,
        fresh: bool = False,
    ) -> list[Observation]:
        """Every call in ``raw``, in order, one observation each (sync; runs in the calling thread).

        ``dry_run``: each call passes the stages up to the gates, then its tool's preview runs
        instead of the tool (:mod:`actionspace.pipeline.contract`); nothing reaches the ledger.
        ``fresh``: reads are not served from the read cache.
        """
        from actionspace.pipeline.engine import run_sync  # the engine imports this module

        return run_sync(
            self._calls(
                raw,
                run_id,
                node_id,
                principal,
                provenance,
                sources,
                blocking=True,
                dry_run=dry_run,
                fresh=fresh,
            )
        )

    def acalls(
        self,
        raw: Any,
        *,
        run_id: str,
        node_id: str | None = None,
        principal: Principal | None = None,
        provenance: Mapping[str, str] | None = None,
        sources: Mapping[str, Sequence[str]] | None = None,
        dry_run: bool = False,
        fresh: bool = False,
    ) -> Coroutine[Any, Any, list[Observation]]:
        """Async :meth:`calls` (await it): async tools are awaited, blocking ones run on worker
        threads, and the calls of a message of several run together (:meth:`_together`)."""
        return self._calls(
            raw, run_id, node_id, principal, provenance, sources, blocking=False, dry_run=dry_run, fresh=fresh
        )

    async def aquick(
        self, raw: Any, run_id: str, node_id: str | None, principal: Principal | None
    ) -> Observation | None:
        """One simple call of an open run on the precompiled path (pipeline/fast.py), or None
        when it is not one (the caller then runs :meth:`acalls`): the same observation and the
        same events the stages would give, without their cost."""
        engine = self.engine
        run = engine.runs.known(run_id)
        if run is None:
            return None
        quick = engine.fast.take(raw, run, principal or run.principal, engine.ordered)
        if quick is None:
            return None
        rec = Recorder(run, None)
        try:
            obs = await engine.fast.run(
                quick,
                rec,
                node_id,
                blocking=False,
                executor=engine.executor,
                artifacts=engine.artifacts,
            )
        except Exception as exc:  # a bug of ours or of the tool's wrapper: typed, never raised
            obs = engine.internal(exc, rec, quick.tool_call())
            run.flow.observed(obs)
        except BaseException:  # cancelled: what was recorded is still stored
            with contextlib.suppress(Exception):
                engine.flush(rec)
            raise
        if engine.flush_blocks(rec):
            return (await self._flushed(rec, run, [obs], inline=False))[0]
        try:
            engine.flush(rec)
        except Exception as exc:
            return self._unsaved(run, [obs], exc)[0]
        return obs

    async def _quick(
        self, quick: Any, run: RunState, rec: Recorder, node_id: str | None, *, blocking: bool
    ) -> Observation:
        engine = self.engine
        try:
            return await engine.fast.run(
                quick,
                rec,
                node_id,
                blocking=blocking,
                executor=engine.executor,
                artifacts=engine.artifacts,
            )
        except Exception as exc:  # a bug of ours or of the tool's wrapper: typed, never raised
            obs = engine.internal(exc, rec, quick.tool_call())
            run.flow.observed(obs)
            return obs

    async def _flushed(
        self, rec: Recorder, run: RunState, out: list[Observation], *, inline: bool
    ) -> list[Observation]:
        """``out`` once the call's events and the run's state are stored; if the state could not
        be saved, a ``transient`` observation per call instead (nothing it would have labelled)."""
        engine = self.engine
        try:
            if inline:
                engine.flush(rec)
            else:
                await asyncio.to_thread(engine.flush, rec)
        except Exception as exc:
            return self._unsaved(run, out, exc)
        return out

    def _unsaved(self, run: RunState, out: list[Observation], exc: Exception) -> list[Observation]:
        """A ``transient`` observation per call of ``out``: the run's state could not be saved."""
        _log.error("actionspace: saving the state of run %s failed", run.run_id, exc_info=exc)
        error = ActionError.of(
            "transient",
            f"the state of run {run.run_id} could not be saved ({type(exc).__name__}); ask again",
        )
        return [fail(Recorder(run, o.call_id), error, o.call_id, o.tool, o.tool_version) for o in out]

    async def _calls(
        self,
        raw: Any,
        run_id: str,
        node_id: str | None,
        principal: Principal | None,
        provenance: Mapping[str, str] | None,
        sources: Mapping[str, Sequence[str]] | None,
        *,
        blocking: bool,
        dry_run: bool = False,
        fresh: bool = False,
    ) -> list[Observation]:
        engine = self.engine
        run = engine.run(run_id, principal)
        who = principal or run.principal
        rec = Recorder(run, None)
        out: list[Observation] = []
        try:
            general = provenance or sources or dry_run or fresh
            quick = None if general else engine.fast.take(raw, run, who, engine.ordered)
            if quick is not None:  # proven to end as the stages would: see pipeline/fast.py
                out.append(await self._quick(quick, run, rec, node_id, blocking=blocking))
            calls = [] if quick is not None else parse_raw(raw, rec, engine.artifacts)
            if isinstance(calls, Observation):
                out.append(calls)
                calls = []
            node = node_id if len(calls) == 1 else None
            given = functools.partial(
                CallInput,
                run=run,
                principal=who,
                provenance=provenance,
                sources=sources,
                message={},  # the identical calls of this message, counted
                fresh=fresh,
            )
            if len(calls) > 1 and self.together and not (blocking or dry_run):
                out.extend(await self._together(calls, run, rec, given))
                calls = []
            for call in calls:
                inp = given(call=call, rec=rec, node_id=node)
                try:
                    if dry_run:
                        obs = await engine.dry_run(inp, blocking)
                    else:
                        ready = engine.prepare_input(inp) if blocking else await engine.aprepare_input(inp)
                        obs = (
                            await engine.run_ready(ready, rec, blocking)
                            if isinstance(ready, Ready)
                            else ready
                        )
                except Exception as exc:  # a bug of ours or of a validator: typed, never raised at the model
                    obs = engine.internal(exc, rec, call)
                run.flow.observed(obs)
                out.append(obs)
        except Exception as exc:
            out.append(engine.internal(exc, rec))
        except BaseException:  # cancelled: what was recorded is still stored
            with contextlib.suppress(Exception):
                engine.flush(rec)
            raise
        # store I/O in this thread, or on a worker thread
        return await self._flushed(rec, run, out, inline=blocking or not engine.flush_blocks(rec))

    async def _together(
        self,
        calls: Sequence[ToolCall],
        run: RunState,
        rec: Recorder,
        given: Callable[..., CallInput],
    ) -> list[Observation]:
        """The observations of a message's several calls, in order, each call's tool begun
        without waiting for the calls before it to end where that changes no decision.

        The calls are prepared one after the other, in the message's order. A call is prepared
        while calls before it still run only when the stages decide it as they would once those
        calls were shown (``FastPath.prepares_alike``: no budget, read cache, user stage,
        provenance or approval applies, and no label those calls add changes its flow decision
        or its output label). Any other call first waits for every call before it to end and be
        shown, as a message's calls did one at a time. A call prepared runs in a task of its own
        once every call before it whose read/write sets it does not commute with has ended
        (DESIGN §7). The observations are shown to the run's flow state in the message's order,
        and each call's events, recorded apart, join the message's in event order. ``given``
        makes a call's input (:class:`CallInput` with the message's own fields).
        """
        engine = self.engine
        flow = run.flow
        loop = asyncio.get_running_loop()
        begun: list[_Begun] = []
        """Calls prepared and not shown yet, in the message's order."""
        out: list[Observation] = []
        unshown: Label | None = PUBLIC_TRUSTED
        """The join of the output labels of the calls of ``begun`` (None: one is not known)."""
        writing = False
        """A call of ``begun`` writes."""
        try:
            for call in calls:
                own = Recorder(run, None)
                inp = given(call=call, rec=own, node_id=None)
                if begun and not self._alike(inp, unshown):
                    await _show(begun, out, rec, flow)  # as one call after the other
                    unshown, writing = PUBLIC_TRUSTED, False
                ready: Ready | Observation
                try:
                    ready = await engine.aprepare_input(inp)
                except Exception as exc:  # a bug of ours or of a validator: typed, never raised
                    ready = engine.internal(exc, own, call)
                if isinstance(ready, Observation):  # refused before running: shown in its turn
                    label = None if ready.items or ready.artifact_ref else flow.label_for(ready)
                    begun.append(_Begun(None, own, (), (), ready))
                else:
                    label = ready.label
                    reads, writes = call_sets(ready.compiled.spec, ready.arguments)
                    after = (
                        [
                            b.task
                            for b in begun
                            if b.task is not None
                            and conflicting(b.reads, b.writes, reads, writes) is not None
                        ]
                        if writes or writing
                        else []
                    )
                    writing = writing or bool(writes)
                    task = loop.create_task(self._one(ready, own, call, after))
                    begun.append(_Begun(task, own, reads, writes, None))
                unshown = None if label is None or unshown is None else unshown.join(label)
            await _show(begun, out, rec, flow)
        except BaseException:  # cancelled: the calls begun stop too, and what they recorded is kept
            tasks = [b.task for b in begun if b.task is not None]
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)
            for b in begun:
                _merge(rec, b.rec)
            rec.records.sort(key=_seq)
            raise
        rec.records.sort(key=_seq)
        return out

    def _alike(self, inp: CallInput, unshown: Label | None) -> bool:
        """``FastPath.prepares_alike``; False when it cannot tell (the call then waits)."""
        engine = self.engine
        try:
            return engine.fast.prepares_alike(inp, engine.ordered, unshown)
        except Exception:  # a bug of ours: waiting is the safe answer, and the stages type the call
            _log.exception("actionspace: deciding whether a call of a message may begin at once failed")
            return False

    async def _one(
        self, ready: Ready, rec: Recorder, call: ToolCall, after: list[asyncio.Task[Observation]]
    ) -> Observation:
        """A prepared call of a message, once the calls it must follow have ended."""
        if after:
            await asyncio.wait(after)
        try:
            return await self.engine.run_ready(ready, rec, False)
        except Exception as exc:  # a bug of ours or of the tool's wrapper: typed, never raised
            return self.engine.internal(exc, rec, call)


@dataclass(slots=True)
class _Begun:
    """One call of a message of several, prepared and not shown to the flow state yet."""

    task: asyncio.Task[Observation] | None
    rec: Recorder
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    done: Observation | None
    """Its observation when it ended before running (refused by a stage, or a bug of ours)."""


async def _show(begun: list[_Begun], out: list[Observation], rec: Recorder, flow: FlowState) -> None:
    """Wait for every call of ``begun``, in order; show each observation to the flow state, put
    it in ``out`` and its events with the message's."""
    while begun:
        b = begun[0]
        obs = await b.task if b.task is not None else b.done
        assert obs is not None  # a call not begun ended before running
        del begun[0]
        flow.observed(obs)
        out.append(obs)
        _merge(rec, b.rec)


def _merge(rec: Recorder, own: Recorder) -> None:
    """``own``'s events after ``rec``'s (the caller puts them in event order once, at the end)."""
    own.expand()
    if own.records:
        rec.records.extend(own.records)
        own.records = []


def _seq(record: Any) -> int:
    return int(record[0])
