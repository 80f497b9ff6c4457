"""A plain new write from async code in one frame: ``Runtime.acall`` (``Messages.acalls``) of a
``ToolCall`` naming a tool with side effects whose precompiled entry is valid, from its stages'
events to its commit, with its send awaited.

What pipeline/_write.py does for ``Runtime.call``, for the awaited call: the same decision to take
it (``_write_admit.admitted``) and the same preparation, then the driver's direct frame written
out with the send awaited (``Executor.arun``: an async tool awaited, a blocking one on a worker
thread) as ``LedgerDriver.drive_call`` awaits it, and the message's own steps around it as
:meth:`Messages._calls <actionspace.pipeline.messages.Messages._calls>` takes them: the task
registered while its events are not stored (``InFlight.open``), the send cuttable by ``close()``
(``InFlight.cuttable``: a write cut while its tool waits ends ``unknown_commit``). Any other course
goes on through the protocol from where it stands (``LedgerDriver._drive``), as the driver's
direct frame hands it over.

Taken only where the driver's direct frame runs on the async path and nothing blocks the event
loop that the general path would take off it: the ledger and the run-state store in memory. Over
a database the general path runs (the ledger's steps on worker threads).
``tests/pipeline/test_w20_write_frames.py`` shows both give the same events, observations, ledger
entries and flow state, awaited and sync calls mixed.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from json.encoder import encode_basestring as _quote
from typing import TYPE_CHECKING, Any

from actionspace import _crash
from actionspace._crash import point
from actionspace.errors import ActionError
from actionspace.execution._sends import SENDING, SendGate
from actionspace.execution.executor import NOT_BEGUN
from actionspace.execution.ready import Ready
from actionspace.ledger._intent import not_begun
from actionspace.ledger._shown import observed
from actionspace.ledger.commit import _Ledger, proceed, settling
from actionspace.ledger.entries import LedgerEntry
from actionspace.ledger.recover import running_here
from actionspace.outcomes import Failed, Outcome, Succeeded
from actionspace.pipeline._commit_parts import CallRecord, lost
from actionspace.pipeline._run import _INT_BOUND
from actionspace.pipeline._write_admit import admitted
from actionspace.pipeline._write_parts import (
    Taken,
    _text,
    committed,
    int_observation,
    intent_entry,
    prepared,
    texted_as,
    tool_heads,
)
from actionspace.pipeline.calls import dispatched_event
from actionspace.pipeline.commit import _shown
from actionspace.pipeline.observe import fail, observe_write
from actionspace.policy.principal import Principal
from actionspace.trace.recorder import Recorder
from actionspace.types import Observation, ToolCall

if TYPE_CHECKING:
    from actionspace.pipeline.messages import Messages

__all__ = ["awrite"]

_time = time.time


async def awrite(
    messages: Messages, raw: ToolCall, run_id: str, node_id: str | None, principal: Principal | None
) -> list[Observation]:
    """``Messages.acalls`` of ``raw`` (a ``ToolCall``, no provenance, sources, dry run, fresh
    read, parsed message or occurrence): in this frame when it is a plain new write it takes,
    else through the general path (``Messages._calls``). Decided when awaited, as the general
    path decides, so the flow verdict is the run label's of that moment."""
    engine = messages.engine
    taken = None
    if engine.runs.in_memory and not engine.driver._offload:  # else the stores' I/O goes off the loop
        taken = admitted(messages, raw, run_id, node_id, principal)
    if taken is None:
        return await messages._calls(raw, run_id, node_id, principal, None, None, blocking=False)
    engine, run = taken[0], taken[1]
    in_flight = messages.in_flight
    opened = in_flight.open()  # the call may be cut: close() waits for its events
    rec = Recorder(run, None)
    shown = [False]
    obs: Observation
    try:
        try:
            ready, digest = prepared(taken, rec, raw, node_id)
            if engine.executor.closed:  # closed while it was prepared, as the general path checks it
                obs = _closed_meanwhile(rec, raw, run, ready.call_id)
            else:
                key = ready.key
                assert key is not None
                spec = ready.compiled.spec
                writing = engine.writing
                writing[key] = None
                try:
                    driven = _adriven(messages, ready, rec, digest, taken, shown)
                    obs = await in_flight.cuttable(driven, rec, spec, ready.call_id, key)
                finally:
                    writing.pop(key, None)
        except Exception as exc:  # a bug of ours or of the tool's wrapper: typed, never raised at the model
            obs = engine.internal(exc, rec, raw)
        if not shown[0]:
            run.flow.observed(obs)
    except BaseException:  # cancelled: what was recorded is still stored
        with contextlib.suppress(Exception):
            engine.flush(rec)
        in_flight.done(opened)
        raise
    try:
        try:
            engine.runs.flush(rec, engine.sink, clean=shown[0])  # in memory: on the loop, as inline
        except Exception as exc:
            return messages._unsaved(run, [obs], exc, rec)
        return [obs]
    finally:
        in_flight.done(opened)


async def _adriven(
    messages: Messages, ready: Ready, rec: Recorder, digest: str, taken: Taken, shown: list[bool]
) -> Observation:
    """``LedgerDriver.drive_call`` of ``ready`` awaited over stores in memory, its direct frame
    written out (pipeline/_write.py ``_driven``, its send awaited); ``shown[0]`` set when the flow
    state was shown the observation already (``FlowState.observed_as``)."""
    engine = messages.engine
    driver = engine.driver
    executor = engine.executor
    spec = ready.compiled.spec
    call_id = ready.call_id
    key = ready.key
    assert key is not None
    if executor.closed:  # closed before it began: nothing recorded as sent
        error = ActionError.of("cancelled", NOT_BEGUN, details={"sent": False})
        return fail(rec, error, call_id, spec.name, spec.version)
    ledger = driver.ledger

    def failed(error: ActionError) -> Observation:
        return fail(rec, error, call_id, spec.name, spec.version)

    still_pending = None
    if driver._checks_pending:  # in the insert's own transaction

        def still_pending(found: LedgerEntry) -> Observation:
            return driver._still_pending(ready, rec, found)

    else:
        pending = ledger.pending_action(rec.run.run_id, spec._key, digest)
        if pending is not None and pending.key != key:
            return driver._still_pending(ready, rec, pending)

    artifacts = engine.artifacts
    ints = taken[2].ints
    verdict, texted = taken[3], taken[6]

    def observe_outcome(outcome: Outcome) -> Observation:
        value = outcome.value if type(outcome) is Succeeded and outcome.attempts == 1 else None
        if ints and type(value) is int and -_INT_BOUND < value < _INT_BOUND:
            return int_observation(ready, value, rec, verdict, _observed_head(spec, texted))[0]
        return observe_write(ready, outcome, rec, artifacts)

    flush = driver.flush
    record: Any = None  # the ledger's ``record`` (CallRecord), made where the protocol's functions take it
    queued = bool(spec.blocking) and not spec._is_async  # a worker begins it
    gate = SendGate(driver._closed)
    held = running_here(key)  # recovery in this process leaves the key alone
    sending, gates = driver.sending, driver.gates
    records, seq = rec.records, rec.run.seq
    try:
        if _crash._target is not None:
            point("before_intent")
        sent_entry = intent_entry(ready, rec.run.run_id, spec._key, digest)  # new_entry's
        refused: Observation | None = None
        try:  # ledger/_intent.py ``intent``, written out
            if still_pending is not None:
                begun = ledger.begin_unless_pending(sent_entry)  # type: ignore[attr-defined]
                if begun.pending is not None:
                    refused = still_pending(begun.pending)
            else:
                begun = ledger.begin(sent_entry)
        except Exception as exc:  # the store did not take the intent: nothing is sent
            refused = failed(not_begun(ledger, sent_entry, exc))
        if refused is not None:
            record = _record(rec, flush)
            return _shown(refused, ready, rec, record)
        if _crash._target is not None:
            point("after_intent")
        if not begun.created:
            record = _record(rec, flush)
            steps = proceed(
                spec, ledger, begun, sent_entry, observe=observe_outcome, fail=failed, record=record
            )
            return await _arest(messages, ready, rec, record, steps, queued, (gate, None, held, False))
        entry = begun.entry  # ledger/commit.py ``first_send``, written out
        accepted: dict[str, Any] = {"key": key, "from": None, "to": "accepted"}
        moved: dict[str, Any] = {"key": key, "from": "accepted", "to": "dispatched", "attempts": 1}
        if texted:  # their texts as encode_data writes them (the key is ASCII)
            accepted = texted_as(accepted, f'{{"key": "{key}", "from": null, "to": "accepted"}}')
            moved = texted_as(
                moved, f'{{"key": "{key}", "from": "accepted", "to": "dispatched", "attempts": 1}}'
            )
        records.append((next(seq), "ledger", _time(), call_id, accepted))
        records.append((next(seq), "ledger", _time(), call_id, moved))
        if _crash._target is not None:
            point("after_dispatch_durable")
        sending[id(gate)] = key  # noted before the gate reads ``closed``
        gates[id(gate)] = gate
        sent = gate.opens(deferred=queued)
        outcome: Outcome | None = None if sent else Failed(_not_begun(), 0)
        cut_steps: Any = None
        if sent:
            token = SENDING.set(gate)
            try:
                dispatched: dict[str, Any] = {
                    "tool": spec.name,
                    "version": spec.version,
                    "node_id": ready.node_id,
                    "attempt": 1,
                }
                dispatched["idempotency_key"] = key  # pipeline/calls.py ``dispatched_event``
                if texted:
                    head = f'{{"tool": {_quote(spec.name)}, "version": {_text(spec.version)}, "node_id": '
                    text = f'{head}{_quote(ready.node_id)}, "attempt": 1, "idempotency_key": "{key}"}}'
                    dispatched = texted_as(dispatched, text)
                records.append((next(seq), "dispatched", _time(), call_id, dispatched))
                outcome = await executor.arun(spec, ready.kwargs, rec.retry)
            except Exception as exc:  # ours broke around the send: it may have landed
                outcome = Failed(lost(exc), 1)
            except BaseException as cut:  # a cancel, or the interpreter's exit: it may have acted
                record = _record(rec, flush)
                cut_steps = settling(spec, _Ledger(ledger, entry, record), observe_outcome, failed)
                outcome = await driver._cut_send(cut, gate, cut_steps, False)
                if outcome is None:
                    raise
            finally:
                try:  # pipeline/commit.py ``_reset``
                    SENDING.reset(token)
                except ValueError:
                    SENDING.set(None)
        assert outcome is not None
        if not isinstance(outcome, Succeeded):
            record = record or _record(rec, flush)
            steps = cut_steps or settling(spec, _Ledger(ledger, entry, record), observe_outcome, failed)
            return await _arest(messages, ready, rec, record, steps, queued, (gate, outcome, held, sent))
        if _crash._target is not None:  # ledger/commit.py ``settled_at_once``, written out
            point("after_response")
        value = outcome.value
        if ints and outcome.attempts == 1 and type(value) is int and -_INT_BOUND < value < _INT_BOUND:
            obs, stored = int_observation(ready, value, rec, verdict, _observed_head(spec, texted))
            final = committed(ledger, entry, obs, stored, rec, texted)
            if final is obs:
                label, within, _ = verdict[4]
                taken[1].flow.observed_as(obs, label, within)
                shown[0] = True
                return obs
        else:
            obs = observed(observe_outcome, outcome)
            final = committed(ledger, entry, obs, obs.to_dict(), rec, texted)
        if final.call_id != call_id or final.diagnostics.get("replayed") is True:
            record = record or _record(rec, flush)
            return _shown(final, ready, rec, record)
        return final
    finally:
        sending.pop(id(gate), None)
        gates.pop(id(gate), None)
        held()
        if record is not None:
            record.ended = True


def _record(rec: Recorder, flush: Any) -> Any:
    """The ledger's ``record`` for the call (as the driver makes it)."""
    return rec.add if flush is None else CallRecord(rec, flush)


async def _arest(
    messages: Messages,
    ready: Ready,
    rec: Recorder,
    record: Any,
    steps: Any,
    queued: bool,
    taken: Any,
) -> Observation:
    """The protocol from where the frame stands (``LedgerDriver._drive``, taken over), to its end."""
    engine = messages.engine
    spec = ready.compiled.spec

    async def dispatch() -> AsyncIterator[Observation | Outcome]:
        rec.add("dispatched", dispatched_event(ready, spec))
        yield await engine.executor.arun(spec, ready.kwargs, rec.retry)

    last: Observation | None = None
    async for obs in engine.driver._drive(steps, dispatch, False, ready.key, queued, taken):
        last = _shown(obs, ready, rec, record)
    assert last is not None
    return last


def _closed_meanwhile(rec: Recorder, raw: ToolCall, run: Any, call_id: str) -> Observation:
    from actionspace.pipeline.messages import _not_begun as not_begun  # messages imports this module

    return not_begun(rec, raw, run, call_id)


def _not_begun() -> ActionError:
    return ActionError.of("cancelled", NOT_BEGUN, details={"sent": False})


def _observed_head(spec: Any, texted: bool) -> str | None:
    """The ``observation`` payload's text up to its digest (``tool_heads``) when it is made beside it."""
    heads = tool_heads(spec) if texted else None
    return None if heads is None else heads[1]
