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

What is decided per (run, tool) is the precompiled entry's (authorization, the flow verdict per
run label, the events' payloads); per call, the key and the argument digest are hashed from one
canonical text of the arguments, and an ``int`` result is put in its envelope as the precompiled
read path puts it (pipeline/_run.py).

:func:`write_call` answers None before anything is recorded or changed for any call it does not
take (a read, a stream, a batch, approvals, budgets or the read cache, bindings, a user stage, a
flow verdict other than allow, arguments the schema refuses or not in NFC, a closed runtime, the
driver's direct frame switched off); the caller then runs the general path.
``tests/pipeline/test_w19_write_frame.py`` shows both give the same events, observations, ledger
entries and flow state over generated write tools and calls.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import AsyncIterator, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from actionspace import _crash
from actionspace._canonical import digest_json
from actionspace._crash import point
from actionspace._encoder import dumps_plain
from actionspace._json_values import unfit_arguments
from actionspace.errors import ActionError, said
from actionspace.execution._sends import SENDING, SendGate
from actionspace.execution.executor import NOT_BEGUN
from actionspace.execution.ready import Ready
from actionspace.ledger._shown import observed
from actionspace.ledger.commit import (
    _COMMITTABLE,
    Record,
    _hold_unrecorded,
    _Ledger,
    new_entry,
    proceed,
    settling,
)
from actionspace.ledger.entries import LedgerEntry, LedgerStore
from actionspace.ledger.keys import args_digest, idempotency_key, identity_digests
from actionspace.ledger.recover import running_here
from actionspace.outcomes import Failed, Outcome, Succeeded
from actionspace.pipeline._commit_parts import CallRecord, lost
from actionspace.pipeline._run import _INT_BOUND, _INT_DIGESTS, _INT_MEMO
from actionspace.pipeline.calls import dispatched_event
from actionspace.pipeline.commit import _shown
from actionspace.pipeline.fast_effects import verdict_of
from actionspace.pipeline.observe import fail, observe_write
from actionspace.pipeline.runs import check_id
from actionspace.pipeline.stages import node_named
from actionspace.policy.principal import Principal
from actionspace.trace.recorder import Recorder
from actionspace.types import Observation, Provenance, ToolCall

if TYPE_CHECKING:
    from actionspace.pipeline.messages import Messages

__all__ = ["write_call"]

T = TypeVar("T")

_time = time.time
_FLAT = frozenset({str, int, bool, type(None)})
_SAFE = 2**53 - 1
_new = object.__new__
_sha256 = hashlib.sha256


def write_call(
    messages: Messages, raw: ToolCall, run_id: str, node_id: str | None, principal: Principal | None
) -> Observation | None:
    """``Messages.calls`` of ``raw`` (a ``ToolCall``, no provenance, sources, dry run, fresh read,
    parsed message or occurrence) when it is a plain new write this frame takes, else None with
    nothing recorded or changed but the run opened (as the general path would open it first)."""
    engine = messages.engine
    fast = engine.fast
    name, args, given_id = raw.name, raw.arguments, raw.id
    if (
        not fast.enabled
        or raw.provenance
        or type(name) is not str
        or not name
        or type(args) is not dict
        or not (given_id is None or type(given_id) is str)
    ):
        return None
    if node_id is not None and ("\x00" in node_id or not node_id.isascii()):
        check_id("node id", node_id)  # raised at the caller, as the general path raises it
    run = engine.run(run_id, principal)
    who = principal or run.principal
    entry = fast.entry(run, name, who, engine._ordered)
    if entry is None or not entry.effects:
        return None
    spec = entry.spec
    driver = engine.driver
    executor = engine.executor
    if (
        not spec.has_side_effects
        or spec.bindings
        or not driver.direct
        or executor.closed
        or unfit_arguments(args) is not None
        or not entry.compiled.validator.is_valid(args)
    ):
        return None
    # What ready_effect decides, decided before anything is recorded: the verdict, the identity.
    verdict = verdict_of(entry, run, who, args)
    if verdict is None:
        return None
    text, digest = _digested(args, entry.plain is not None)
    if text is None and node_id is None:
        digest, written = identity_digests(args)
        if written is not None:  # not NFC: the stages look for the node as written in the ledger
            return None
    rec = Recorder(run, None)
    records, seq = rec.records, run.seq  # Recorder.add, written out for the stages' events
    obs: Observation
    try:
        parsed = {"format": "toolcall", "calls": ({"name": name, "id": given_id},)}
        records.append((next(seq), "parsed", _time(), None, parsed))
        node = node_id or f"n{next(run.nodes)}"
        call_id = given_id or f"{run.run_id}:{node}"
        rec.call_id = call_id
        shape = entry.shape
        records.append((next(seq), "authorized", _time(), call_id, shape.authorized))
        records.append((next(seq), "validated", _time(), call_id, shape.validated))
        spec_key = spec._key  # ToolSpec.key's own value, read without the property's call
        if node_id is None:  # the identity node of the message's first such call
            node = node_named(run.turn, spec_key, digest, 1)
        elif text is None:
            digest = args_digest(args)
        if verdict[2] is not None:
            records.append((next(seq), "flow_checked", _time(), call_id, verdict[2]))
        run.flow.pending[call_id] = verdict[3]
        key = _key(run.run_id, node, spec_key, args, text)
        kwargs = {**args, "idempotency_key": key} if spec.takes_key else args
        ready = Ready(entry.compiled, call_id, node, args, kwargs, key, None, verdict[3])
        if executor.closed:  # closed while it was prepared, as the general path checks it
            obs = _closed_meanwhile(rec, raw, run, call_id)
        else:
            writing = engine.writing
            writing[key] = None
            try:
                obs = _driven(messages, ready, rec, digest, entry.ints)
            finally:
                writing.pop(key, None)
    except Exception as exc:  # a bug of ours or of the tool's wrapper: typed, never raised at the model
        obs = engine.internal(exc, rec, raw)
    except BaseException:  # cancelled: what was recorded is still stored
        with contextlib.suppress(Exception):
            engine.flush(rec)
        raise
    run.flow.observed(obs)
    try:
        engine.flush(rec)
    except Exception as exc:
        return messages._unsaved(run, [obs], exc)[0]
    return obs


def _driven(messages: Messages, ready: Ready, rec: Recorder, digest: str, entry_ints: bool) -> Observation:
    """``LedgerDriver.drive_call`` of ``ready`` on the sync path, its direct frame written out."""
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

    ints = entry_ints
    label = ready.label

    def observe_outcome(outcome: Outcome) -> Observation:
        value = outcome.value if type(outcome) is Succeeded and outcome.attempts == 1 else None
        if not (ints and type(value) is int and -_INT_BOUND < value < _INT_BOUND and label is not None):
            return observe_write(ready, outcome, rec, artifacts)
        # What observe_write makes of it (pipeline/_run.py ``tail`` too): the int's repr is its text.
        digest = _INT_DIGESTS.get(value)
        if digest is None:
            if len(_INT_DIGESTS) >= _INT_MEMO:
                _INT_DIGESTS.clear()
            digest = _INT_DIGESTS[value] = _sha256(int.__repr__(value).encode()).hexdigest()
        provenance = _new(Provenance)
        provenance.__dict__.update(
            fetched_at=_time(), resource_version=None, trust=label.integrity, labels=label.tags()
        )
        obs = _new(Observation)  # every field is already checked, as observe() does
        obs.__dict__.update(
            call_id=call_id,
            tool=spec.name,
            tool_version=spec.version,
            data=value,
            content_hash=digest,
            provenance=provenance,
            diagnostics={"idempotency_key": key},
        )
        observed = {"status": "ok", "tool": spec.name, "version": spec.version, "content_hash": digest}
        rec.records.append((next(rec.run.seq), "observation", _time(), call_id, observed))  # rec.add's
        return obs

    flush = driver.flush
    record = rec.add if flush is None else CallRecord(rec, flush)
    queued = bool(spec.blocking) and not spec.is_async  # a worker begins it
    gate = SendGate(driver._closed)
    held = running_here(key)  # recovery in this process leaves the key alone
    sending, gates = driver.sending, driver.gates
    records, seq = rec.records, rec.run.seq  # ``record`` while the call runs (CallRecord), written out
    try:
        if _crash._target is not None:
            point("before_intent")
        sent_entry = new_entry(
            key=key,
            run_id=rec.run.run_id,
            node_id=ready.node_id,
            spec=spec,
            arguments=ready.arguments,
            digest=digest,
            dispatched=True,
        )
        refused: Observation | None = None
        try:  # ledger/_intent.py ``intent``, written out
            if still_pending is not None:
                begun = ledger.begin_unless_pending(sent_entry)  # type: ignore[attr-defined]
                if begun.pending is not None:
                    refused = still_pending(begun.pending)
            else:
                begun = ledger.begin(sent_entry)
        except Exception as exc:  # the store did not take the intent: nothing is sent
            refused = failed(ActionError.unsent("the ledger could not record the intent", exc))
        if refused is not None:
            return _shown(refused, ready, rec, record)
        if _crash._target is not None:
            point("after_intent")
        if not begun.created:
            steps = proceed(
                spec, ledger, begun, sent_entry, observe=observe_outcome, fail=failed, record=record
            )
            return _rest(messages, ready, rec, record, steps, queued, (gate, None, held, False))
        entry = begun.entry  # ledger/commit.py ``first_send``, written out
        records.append((next(seq), "ledger", _time(), call_id, {"key": key, "from": None, "to": "accepted"}))
        moved = {"key": key, "from": "accepted", "to": "dispatched", "attempts": 1}
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
                dispatched = {
                    "tool": spec.name,
                    "version": spec.version,
                    "node_id": ready.node_id,
                    "attempt": 1,
                }
                dispatched["idempotency_key"] = key  # pipeline/calls.py ``dispatched_event``
                records.append((next(seq), "dispatched", _time(), call_id, dispatched))
                outcome = executor.run(spec, ready.kwargs, rec.retry)
            except Exception as exc:  # ours broke around the send: it may have landed
                outcome = Failed(lost(exc), 1)
            except BaseException as cut:  # the interpreter's exit, a signal: it may have acted
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
            steps = cut_steps or settling(spec, _Ledger(ledger, entry, record), observe_outcome, failed)
            return _rest(messages, ready, rec, record, steps, queued, (gate, outcome, held, sent))
        if _crash._target is not None:  # ledger/commit.py ``settled_at_once``, written out
            point("after_response")
        final = _committed(ledger, entry, observed(observe_outcome, outcome), record)
        if final.call_id != call_id or final.diagnostics.get("replayed") is True:
            return _shown(final, ready, rec, record)
        return final
    finally:
        sending.pop(id(gate), None)
        gates.pop(id(gate), None)
        held()
        if isinstance(record, CallRecord):
            record.ended = True


def _committed(ledger: LedgerStore, entry: LedgerEntry, obs: Observation, record: Record) -> Observation:
    """ledger/commit.py ``_commit`` of a new action's first send, which succeeded (its entry
    ``dispatched``, one attempt), with its ``_Ledger.move``."""
    new = entry.evolve(
        state="committed",
        observation=obs.to_dict(),
        remote_id=obs.diagnostics.get("remote_id"),
        error=None,
    )
    key = entry.key
    try:
        stored = ledger.transition(key, _COMMITTABLE, new)
    except Exception as exc:  # the outcome is known and the store did not take it: kept here
        _hold_unrecorded(ledger, new)
        why = f"{type(exc).__name__}: {said(exc)[:200]}"
        moved = {"key": key, "from": entry.state, "to": "committed", "attempts": new.attempts}
        record("ledger", {**moved, "recorded": False, "error": why})
    else:
        if stored is None:  # someone settled it meanwhile (a recover elsewhere): the stored outcome
            current = ledger.get(key)
            if current is not None and current.state == "committed" and current.observation is not None:
                return Observation.from_dict(current.observation)
        else:
            record(
                "ledger", {"key": key, "from": entry.state, "to": "committed", "attempts": stored.attempts}
            )
    if _crash._target is not None:
        point("after_ledger_commit")
    return obs


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


def _digested(args: dict[str, Any], flat: bool) -> tuple[bytes | None, str]:
    """(the text :func:`~actionspace.ledger.keys.args_digest` hashes, that digest) when the text
    is ASCII RFC 8785 (no string to bring to NFC, no integer beyond its domain's other form);
    else (None, "") and the ledger's own functions read the arguments. ``flat``: the schema's
    arguments are strings, integers and booleans (``Entry.plain``); such values, each of exactly
    its type and an integer within ±(2**53 − 1), are written by the C encoder as RFC 8785 writes
    them (what ``canonical_json`` checks first, value by value)."""
    if flat:
        for value in args.values():
            kind = type(value)
            if kind not in _FLAT or (kind is int and not -_SAFE <= value <= _SAFE):
                flat = False
                break
    try:
        text = dumps_plain(args).encode() if flat else digest_json(args)
    except ValueError:  # what the ledger's own functions refuse as they refuse it
        return None, ""
    if text.isascii() and text[:1] != b"x":
        return text, _sha256(text).hexdigest()
    return None, ""


def _key(run_id: str, node: str, tool_key: str, args: dict[str, Any], text: bytes | None) -> str:
    """:func:`~actionspace.ledger.keys.idempotency_key`, from the arguments' text when
    :func:`_digested` gave it: RFC 8785 writes an array as its members' texts, comma-separated,
    and a printable ASCII string without a quote or backslash as itself between quotes."""
    if text is not None:
        head = f'["{run_id}","{node}","{tool_key}",'
        if head.isascii() and head.isprintable() and head.count('"') == 6 and "\\" not in head:
            return f"as1_{_sha256(b''.join((head.encode(), text, b']'))).hexdigest()[:32]}"
    return idempotency_key(run_id, node, tool_key, args)


def _closed_meanwhile(rec: Recorder, raw: ToolCall, run: Any, call_id: str) -> Observation:
    from actionspace.pipeline.messages import _not_begun as not_begun  # messages imports this module

    return not_begun(rec, raw, run, call_id)


def _not_begun() -> ActionError:
    return ActionError.of("cancelled", NOT_BEGUN, details={"sent": False})
