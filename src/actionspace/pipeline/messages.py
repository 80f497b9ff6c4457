"""A model message through the engine: its calls parsed, each run through the stages and
executed, every event of the message stored once at the end.

:class:`Messages` is the front of :class:`~actionspace.pipeline.engine.Engine` (``engine.calls``,
``engine.acalls``, ``engine.aquick`` are its methods): a simple call of an open run takes the
precompiled path (:mod:`actionspace.pipeline.fast`), anything else the stages. From async code,
the calls of a message of several run together where their read/write sets commute and no
decision can differ (:mod:`actionspace.pipeline.together`); from sync code too when every tool
the message names runs off the calling thread anyway (async tools on the executor's portal loop,
blocking ones on its worker threads), else one after the other.
A failure of ours is an ``internal`` observation, never raised at the model; a cancellation
stores what was recorded before it propagates. Once the runtime closes (``Executor.closed``), a
call of the message not begun yet is not sent: it ends ``cancelled``, ``details["sent"]`` False;
one waiting for its tool is cut there (:class:`~actionspace.pipeline.calls.InFlight`) and ends
``cancelled`` (a read) or ``unknown_commit`` (a write), its events stored before the stores close.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Coroutine, Mapping, Sequence
from threading import get_ident
from typing import TYPE_CHECKING, Any

from actionspace.discovery.runs import RunState
from actionspace.errors import ActionError
from actionspace.execution.executor import NOT_BEGUN
from actionspace.execution.ready import Ready
from actionspace.parse import ParseResult, ids_apart, parse
from actionspace.pipeline._awrite import awrite
from actionspace.pipeline._direct import KeepsCalls, begun, direct_caller, keeps
from actionspace.pipeline._run import AppendCall
from actionspace.pipeline._unsaved import stored, trace_only, unsaved
from actionspace.pipeline._write import write_call
from actionspace.pipeline.calls import (
    Cut,
    InFlight,
    ended_by_cut,
    parse_raw,
    per_call_id,
    well_identified,
)
from actionspace.pipeline.fast import FastCall
from actionspace.pipeline.observe import fail
from actionspace.pipeline.runs import check_id
from actionspace.pipeline.stages import CallInput, check_occurrence
from actionspace.pipeline.together import run_together
from actionspace.policy.principal import Principal
from actionspace.trace.recorder import Recorder
from actionspace.types import Observation, ToolCall

if TYPE_CHECKING:
    from actionspace.pipeline.engine import Engine


__all__ = ["Messages"]


class Messages:
    """Whole messages through one engine (see the module docstring)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.in_flight = engine.fast.in_flight = InFlight(engine.executor)
        """The calls waiting for their tools now, which ``Runtime.close()`` cuts (pipeline/calls.py)."""
        self._sink: object = None
        self._append: AppendCall | None = None
        """The memory trace store's ``append_call`` behind ``engine.sink`` (read when it changes)."""
        self.store: KeepsCalls | None = None
        """That store, when it takes a call's record as it keeps it (pipeline/_direct.py)."""
        self.direct = direct_caller(self)
        """:meth:`quick` with its commonest case in one frame of its own (pipeline/_direct.py)."""
        self.writes = True
        """False: a plain new write runs the general path too, not the frame of pipeline/_write.py
        (sync) or pipeline/_awrite.py (awaited), for comparisons and the equivalence tests."""
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
        parsed: ParseResult | None = None,
        occurrence: int = 0,  # identical calls before raw's one call in its message (Runtime.acall)
    ) -> list[Observation]:
        """Every call in ``raw``, in order, one observation each (sync: the calling thread waits).

        The calls of a message of several run together, as :meth:`acalls` runs them, on the
        executor's portal loop when every tool they name runs off the calling thread anyway
        (see :meth:`_off_the_caller`); else one after the other in the calling thread.

        ``dry_run``: each call passes the stages up to the gates, then its tool's preview runs
        instead of the tool (:mod:`actionspace.pipeline.contract`); nothing reaches the ledger.
        ``fresh``: reads are not served from the read cache. ``parsed``: ``parse(raw)``, when the
        caller has it already (a session read the message first).
        """
        from actionspace.pipeline.engine import run_sync  # the engine imports this module

        # close() waits for it (bounded) before the stores close (InFlight.enter); a thread counted
        # already (under Runtime.call's own ``with in_flight``) is not counted again: close() reads
        # only whether a thread has a call running, and the outer count holds until after this one
        in_flight = self.in_flight
        counted = get_ident() in in_flight.sync
        if not counted:
            in_flight.enter()
        try:
            if (
                type(raw) is ToolCall
                and self.writes
                and not (provenance or sources or dry_run or fresh or occurrence)
                and parsed is None
            ):
                wrote = write_call(self, raw, run_id, node_id, principal)  # pipeline/_write.py
                if wrote is not None:
                    return [wrote]
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
                    parsed=parsed,
                    occurrence=occurrence,
                )
            )
        finally:
            if not counted:
                in_flight.leave()

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
        parsed: ParseResult | None = None,
        occurrence: int = 0,
    ) -> Coroutine[Any, Any, list[Observation]]:
        """Async :meth:`calls` (await it): async tools are awaited, blocking ones run on worker
        threads, and the calls of a message of several run together (pipeline/together.py)."""
        if (
            type(raw) is ToolCall
            and self.writes
            and not (provenance or sources or dry_run or fresh or occurrence)
            and parsed is None
        ):
            return awrite(self, raw, run_id, node_id, principal)  # pipeline/_awrite.py
        return self._calls(
            raw,
            run_id,
            node_id,
            principal,
            provenance,
            sources,
            blocking=False,
            dry_run=dry_run,
            fresh=fresh,
            parsed=parsed,
            occurrence=occurrence,
        )

    async def aquick(
        self, raw: Any, run_id: str, node_id: str | None, principal: Principal | None
    ) -> Observation | None:
        """One simple call of an open run on the precompiled path (pipeline/fast.py), or None
        when it is not one (the caller then runs :meth:`acalls`): the same observation and the
        same events the stages would give, without their cost (:meth:`quick`, awaited)."""
        got = self.direct(raw, run_id, node_id, principal)
        return got if got is None or isinstance(got, Observation) else await got

    def quick(
        self,
        raw: Any,
        run_id: str,
        node_id: str | None,
        principal: Principal | None,
        refreshed: RunState | None = None,
    ) -> Observation | Coroutine[Any, Any, Observation | None] | None:
        """:meth:`aquick` without a coroutine of its own: the observation when the call ended
        without waiting, else the coroutine to await for it (a tool that waits, a run-state store
        to read first), or None when it is not a simple call. ``refreshed``: the run, its stored
        state read already."""
        engine = self.engine
        runs = engine.runs
        run = refreshed or runs.live.get(run_id)  # runs.known(run_id, refresh=False), without its call
        if run is None or (node_id is not None and (not node_id.isascii() or "\x00" in node_id)):
            return None  # the run is opened, and a node id checked, by acalls
        if runs.in_memory:
            sink = engine.sink
            if sink is not self._sink:  # a store keeping compact records takes them from FastPath.run
                store = getattr(sink, "__self__", None)
                self._sink, self._append, self.store = sink, getattr(store, "append_call", None), keeps(store)
            direct = self._append
        elif refreshed is None:
            return self._refreshed(raw, run, node_id, principal)
        else:
            direct = None
        if type(raw) is not str and not well_identified(raw):
            return None  # a parse_error, given by acalls
        fast = engine.fast
        quick = fast.take(raw, run, principal or run.principal, engine._ordered)
        if quick is None:
            return None
        return begun(self, quick, run, node_id, direct)

    async def _refreshed(
        self, raw: Any, run: RunState, node_id: str | None, principal: Principal | None
    ) -> Observation | None:
        """:meth:`quick` of a run whose state other processes may have saved: read first, off the
        event loop."""
        await self.engine.runs.arefresh(run)
        got = self.quick(raw, run.run_id, node_id, principal, run)
        return got if got is None or isinstance(got, Observation) else await got

    async def _ended(
        self, step: Coroutine[Any, Any, Observation], quick: FastCall, rec: Recorder, run: RunState
    ) -> Observation:
        """A precompiled call whose tool waited, to its end (see :meth:`quick`)."""
        engine = self.engine
        try:
            obs = await step
        except Exception as exc:  # a bug of ours or of the tool's wrapper: typed, never raised
            obs = engine.internal(exc, rec, quick.tool_call())
            run.flow.observed(obs)
        except BaseException:  # cancelled: what was recorded is still stored
            cut = self._cut(rec, quick, raised=True)
            if cut is None:
                with contextlib.suppress(Exception):
                    engine.flush(rec)
                raise
            return await self._stored(rec, run, cut)
        got = self._settled(obs, quick, rec, run)
        return got if isinstance(got, Observation) else await got

    def _settled(
        self, obs: Observation, quick: FastCall, rec: Recorder, run: RunState
    ) -> Observation | Coroutine[Any, Any, Observation]:
        """A precompiled call's observation once its records are stored, or the coroutine that
        stores them (off the event loop, or once ``close()`` that cut it is told)."""
        if self.in_flight.calls:  # its tool waited: close() may have cut it
            cut = self._cut(rec, quick, raised=False)
            if cut is not None:
                return self._stored(rec, run, cut)
        runs = self.engine.runs
        if runs.flush_blocks(rec):
            return self._flushed_one(rec, run, obs)
        try:
            runs.flush(rec, self.engine.sink)
        except Exception as exc:
            return self._unsaved(run, [obs], exc, rec)[0]
        return obs

    async def _flushed_one(self, rec: Recorder, run: RunState, obs: Observation) -> Observation:
        return (await self._flushed(rec, run, [obs], inline=False))[0]

    def _cut(self, rec: Recorder, quick: FastCall, *, raised: bool) -> tuple[Observation, Cut] | None:
        """The observation of a precompiled call that ``close()`` cut while its tool waited (None:
        not cut, or its caller cancelled it too), and the cut to tell once it is stored."""
        cut = self.in_flight.settled(rec, raised)
        if cut is None:
            return None
        spec = quick.entry.spec
        obs = ended_by_cut(rec, spec, rec.call_id or quick.call_id, None)
        quick.entry.run.flow.observed(obs)
        return obs, cut

    async def _stored(self, rec: Recorder, run: RunState, cut: tuple[Observation, Cut]) -> Observation:
        """A call ``close()`` cut, once what it recorded is stored; then ``close()`` is told."""
        obs, ended = cut
        try:
            return (await self._flushed(rec, run, [obs], inline=not self.engine.flush_blocks(rec)))[0]
        finally:
            ended.ended.set()

    async def _quick(
        self, quick: FastCall, run: RunState, rec: Recorder, node_id: str | None, *, blocking: bool
    ) -> tuple[Observation, Cut | None]:
        """A message's one precompiled call, and the cut to tell once its events are stored (when
        ``close()`` cut it while its tool waited)."""
        engine = self.engine
        try:
            obs = await engine.fast.run(
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
        except BaseException:
            cut = self._cut(rec, quick, raised=True)
            if cut is None:
                raise
            return cut
        if self.in_flight.calls:
            cut = self._cut(rec, quick, raised=False)
            if cut is not None:
                return cut
        return obs, None

    async def _flushed(
        self, rec: Recorder, run: RunState, out: list[Observation], *, inline: bool
    ) -> list[Observation]:
        """``out`` once the call's events and the run's state are stored; if the state could not
        be saved, what pipeline/_unsaved.py tells instead (a result it would have labelled withheld)."""
        if not inline:  # the save and what its failure stores on one thread: a cancel leaves both going
            return await asyncio.to_thread(stored, self.engine, run, out, rec)
        try:
            self.engine.flush(rec)
        except Exception as exc:
            return self._unsaved(run, out, exc, rec)
        return out

    def _unsaved(
        self, run: RunState, out: list[Observation], exc: Exception, rec: Recorder | None = None
    ) -> list[Observation]:
        """A ``transient`` observation per call of ``out``: the run's state could not be saved. The
        calls' events ``rec`` holds still go to the trace (pipeline/_unsaved.py)."""
        return unsaved(self.engine, run, out, exc, rec)

    def trace_only(self, rec: Recorder) -> None:
        """Hand ``rec``'s records to the trace store without saving the run's state first: a save
        of it just failed (pipeline/_unsaved.py)."""
        trace_only(self.engine, rec)

    def _off_the_caller(self, calls: Sequence[ToolCall], run: RunState) -> bool:
        """Whether every tool ``calls`` may name runs off the calling thread from sync code too:
        async tools run on the executor's portal loop, blocking ones on its worker threads. Then
        the calls of a sync message run together on the portal loop, each tool where it would
        run one call after the other. A tool that runs in the calling thread (sync, not blocking)
        or streams keeps the message one call after the other, as does a caller on the portal
        thread itself."""
        if self.engine.executor.on_portal():
            return False
        catalog = self.engine.catalog
        for call in calls:
            name = call.name
            if type(name) is not str:
                continue
            hit = run.resolved.get(name)
            fresh = hit is not None and hit[0] == catalog.generation
            specs = [hit[1]] if fresh and hit is not None else catalog.versions(name.partition("@")[0])
            for spec in specs:
                if spec.streams or not (spec.is_async or spec.blocking):
                    return False
        return True

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
        parsed: ParseResult | None = None,
        occurrence: int = 0,
    ) -> list[Observation]:
        engine = self.engine
        if node_id is not None:
            check_id("node id", node_id)
        if occurrence or type(occurrence) is not int:  # 0, the default, is checked without a call
            check_occurrence(occurrence)
        known = None if blocking or engine.runs.in_memory else engine.runs.known(run_id, refresh=False)
        if known is not None:
            await engine.runs.arefresh(known)  # off the event loop when the store is remote
        run = known or engine.run(run_id, principal)
        who = principal or run.principal
        rec = Recorder(run, None)
        out: list[Observation] = []
        in_flight = self.in_flight
        opened = cut = None  # close() waits for what a message it cut recorded to be stored
        try:
            general = provenance or sources or dry_run or fresh or not well_identified(raw)
            if parsed is None and (type(raw) is dict or type(raw) is list) and not general:
                parsed = parse(raw)  # read once, for the precompiled path and the stages alike
            quick = None if general else engine.fast.take(raw, run, who, engine.ordered, parsed)
            if quick is not None:  # proven to end as the stages would: see pipeline/fast.py
                obs, cut = await self._quick(quick, run, rec, node_id, blocking=blocking)
                out.append(obs)
            elif not blocking:
                opened = in_flight.open()  # its calls may be cut: close() waits for its events
            if quick is None:
                parsed = _apart(raw, run, parsed)
            calls = [] if quick is not None else parse_raw(raw, rec, engine.artifacts, parsed)
            if isinstance(calls, Observation):  # nothing runs: each call id the model gave is answered
                out.extend(per_call_id(raw, calls, rec, parsed))
                calls = []
            node = node_id if len(calls) == 1 else None
            earlier = occurrence if len(calls) == 1 else 0  # the caller counted the message's calls
            given = functools.partial(
                CallInput,
                run=run,
                principal=who,
                provenance=provenance,
                sources=sources,
                occurrence=earlier + 1,
                message=None if earlier else {},  # the identical calls of this message, counted
                fresh=fresh,
            )
            if len(calls) > 1 and self.together and not dry_run:
                if not blocking:
                    out.extend(await run_together(engine, calls, run, rec, given))
                    calls = []
                elif self._off_the_caller(calls, run):  # on the loop its async tools run on
                    out.extend(engine.executor.block_on(run_together(engine, calls, run, rec, given)))
                    calls = []
            executor = engine.executor
            for call in calls:
                inp = given(call=call, rec=rec, node_id=node)
                try:
                    if executor.closed:  # the runtime closed while an earlier call ran: this one is not sent
                        obs = _not_begun(rec, call, run)
                    elif dry_run:
                        obs = await engine.dry_run(inp, blocking)
                    else:
                        ready = engine.prepare_input(inp) if blocking else await engine.aprepare_input(inp)
                        if not isinstance(ready, Ready):
                            obs = ready
                        elif executor.closed:  # closed while it was prepared
                            obs = _not_begun(rec, call, run, ready.call_id)
                        elif blocking:
                            obs = await engine.run_ready(ready, rec, True)
                        else:
                            spec, key = ready.compiled.spec, ready.key
                            obs = await in_flight.cuttable(
                                engine.run_ready(ready, rec, False), rec, spec, ready.call_id, key
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
            in_flight.done(opened)
            if cut is not None:
                cut.ended.set()
            raise
        try:  # store I/O in this thread, or on a worker thread
            return await self._flushed(rec, run, out, inline=blocking or not engine.flush_blocks(rec))
        finally:
            in_flight.done(opened)
            if cut is not None:
                cut.ended.set()


def _apart(raw: Any, run: RunState, parsed: ParseResult | None) -> ParseResult | None:
    """``parse(raw)`` (``parsed`` when given), each call without an id given one that no call of the
    message holds (:func:`~actionspace.parse.ids_apart`): an id the model wrote may be one the run
    would mint (``<run>:n<k>``), and one result answered under it twice reaches the model as the
    other call's. A single call, or a ``ToolCall``, cannot collide: it is left as it is."""
    if parsed is None:
        if isinstance(raw, ToolCall):
            return None
        parsed = parse(raw)
    if parsed.error is not None or len(parsed.calls) < 2:
        return parsed
    return ids_apart(parsed, f"{run.run_id}:", run.nodes)


def _not_begun(rec: Recorder, call: ToolCall, run: RunState, call_id: str | None = None) -> Observation:
    """A call of a message that the runtime closed before it began: ``cancelled``, not sent."""
    error = ActionError.of("cancelled", NOT_BEGUN, details={"sent": False})
    tool = call.name[:200] if isinstance(call.name, str) else ""
    return fail(rec, error, call_id or call.id or f"{run.run_id}:n{next(run.nodes)}", tool)
