"""A plain new write from sync code in one frame: ``Runtime.call`` of a ``ToolCall`` naming a tool
with side effects whose precompiled entry is valid (pipeline/fast.py), from its stages' events to
its commit.

What :meth:`Messages._calls <actionspace.pipeline.messages.Messages._calls>`, ``parse_raw``,
:meth:`FastPath.ready <actionspace.pipeline.fast.FastPath.ready>` (``ready_effect``),
``Engine.run_ready``, ``Engine._execute`` and the direct frame of
:meth:`LedgerDriver.drive_call <actionspace.pipeline.commit.LedgerDriver.drive_call>` do for such a
call, written out in one function: each of those layers is a Python frame (two of them generators
driven through ``run_sync``, the driver's an async generator stepped twice) with branches this
call never takes, and together they were most of a write's interpreter work outside the stores.

The ledger protocol (DESIGN §6) is the driver's, step for step: the unsettled identical action
looked for first (or in the insert's own transaction), the intent durable before the send (as
``ledger/_intent.py`` ``intent`` writes it), the ``accepted`` and ``dispatched`` moves recorded
(``first_send``), the send under its :class:`~actionspace.execution._sends.SendGate` noted in
``LedgerDriver.sending``, the commit (``settled_at_once`` and ``_commit``), each crash point where
the protocol has it. Any other course — the node has an entry already (a replay, a conflict, a
retry of a retryable failure), the send did not succeed, ours broke around it, a cut — goes on
through the protocol's own generator from where it stands, as the driver's direct frame hands it
over (``LedgerDriver._drive``, which never suspends on the sync path).

What is decided per (run, tool) is the precompiled entry's (authorization, the flow verdict and
its output per run label, the events' payloads); per call, the key and the argument digest are
hashed from one canonical text of the arguments, an ``int`` result is put in its envelope as the
precompiled read path puts it (pipeline/_run.py), its ledger JSON made beside it, and the flow
state shown it as that path shows its own (``FlowState.observed_as``). Over a SQLite trace store
the payloads made per call carry the text the store writes for them
(:class:`~actionspace.trace.store_encoding.Texted`). What this frame shares with the awaited one
(pipeline/_awrite.py) is in pipeline/_write_parts.py.

:func:`write_call` answers None before anything is recorded or changed for any call it does not
take (a read, a stream, a batch, approvals, budgets or the read cache, bindings, a user stage, a
flow verdict other than allow, arguments the schema refuses or not in NFC, a closed runtime, the
driver's direct frame switched off); the caller then runs the general path.
``tests/pipeline/test_w19_write_frame.py`` shows both give the same events, observations, ledger
entries and flow state over generated write tools and calls.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from json.encoder import encode_basestring as _quote
from typing import TYPE_CHECKING, Any, TypeVar

from actionspace import _crash
from actionspace._crash import point
from actionspace.errors import ActionError
from actionspace.execution._sends import SENDING, SendGate
from actionspace.execution.executor import NOT_BEGUN
from actionspace.execution.ready import Ready
from actionspace.ledger._intent import not_begun
from actionspace.ledger._shown import observed
from actionspace.ledger.commit import _Ledger, proceed, settling
from actionspace.ledger.recover import running_here
from actionspace.outcomes import Failed, Outcome, Succeeded
from actionspace.pipeline._commit_parts import CallRecord, lost
from actionspace.pipeline._run import _INT_BOUND
from actionspace.pipeline._write_admit import admitted
from actionspace.pipeline._write_parts import (
    _TOOL_HEADS,
    Taken,
    committed,
    int_observation,
    intent_entry,
    prepared,
    tool_heads,
)
from actionspace.pipeline.calls import dispatched_event
from actionspace.pipeline.commit import _shown
from actionspace.pipeline.observe import fail, observe_write
from actionspace.policy.principal import Principal
from actionspace.trace.recorder import Recorder
from actionspace.trace.store_encoding import MAX_EVENT_CHARS, Texted
from actionspace.types import Observation, ToolCall

if TYPE_CHECKING:
    from actionspace.pipeline.messages import Messages

__all__ = ["write_call"]

T = TypeVar("T")

_time = time.time


def write_call(
    messages: Messages, raw: ToolCall, run_id: str, node_id: str | None, principal: Principal | None
) -> Observation | None:
    """``Messages.calls`` of ``raw`` (a ``ToolCall``, no provenance, sources, dry run, fresh read,
    parsed message or occurrence) when it is a plain new write this frame takes, else None with
    nothing recorded or changed but the run opened (as the general path would open it first)."""
    taken = admitted(messages, raw, run_id, node_id, principal)  # pipeline/_write_admit.py
    if taken is None:
        return None
    engine, run = taken[0], taken[1]
    rec = Recorder(run, None)
    obs: Observation
    shown = False
    try:
        ready, digest = prepared(taken, rec, raw, node_id)
        if engine.executor.closed:  # closed while it was prepared, as the general path checks it
            obs = _closed_meanwhile(rec, raw, run, ready.call_id)
        else:
            key = ready.key
            assert key is not None
            writing = engine.writing
            writing[key] = None
            try:
                obs, shown = _driven(messages, ready, rec, digest, taken)
            finally:
                writing.pop(key, None)
    except Exception as exc:  # a bug of ours or of the tool's wrapper: typed, never raised at the model
        obs = engine.internal(exc, rec, raw)
    except BaseException:  # cancelled: what was recorded is still stored
        with contextlib.suppress(Exception):
            engine.flush(rec)
        raise
    if not shown:
        run.flow.observed(obs)
    try:
        engine.runs.flush(rec, engine.sink, clean=shown)  # Engine.flush
    except Exception as exc:
        return messages._unsaved(run, [obs], exc, rec)[0]
    return obs


def _driven(
    messages: Messages, ready: Ready, rec: Recorder, digest: str, taken: Taken
) -> tuple[Observation, bool]:
    """``LedgerDriver.drive_call`` of ``ready`` on the sync path, its direct frame written out;
    and whether the flow state was shown the observation already (a first send that committed
    an ``int``: ``FlowState.observed_as`` with the verdict's output, as the precompiled read path
    shows its own)."""
    engine = messages.engine
    driver = engine.driver
    executor = engine.executor
    spec = ready.compiled.spec
    call_id = ready.call_id
    key = ready.key
    assert key is not None
    if executor.closed:  # closed before it began: nothing recorded as sent
        error = ActionError.of("cancelled", NOT_BEGUN, details={"sent": False})
        return fail(rec, error, call_id, spec.name, spec.version), False
    ledger = driver.ledger
    checks_pending = driver._checks_pending  # in the insert's own transaction
    if not checks_pending:
        pending = ledger.pending_action(rec.run.run_id, spec._key, digest)
        if pending is not None and pending.key != key:
            return driver._still_pending(ready, rec, pending), False

    ints = taken[2].ints
    verdict, texted = taken[3], taken[6]
    heads = None  # the texts of this tool's payloads, made once (tool_heads, found without its call)
    if texted:
        hit = _TOOL_HEADS.get(id(spec))
        heads = hit[1] if hit is not None and hit[0] is spec else tool_heads(spec)
    observed_head = None if heads is None else heads[1]
    # The protocol's own functions take how an outcome is observed and a failure answered
    # (_observer, _failer): made only on the courses that hand them over, not on a first send
    # that committed.
    flush = driver.flush
    record: Any = None  # the ledger's ``record`` (CallRecord), made where the protocol's functions take it
    queued = bool(spec.blocking) and not spec._is_async  # a worker begins it
    gate = SendGate(driver._closed)
    held = running_here(key)  # recovery in this process leaves the key alone
    sending, gates = driver.sending, driver.gates
    records, seq = rec.records, rec.run.seq  # ``record`` while the call runs (CallRecord), written out
    try:
        if _crash._target is not None:
            point("before_intent")
        sent_entry = intent_entry(ready, rec.run.run_id, spec._key, digest)  # new_entry's
        refused: Observation | None = None
        try:  # ledger/_intent.py ``intent``, written out
            if checks_pending:
                begun = ledger.begin_unless_pending(sent_entry)  # type: ignore[attr-defined]
                if begun.pending is not None:
                    refused = driver._still_pending(ready, rec, begun.pending)
            else:
                begun = ledger.begin(sent_entry)
        except Exception as exc:  # the store did not take the intent: nothing is sent
            error = not_begun(ledger, sent_entry, exc)
            refused = fail(rec, error, call_id, spec.name, spec.version)
        if refused is not None:
            record = _record(rec, flush)
            return _shown(refused, ready, rec, record), False
        if _crash._target is not None:
            point("after_intent")
        if not begun.created:
            record = _record(rec, flush)
            observe_outcome = _observer(messages, ready, rec, taken, observed_head)
            failed = _failer(rec, call_id, spec)
            steps = proceed(
                spec, ledger, begun, sent_entry, observe=observe_outcome, fail=failed, record=record
            )
            return _rest(messages, ready, rec, record, steps, queued, (gate, None, held, False)), False
        entry = begun.entry  # ledger/commit.py ``first_send``, written out
        accepted: dict[str, Any] = {"key": key, "from": None, "to": "accepted"}
        moved: dict[str, Any] = {"key": key, "from": "accepted", "to": "dispatched", "attempts": 1}
        if texted:  # their texts as encode_data writes them (the key is ASCII: as1_ and hex)
            accepted = Texted(accepted)
            accepted.text = f'{{"key": "{key}", "from": null, "to": "accepted"}}'
            moved = Texted(moved)
            moved.text = f'{{"key": "{key}", "from": "accepted", "to": "dispatched", "attempts": 1}}'
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
                if heads is not None:
                    text = f'{heads[0]}{_quote(ready.node_id)}, "attempt": 1, "idempotency_key": "{key}"}}'
                    if text.isascii() and len(text) <= MAX_EVENT_CHARS:  # texted_as's check
                        dispatched = Texted(dispatched)
                        dispatched.text = text
                records.append((next(seq), "dispatched", _time(), call_id, dispatched))
                outcome = executor.run(spec, ready.kwargs, rec.retry)
            except Exception as exc:  # ours broke around the send: it may have landed
                outcome = Failed(lost(exc), 1)
            except BaseException as cut:  # the interpreter's exit, a signal: it may have acted
                record = _record(rec, flush)
                observe_outcome = _observer(messages, ready, rec, taken, observed_head)
                failed = _failer(rec, call_id, spec)
                cut_steps = settling(spec, _Ledger(ledger, entry, record), observe_outcome, failed)
                outcome = _sync(driver._cut_send(cut, gate, cut_steps, True))
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
            if cut_steps is not None:
                steps = cut_steps
            else:
                observe_outcome = _observer(messages, ready, rec, taken, observed_head)
                failed = _failer(rec, call_id, spec)
                steps = settling(spec, _Ledger(ledger, entry, record), observe_outcome, failed)
            return _rest(messages, ready, rec, record, steps, queued, (gate, outcome, held, sent)), False
        if _crash._target is not None:  # ledger/commit.py ``settled_at_once``, written out
            point("after_response")
        value = outcome.value
        if ints and outcome.attempts == 1 and type(value) is int and -_INT_BOUND < value < _INT_BOUND:
            obs, stored = int_observation(ready, value, rec, verdict, observed_head)
            final = committed(ledger, entry, obs, stored, rec, texted)
            if final is obs:
                label, within, _ = verdict[4]
                taken[1].flow.observed_as(obs, label, within)
                return obs, True
        else:
            obs = observed(_observer(messages, ready, rec, taken, observed_head), outcome)
            final = committed(ledger, entry, obs, obs.to_dict(), rec, texted)
        if final.call_id != call_id or final.diagnostics.get("replayed") is True:
            record = record or _record(rec, flush)
            return _shown(final, ready, rec, record), False
        return final, False
    finally:
        sending.pop(id(gate), None)
        gates.pop(id(gate), None)
        held()
        if record is not None:
            record.ended = True


def _observer(
    messages: Messages, ready: Ready, rec: Recorder, taken: Taken, head: str | None
) -> Callable[[Outcome], Observation]:
    """How the protocol observes an outcome of the call: an ``int`` of one attempt in its envelope
    (``int_observation``, as the precompiled read path puts it), anything else by ``observe_write``."""
    ints, verdict, artifacts = taken[2].ints, taken[3], messages.engine.artifacts

    def observe_outcome(outcome: Outcome) -> Observation:
        value = outcome.value if type(outcome) is Succeeded and outcome.attempts == 1 else None
        if ints and type(value) is int and -_INT_BOUND < value < _INT_BOUND:
            return int_observation(ready, value, rec, verdict, head)[0]
        return observe_write(ready, outcome, rec, artifacts)

    return observe_outcome


def _failer(rec: Recorder, call_id: str, spec: Any) -> Callable[[ActionError], Observation]:
    """How the protocol answers the call with a failure (``observe.fail``)."""

    def failed(error: ActionError) -> Observation:
        return fail(rec, error, call_id, spec.name, spec.version)

    return failed


def _record(rec: Recorder, flush: Any) -> Any:
    """The ledger's ``record`` for the call (as the driver makes it)."""
    return rec.add if flush is None else CallRecord(rec, flush)


def _rest(
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
        yield engine.executor.run(spec, ready.kwargs, rec.retry)

    async def drained() -> Observation:
        last: Observation | None = None
        rest = engine.driver._drive(steps, dispatch, True, ready.key, queued, taken)
        async for obs in rest:
            last = _shown(obs, ready, rec, record)
        assert last is not None
        return last

    return _sync(drained())


def _sync(coro: Coroutine[Any, Any, T]) -> T:
    """``run_sync``: the driver's steps on the sync path never suspend."""
    from actionspace.pipeline.engine import run_sync  # the engine imports messages, which imports this

    return run_sync(coro)


def _closed_meanwhile(rec: Recorder, raw: ToolCall, run: Any, call_id: str) -> Observation:
    from actionspace.pipeline.messages import _not_begun as not_begun  # messages imports this module

    return not_begun(rec, raw, run, call_id)


def _not_begun() -> ActionError:
    return ActionError.of("cancelled", NOT_BEGUN, details={"sent": False})
