"""The precompiled path's call itself (:meth:`FastPath.run <actionspace.pipeline.fast.FastPath.run>`),
split at the tool's first wait so that a call whose tool never waits runs without a coroutine of
ours: :func:`begin` records the stages' events, takes the tool's first step and, when it ended,
shapes the observation (:func:`tail`) and returns it; otherwise it returns the coroutine that
finishes the call (:func:`ended`). ``Runtime.acall`` awaits that coroutine only when there is one
(``Messages.quick``), so the async tool that finishes at once costs no frame of ours per layer.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Coroutine, Sequence
from hashlib import sha256
from typing import Any

from actionspace._crash import point
from actionspace.discovery.runs import RunState
from actionspace.execution.executor import Executor
from actionspace.execution.raised import passes_on
from actionspace.execution.ready import Ready
from actionspace.observation import ArtifactStore
from actionspace.outcomes import Outcome, Succeeded
from actionspace.pipeline._entry import Entry, FastCall
from actionspace.pipeline.calls import InFlight
from actionspace.pipeline.observe import observe, plain_observation
from actionspace.policy.labels import Label
from actionspace.trace.events import CompactCall, EventRecord, expand_call
from actionspace.trace.recorder import Recorder
from actionspace.trace.store_encoding import RAW_PREFIX_CHARS, bounded_raw, compact_raw
from actionspace.types import Observation, Provenance

__all__ = ["AppendCall", "Step", "begin", "holding", "parsed"]

_new = object.__new__
_log = logging.getLogger("actionspace")

AppendCall = Callable[[str, CompactCall, Sequence[EventRecord]], None]
"""A memory trace store's ``append_call``: where :func:`begin` hands a call's one record."""

Step = Observation | Coroutine[Any, Any, Observation]
"""What :func:`begin` gives: the observation, or the coroutine that ends the call."""

_INT_BOUND = 1 << 64
"""An ``int`` result below this in magnitude is shaped inline (its canonical text is its repr)."""
_INT_DIGESTS: dict[int, str] = {}
"""Digest of the canonical text of recent ``int`` results (cleared at ``_INT_MEMO`` entries)."""
_INT_MEMO = 4096


def begin(
    in_flight: InFlight | None,
    call: FastCall,
    rec: Recorder,
    node_id: str | None,
    blocking: bool,
    executor: Executor,
    artifacts: ArtifactStore | None,
    direct: AppendCall | None = None,
) -> Step:
    """Record the stages' events, run the tool and shape its observation, as the stages do: the
    observation when the tool ended without waiting, else the coroutine that ends the call
    (await it once, at once: the tool is registered in ``in_flight`` as waiting).

    The events are held as one compact call record
    (:data:`~actionspace.trace.events.CompactCall`) that the trace store expands into the same
    events when read; an ``ok`` observation of a plain result, shaped without cutting anything,
    is folded into it as well. ``direct``: the memory trace store's ``append_call`` when the
    run's stores are in memory; such a record is then handed to it here, as
    ``RunRegistry.flush`` would hand it, when flushing it would do nothing else (the run's state
    as saved, no label to mark, no other record, the tool never registered as waiting), and
    ``rec`` is left empty.
    """
    entry = call.entry
    run = entry.run
    seq = run.seq
    ts = time.time()
    raw = call.raw
    model: str | bytes | dict[str, Any] | tuple[str, bytes | dict[str, Any]] | None
    if raw is not None:
        if type(raw) is str:
            model = raw if len(raw) <= RAW_PREFIX_CHARS else bounded_raw(raw, artifacts)
        else:  # a provider object, with its format when not the commonest
            model = compact_raw(raw, artifacts)
            if call.fmt != "openai_chat":
                model = (call.fmt, model)
        numbers: tuple[int, ...] = (next(seq), next(seq), next(seq), next(seq), next(seq))
        span = 4
    else:
        model = None
        numbers, span = (next(seq), next(seq), next(seq), next(seq)), 3
    first = numbers[0]
    node = node_id or f"n{next(run.nodes)}"
    call_id = call.call_id or f"{run.run_id}:{node}"
    rec.call_id = call_id
    flow = run.flow
    args = call.arguments
    joined = entry.joined  # Entry.output, read without its call while the run label is the one held
    out = (joined[1] if joined[0] is flow.context else entry.output(flow.context, args)) if args else None
    label, within, tags = entry.bare if out is None else out
    flow.pending[call_id] = label
    held: CompactCall = (first, ts, call_id, entry.shape, model, call.name, call.call_id, node, -1, ts, None)
    compact = numbers[-1] - first == span
    if not compact:  # another thread numbered events of this run in between: keep the numbers
        events = expand_call(held)
        numbered = zip(numbers, events, strict=True)
        rec.records.extend((n, k, t, c, d) for n, (_, k, t, c, d) in numbered)
    elif rec.call is None:
        rec.call = held
    else:
        rec.add_call(held)
    spec = entry.spec
    if blocking:
        outcome = executor.run(spec, args, rec.retry)
        return tail(
            call, rec, outcome, None, held, compact, label, within, tags, node, artifacts, direct, in_flight
        )
    if not entry.inline:
        if spec.blocking and in_flight is not None:  # on a worker thread: it waits
            in_flight.waits(rec)
        return ended(
            executor, None, None, None, None, call, rec, held, compact, label, within, tags, node, artifacts
        )
    # An async tool's first step, taken here: most finish without waiting.
    start = time.monotonic()
    coro: Any = None
    try:
        coro = spec.fn(**args)  # type: ignore[misc]
        try:
            yielded = coro.send(None)
        except StopIteration as stop:
            value = stop.value
            coro = None
        except BaseException:
            coro.close()
            raise
    except BaseException as exc:  # a BaseException of the tool's own is its failure (raised.py)
        if passes_on(exc, in_task=True):
            raise
        return ended(
            executor, start, None, None, exc, call, rec, held, compact, label, within, tags, node, artifacts
        )
    if coro is None:  # it ended: the observation now, outside the tool's own failures
        return tail(
            call, rec, None, value, held, compact, label, within, tags, node, artifacts, direct, in_flight
        )
    if in_flight is not None:  # it waits: close() may cut it (pipeline/calls.py)
        in_flight.waits(rec)
    return ended(
        executor, start, coro, yielded, None, call, rec, held, compact, label, within, tags, node, artifacts
    )


async def ended(
    executor: Executor,
    start: float | None,
    coro: Any,
    yielded: Any,
    failure: BaseException | None,
    call: FastCall,
    rec: Recorder,
    held: CompactCall,
    compact: bool,
    label: Label,
    within: Label | None,
    tags: tuple[str, ...],
    node: str,
    artifacts: ArtifactStore | None,
) -> Observation:
    """The rest of a call whose tool did not end at its first step (begun at ``start``): ``coro``
    waited, having yielded ``yielded``, or the first step raised ``failure``; or the tool was not
    run yet (no ``start``: a sync tool, run by the executor)."""
    spec, args = call.entry.spec, call.arguments
    outcome: Outcome
    if start is None:
        outcome = await executor.arun(spec, args, rec.retry)
    elif failure is not None:
        outcome = await executor.acontinue(spec, args, rec.retry, start, failure=failure)
    else:
        try:
            outcome = await executor.acontinue(spec, args, rec.retry, start, coro=coro, yielded=yielded)
        except BaseException as exc:  # a BaseException of the tool's own is its failure (raised.py)
            if passes_on(exc, in_task=True):
                raise
            outcome = await executor.acontinue(spec, args, rec.retry, start, failure=exc)
    return tail(call, rec, outcome, None, held, compact, label, within, tags, node, artifacts, None, None)


def tail(
    call: FastCall,
    rec: Recorder,
    outcome: Outcome | None,
    value: Any,
    held: CompactCall,
    compact: bool,
    label: Label,
    within: Label | None,
    tags: tuple[str, ...],
    node: str,
    artifacts: ArtifactStore | None,
    direct: AppendCall | None,
    in_flight: InFlight | None,
) -> Observation:
    """The observation of a call whose tool ended (``outcome``, or None for ``value`` returned by
    its first step), its record completed and, with ``direct``, handed to the store."""
    if outcome is None:
        attempts = 1
    elif type(outcome) is Succeeded:
        value, attempts = outcome.value, outcome.attempts
    else:
        attempts = 0
    entry = call.entry
    spec, run = entry.spec, entry.run
    call_id: str = held[2]  # type: ignore[assignment]  # begin set it, never None
    flow = run.flow
    if compact and attempts == 1 and rec.call is held:
        now = time.time()
        plain: Any
        if type(value) is int and entry.ints and -_INT_BOUND < value < _INT_BOUND:
            # What plain_observation makes of it: the canonical text is the int's repr.
            digest = _INT_DIGESTS.get(value)
            if digest is None:
                if len(_INT_DIGESTS) >= _INT_MEMO:
                    _INT_DIGESTS.clear()
                digest = _INT_DIGESTS[value] = sha256(int.__repr__(value).encode()).hexdigest()
            provenance = _new(Provenance)
            provenance.__dict__.update(
                fetched_at=now, resource_version=None, trust=label.integrity, labels=tags
            )
            plain = _new(Observation)  # every field is already checked, as observe() does
            plain.__dict__.update(
                call_id=call_id,
                tool=spec.name,
                tool_version=spec.version,
                data=value,
                content_hash=digest,
                provenance=provenance,
            )
        else:
            plain = plain_observation(spec, call_id, value, label, artifacts, now, tags)
        if isinstance(plain, Observation):  # folded into the call's record
            rec.call = final = (*held[:8], next(run.seq), now, plain.content_hash)
            flow.observed_as(plain, label, within)
            if (
                direct is not None
                and not rec.records
                and not flow.pending
                and (in_flight is None or rec not in in_flight.calls)
                and run.mark() == run.saved
            ):
                context = flow.context
                if context.readers is None and context.confidentiality != "secret":
                    rec.call = None  # handed to the store here: nothing is left to flush
                    point("during_observation_write")
                    try:
                        direct(run.run_id, final, ())
                    except Exception:
                        _log.exception(
                            "actionspace: the trace store rejected %d events of run %s", 0, run.run_id
                        )
            return plain
        shaped = plain  # shaped and cut (or None): observe() takes it as it is
    else:
        shaped = None
    args = call.arguments
    ready = Ready(entry.compiled, call_id, node, args, args, None, None, label)
    obs = observe(
        ready,
        Succeeded(value, 1) if outcome is None else outcome,
        artifacts=artifacts,
        rec=rec,
        shaped=shaped,
    )
    flow.observed_as(obs, label, within)
    return obs


def holding(run: RunState, call_id: str, record: CompactCall) -> Recorder:
    """The recorder begin would hold at this point: the call's id set, its record held
    (pipeline/_direct.py, handing a call on)."""
    rec = Recorder(run, call_id)
    rec.call = record
    return rec


def parsed(entry: Entry, name: str, call_id: str | None, args: dict[str, Any], raw: str) -> FastCall:
    """The parsed call, as FastPath.take makes it (pipeline/_direct.py, for what goes on through
    begin's functions)."""
    call = object.__new__(FastCall)
    call.entry, call.name, call.call_id, call.arguments, call.raw, call.fmt = (
        entry,
        name,
        call_id,
        args,
        raw,
        "openai_chat",
    )
    return call
