"""The one driver of the ledger's commit protocol (DESIGN §6): every side-effecting call goes here.

Single calls, batch units, streams and plans' atomic groups all drive their protocol generator
(:func:`actionspace.ledger.commit.protocol`) through :class:`LedgerDriver`: it sleeps when told,
dispatches when told, and runs every ledger step — the store I/O — inline on the sync path or in
memory, and on a worker thread on the async path over a database store. A new call whose steps run
inline takes the protocol's common course — intent, send, commit — in :meth:`LedgerDriver.drive_call`
itself, with the protocol's own functions; any other course goes on through the protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from actionspace._crash import point
from actionspace.errors import Abandoned, ActionError
from actionspace.execution._sends import SENDING, SendGate
from actionspace.execution.executor import NOT_BEGUN, Executor, running_attempt
from actionspace.execution.ready import Ready
from actionspace.ledger.commit import (
    AwaitAttempt,
    LeftRunning,
    Protocol,
    Settle,
    Sleep,
    args_digest,
    first_send,
    intent,
    new_entry,
    proceed,
    protocol,
    settled_at_once,
    settling,
)
from actionspace.ledger.commit import Dispatch as Send
from actionspace.ledger.entries import BeginsUnlessPending, LedgerEntry, LedgerStore
from actionspace.ledger.recover import running_here
from actionspace.outcomes import Failed, Outcome
from actionspace.pipeline._commit_parts import CallRecord, Exempt, late, lost
from actionspace.pipeline.observe import fail, observation_event
from actionspace.trace.recorder import Recorder
from actionspace.types import Observation

__all__ = ["Dispatch", "LedgerDriver"]

T = TypeVar("T")

Dispatch = Callable[[], AsyncIterator[Observation | Outcome]]
"""Sends the tool once: yields provisional observations (streams), then the Outcome last."""


_Taken = tuple[SendGate, "Outcome | None", Callable[[], None], bool]
"""What :meth:`LedgerDriver._drive` takes over from the direct frame (see there)."""


@dataclass(frozen=True, slots=True)
class _Done:
    value: Observation


class LedgerDriver:
    """Drives commit protocols over one ledger store."""

    def __init__(self, ledger: LedgerStore, *, offload: bool) -> None:
        self.ledger = ledger
        self._offload = offload
        self._checks_pending = isinstance(ledger, BeginsUnlessPending)
        self.direct = True
        """A new action whose steps run inline (the sync path, or a store in memory) goes from its
        intent to its commit in :meth:`drive_call`'s own frame, without the protocol's generator
        and its driver (their stepping was some 8 µs of a call's interpreter work); anything else
        (a replay, a failure, a cut) goes on through the protocol from where it stands. False:
        every call is driven through the protocol from its start (the tests compare both)."""
        self.settle: Callable[[str], object] | None = None
        """Settles one entry whose holder is gone, as recovery does (the runtime's ledger
        administration); None: such an entry is waited on until the protocol answers ``transient``."""
        self.executor: Executor | None = None
        """The runtime's executor: once it is :attr:`~Executor.closed`, a call ends ``cancelled``
        before its intent is recorded (nothing sent). None: never refused so."""
        self.sending: dict[int, str] = {}
        """The keys of the calls about to send or sending, by their protocol (``id``), from just
        before their first send until the call ends, each with its gate in :attr:`gates`:
        ``Runtime.close()`` notes ``unknown`` only those whose gate it cannot withdraw (their send
        began); one it withdraws is never sent and ends ``failed`` (``cancelled``, not sent)."""
        self.gates: dict[int, SendGate] = {}
        """The :class:`~actionspace.execution._sends.SendGate` of each call in :attr:`sending`."""
        self.flush: Callable[[Recorder], None] | None = None
        """Hands a recorder's events to the trace store (the engine's ``flush``): what the ledger
        records of a call after the call ended (its late answer's settlement) is stored with it.
        None: such events are added to the call's recorder, which was flushed already."""

    async def drive_call(
        self,
        ready: Ready,
        rec: Recorder,
        dispatch: Dispatch,
        observe_outcome: Callable[[Outcome], Observation],
        *,
        blocking: bool = False,
    ) -> AsyncGenerator[Observation, None]:
        """The one driver of the ledger commit protocol (DESIGN §6) for a side-effecting call.

        Yields what ``dispatch`` yields while the tool runs (provisional observations of a
        stream), then the final observation. Before anything is written, an identical action of
        the run (same tool, same arguments) whose outcome is not established — ``dispatched``,
        ``unknown`` or ``unknown_commit`` under another node — answers ``unknown_commit`` naming
        its key: such a proposal is never sent.
        """
        assert ready.key is not None
        spec = ready.compiled.spec
        executor = self.executor
        if executor is not None and executor.closed:  # closed before it began: nothing recorded as sent
            error = ActionError.of("cancelled", NOT_BEGUN, details={"sent": False})
            yield fail(rec, error, ready.call_id, spec.name, spec.version)
            return
        digest = args_digest(ready.arguments)
        still_pending: Callable[[LedgerEntry], Observation] | None = None
        if self._checks_pending:  # in the insert's own transaction

            def still_pending(found: LedgerEntry) -> Observation:
                return self._still_pending(ready, rec, found)

        else:
            pending = await self._io(blocking, self._pending, ready, rec.run_id, digest)
            if pending is not None:
                yield self._still_pending(ready, rec, pending)
                return

        def failed(error: ActionError) -> Observation:
            return fail(rec, error, ready.call_id, spec.name, spec.version)

        exempt = None if ready.exempt is None else Exempt(ready.exempt)
        record = rec.add if self.flush is None else CallRecord(rec, self.flush)
        queued = bool(spec.blocking) and not spec.is_async and not spec.streams  # a worker begins it
        if self.direct and exempt is None and not spec.streams and (blocking or not self._offload):
            # The direct frame: a new action, its steps inline, goes from its intent to its commit
            # here, as the protocol would; anything else goes on through the protocol from there.
            gate = SendGate(self._closed)
            held = running_here(ready.key)  # recovery in this process leaves the key alone
            try:
                point("before_intent")
                sent_entry = self._entry(ready, rec.run_id, digest, dispatched=True)
                begun = intent(self.ledger, sent_entry, still_pending, failed)
                rest: AsyncGenerator[Observation, None] | None = None
                if isinstance(begun, Observation):
                    final: Observation | None = begun
                elif not begun.created:
                    steps = proceed(
                        spec,
                        self.ledger,
                        begun,
                        sent_entry,
                        observe=observe_outcome,
                        fail=failed,
                        record=record,
                    )
                    final = None
                    rest = self._drive(
                        steps, dispatch, blocking, ready.key, queued, (gate, None, held, False)
                    )
                else:
                    led = first_send(self.ledger, begun, record)
                    self.sending[id(gate)] = ready.key  # noted before the gate reads ``closed``
                    self.gates[id(gate)] = gate
                    sent = gate.opens(deferred=queued)
                    outcome: Outcome | None = None if sent else Failed(_not_begun(), 0)
                    cut_steps: Protocol | None = None
                    if sent:
                        token = SENDING.set(gate)
                        try:
                            async for item in dispatch():
                                if isinstance(item, Observation):
                                    yield _shown(item, ready, rec, record)
                                else:
                                    outcome = item
                        except Exception as exc:  # ours broke around the send: it may have landed
                            outcome = Failed(lost(exc), 1)
                        except BaseException as cut:  # a cancel, a reader gone, or the interpreter's exit
                            cut_steps = settling(spec, led, observe_outcome, failed)
                            outcome = await self._cut_send(cut, gate, cut_steps, blocking)
                            if outcome is None:
                                raise
                        finally:
                            _reset(token)
                    assert outcome is not None
                    final = settled_at_once(led, outcome, observe_outcome)
                    if final is None:
                        steps = cut_steps or settling(spec, led, observe_outcome, failed)
                        rest = self._drive(
                            steps, dispatch, blocking, ready.key, queued, (gate, outcome, held, sent)
                        )
                if rest is None:
                    assert final is not None
                    yield _shown(final, ready, rec, record)
                else:
                    async for obs in rest:
                        yield _shown(obs, ready, rec, record)
            finally:
                self.sending.pop(id(gate), None)
                self.gates.pop(id(gate), None)
                held()
                if isinstance(record, CallRecord):
                    record.ended = True
            return
        steps = protocol(
            spec=spec,
            entry=self._entry(ready, rec.run_id, digest),
            store=self.ledger,
            observe=observe_outcome,
            fail=failed,
            record=record,
            still_pending=still_pending,
            admit_send=None if exempt is None else exempt.admit,
        )
        observations = self._drive(steps, dispatch, blocking, ready.key, queued)
        if exempt is not None:
            observations = exempt.settled(observations, rec)
        try:
            async for obs in observations:
                yield _shown(obs, ready, rec, record)
        finally:
            self.sending.pop(id(steps), None)  # at once, also when its reader left mid-stream
            self.gates.pop(id(steps), None)
            if isinstance(record, CallRecord):
                record.ended = True

    def drive(
        self, steps: Protocol, dispatch: Dispatch, *, blocking: bool = False, key: str | None = None
    ) -> AsyncGenerator[Observation, None]:
        """Step a commit protocol to its end: sleep when told, dispatch when told, yield the result.

        Plans' atomic groups drive their group protocol through here too. ``key`` (a single
        write's, or a group's): its :class:`~actionspace.execution._sends.SendGate` is noted in
        :attr:`sending` before its first send, then that send is refused (``cancelled``, not sent)
        once the runtime closed (``Executor.closed``): the gate decides, so a close either
        withdraws the write before it is sent or finds it sent, never in between; also when the
        close cut the caller while a step was written (:meth:`_stepped`). A send again of an
        outcome already unknown goes as before (the close notes its entry ``unknown``). While the
        protocol runs here, recovery in this process leaves ``key`` alone (``ledger.recover``).
        """
        return self._drive(steps, dispatch, blocking, key, False)

    async def _drive(
        self,
        steps: Protocol,
        dispatch: Dispatch,
        blocking: bool,
        key: str | None,
        queued: bool,
        taken: _Taken | None = None,
    ) -> AsyncGenerator[Observation, None]:
        """:meth:`drive`; ``queued``: the dispatch hands its first attempt to the worker pool, so
        the send begins when a worker thread takes it, withdrawable until then (gap of a blocking
        tool waiting behind busy workers when the runtime closes). ``taken``: the direct frame of
        :meth:`drive_call` hands over there (its gate, the value ``steps`` takes next, its hold of
        ``key``, whether its send began), and ``steps`` goes on from that point."""
        # while it is held, recovery in this process leaves ``key`` alone (ledger/recover.py)
        held: list[Callable[[], None] | None]
        if taken is None:
            gate, value = SendGate(self._closed), None
            sent: list[bool] = []  # appended at the first send: the close may refuse none after it
            held = [None if key is None else running_here(key)]
        else:
            gate, value, hold, begun = taken
            sent, held = [True] * begun, [hold]
        try:
            command = await self._stepped(blocking, steps, value, gate)
            while not isinstance(command, _Done):
                if isinstance(command, Sleep):
                    if blocking:
                        time.sleep(command.seconds)
                    else:
                        await asyncio.sleep(command.seconds)
                    command = await self._stepped(blocking, steps, None, gate)
                    continue
                if isinstance(command, AwaitAttempt):
                    answer = await late(command, blocking)
                    command = await self._stepped(blocking, steps, answer, gate)
                    continue
                if isinstance(command, Settle):
                    if self.settle is not None:  # a gone holder's send: recovery may settle it now
                        _released(held[0])
                        await self._io(blocking, self.settle, command.key)
                        held[0] = None if key is None else running_here(key)
                    command = await self._stepped(blocking, steps, None, gate)
                    continue
                outcome: Outcome | None = None
                if not sent:
                    if key is not None:  # noted before the gate reads ``closed``: a close sees it
                        self.sending[id(steps)] = key
                        self.gates[id(steps)] = gate
                    if not gate.opens(deferred=queued):  # closed (or withdrawn by the close) first
                        command = await self._stepped(blocking, steps, Failed(_not_begun(), 0), gate)
                        continue
                sent.append(True)
                token = SENDING.set(gate)
                try:
                    async for item in dispatch():
                        if isinstance(item, Observation):
                            yield item
                        else:
                            outcome = item
                except Exception as exc:  # ours broke around the send: whether it landed is not known
                    outcome = Failed(lost(exc), 1)
                except BaseException as cut:  # a cancel, a reader gone, or the interpreter's exit
                    outcome = await self._cut_send(cut, gate, steps, blocking)
                    if outcome is None:
                        raise
                finally:
                    _reset(token)
                assert outcome is not None
                command = await self._stepped(blocking, steps, outcome, gate)
            yield command.value
        finally:
            self.sending.pop(id(steps), None)
            self.gates.pop(id(steps), None)
            _released(held[0])

    async def _cut_send(
        self, cut: BaseException, gate: SendGate, steps: Protocol, blocking: bool
    ) -> Outcome | None:
        """The outcome of a send that ``cut`` stopped under ``gate`` (the direct frame's and
        :meth:`_drive`'s); None: the caller re-raises ``cut``. After the send began (a cancel, a
        reader gone, SystemExit: it may have acted) ``steps`` is told it was abandoned (left
        unknown); a cancel that withdraws the gate ends ``steps`` withdrawn (:meth:`_withdrawn`)
        when it is the caller's own, and answers the refused send when it is the close's."""
        if not (isinstance(cut, asyncio.CancelledError) and gate.withdraw()):
            _abandon(steps, running_attempt(cut))
            return None
        if not self._closed():
            await self._withdrawn(blocking, steps)
            return None
        return Failed(_not_begun(), 0)

    async def _withdrawn(self, blocking: bool, steps: Protocol, why: str = "") -> None:
        """End ``steps`` as a send withdrawn by its caller's own cancel before a worker thread
        began it: nothing was sent, so its entry goes straight to ``failed`` (``cancelled``, not
        sent), never through ``unknown`` ("it may have been sent"). The step is written whatever
        cancels the caller again meanwhile; the caller then re-raises its cancel."""
        refused = Failed(ActionError.of("cancelled", why or _CANCELLED_UNSENT, details={"sent": False}), 0)
        if blocking or not self._offload:
            _step(steps, refused)
        else:
            await _written(_on_thread(steps, refused))

    def _closed(self) -> bool:
        return self.executor is not None and self.executor.closed

    async def _stepped(self, blocking: bool, steps: Protocol, value: Outcome | None, gate: SendGate) -> Any:
        """One step of ``steps`` (:meth:`_io`). Offloaded, a step is never left half-taken: a
        cancel that lands while its thread writes the store waits for that write. If the runtime
        closed meanwhile and the write was never sent (its ``gate`` withdrawn now, if it was not
        yet), the cancel is taken as the close's cut (the caller's
        :class:`~actionspace.pipeline.calls.InFlight` takes it back) when the protocol would send
        for the first time next (the send is refused, so the entry ends ``failed``, ``cancelled``,
        not sent, before the stores close, as it would inline) or has ended (its answer, such as
        that refusal, stands). The caller's own cancel, the runtime open, when the step just
        written is the first send (the intent: its ``gate`` still withdrawable) withdraws that
        send and ends the entry ``failed`` (``cancelled``, not sent) as :meth:`_withdrawn` does,
        then is raised: left ``dispatched``, a later proposal would read it as perhaps sent. Any
        other cancel is raised once the step is written (the entry as the step left it)."""
        if blocking or not self._offload:
            return _step(steps, value)
        step = _on_thread(steps, value)
        try:
            return await asyncio.shield(step)
        except asyncio.CancelledError:
            command = await _written(step)
            if not isinstance(command, Send | _Done):
                raise
            if not self._closed():
                if isinstance(command, Send) and gate.withdraw():  # nothing sent under it yet
                    await self._withdrawn(blocking, steps, _CANCELLED_AT_INTENT)
                raise
            if not gate.withdraw():
                raise
        if isinstance(command, _Done):  # the protocol ended (a first send refused): its answer
            return command
        return await _written(_on_thread(steps, Failed(_not_begun(), 0)))

    async def _io(self, blocking: bool, fn: Callable[..., T], *args: Any) -> T:
        """Run a step that touches the store: inline when blocking or in memory, else on a thread."""
        if blocking or not self._offload:
            return fn(*args)
        return await asyncio.to_thread(fn, *args)

    def _entry(self, ready: Ready, run_id: str, digest: str, *, dispatched: bool = False) -> LedgerEntry:
        assert ready.key is not None
        spec = ready.compiled.spec
        return new_entry(
            key=ready.key,
            run_id=run_id,
            node_id=ready.node_id,
            spec=spec,
            arguments=ready.arguments,
            digest=digest,
            dispatched=dispatched,
        )

    def _pending(self, ready: Ready, run_id: str, digest: str) -> LedgerEntry | None:
        found = self.ledger.pending_action(run_id, ready.compiled.spec.key, digest)
        return None if found is None or found.key == ready.key else found

    def _still_pending(self, ready: Ready, rec: Recorder, pending: LedgerEntry) -> Observation:
        spec = ready.compiled.spec
        error = ActionError.of(
            "unknown_commit",
            f"an identical {spec.name} of this run is {pending.state} and its outcome is not established; "
            "it is not sent again",
            resource_ids=(pending.key,),
            details={
                "idempotency_key": pending.key,
                "state": pending.state,
                "node_id": pending.node_id,
                "idempotency": spec.idempotency,
                "settle": f"actionspace ledger resolve {pending.key} --outcome committed|failed",
            },
        )
        rec.add("ledger", {"key": ready.key, "pending": pending.key, "state": pending.state, "sent": False})
        return fail(rec, error, ready.call_id, spec.name, spec.version)


def _shown(obs: Observation, ready: Ready, rec: Recorder, record: object) -> Observation:
    """``obs`` as the caller of ``ready`` gets it: a replayed one under this proposal's call id (and
    recorded), the call's ledger events stored apart once its final observation is out."""
    if obs.call_id != ready.call_id and not obs.provisional:  # replayed: this proposal's id
        diagnostics = {**obs.diagnostics, "first_call_id": obs.call_id}
        obs = dataclasses.replace(obs, call_id=ready.call_id, diagnostics=diagnostics)
    if obs.diagnostics.get("replayed") is True and obs.error is None:  # a failure's is recorded
        rec.add("observation", {**observation_event(obs), "replayed": True})
    if not obs.provisional and isinstance(record, CallRecord):
        record.ended = True  # the caller stores ``rec`` now: later events are stored apart
    return obs


def _abandon(steps: Protocol, running: Future[Outcome] | None) -> None:
    """Tell a protocol waiting for its send's outcome that nobody waits for it any more (and of
    the blocking attempt still ``running``, whose outcome it records when it ends)."""
    with contextlib.suppress(Abandoned, StopIteration):
        steps.throw(Abandoned() if running is None else LeftRunning(running))


def _on_thread(steps: Protocol, value: Outcome | None) -> asyncio.Future[Any]:
    """:func:`_step` on a worker thread (as ``asyncio.to_thread`` runs it, without its task)."""
    run = partial(contextvars.copy_context().run, _step, steps, value)
    return asyncio.get_running_loop().run_in_executor(None, run)


async def _written(step: asyncio.Future[T]) -> T:
    """``step``'s result once its thread ended, whatever cancels its awaiter meanwhile (a store
    write is bounded by the store's busy timeout)."""
    while True:
        try:
            return await asyncio.shield(step)
        except asyncio.CancelledError:
            if step.done():
                return step.result()


def _released(release: Callable[[], None] | None) -> None:
    """Call ``release`` (:func:`~actionspace.ledger.recover.running_here`'s), if any."""
    if release is not None:
        release()


def _reset(token: contextvars.Token[SendGate | None]) -> None:
    """Undo :data:`SENDING`'s set; a stream closed from another context (its reader gone) cannot
    reset it there, and leaves it to that context (a gate no worker begins any more)."""
    try:
        SENDING.reset(token)
    except ValueError:
        SENDING.set(None)


_CANCELLED_UNSENT = "the caller was cancelled before a worker thread began this call; it was not sent"
_CANCELLED_AT_INTENT = "the caller was cancelled while this call's intent was recorded; it was not sent"


def _not_begun() -> ActionError:
    """The error of a send the closed runtime refused: nothing was sent."""
    return ActionError.of("cancelled", NOT_BEGUN, details={"sent": False})


def _step(steps: Protocol, value: Outcome | None) -> Any:
    """One step of a protocol generator; its return value comes back wrapped, not as StopIteration."""
    try:
        return steps.send(value)
    except StopIteration as stop:
        return _Done(stop.value)
