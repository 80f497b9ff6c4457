"""A plain plan node on the precompiled path, with no call object between the plan and the tool.

:meth:`Engine.anode <actionspace.pipeline.Engine.anode>` takes a node's call through a
``ToolCall``, a ``CallInput``, a ``Ready`` and three coroutines (the engine's, the precompiled
execution's, the executor's) before the tool runs; for a plan of a thousand instant nodes those
objects and frames cost more than the scheduling itself. :func:`plain_node` decides the same
thing from the node's own fields (the conditions of ``FastPath.ready``: a simple tool without
side effects, a resolution the run made already, arguments the schema accepts, no provenance),
records the same events (``authorized``, ``validated``, ``proposed``, ``dispatched``, then the
``observation``), held as one compact record that the trace store expands when read
(:data:`~actionspace.trace.events.CompactNode`; an ``ok`` plain observation is folded into it;
an ``int`` result of a tool that shapes ints plainly is put in its envelope directly, as the
single call's path does), and steps an async tool's coroutine once on the calling path: an instant tool
ends without any coroutine of ours. One that waits is resumed under its timeout
(``Executor.resume``); one that fails, times out or is not async is handed to the executor
(``Executor.acontinue`` / ``Executor.arun``), which types its errors and retries it as it would on
the general path. ``tests/pipeline/test_fast_nodes.py`` compares both.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Coroutine, Mapping
from hashlib import sha256
from itertools import islice
from typing import TYPE_CHECKING, Any, TypeAlias

from actionspace._epoch import EPOCH
from actionspace._json_values import _FLAT_KEYS, _TOO_BIG, unfit_arguments
from actionspace.discovery.runs import RunState
from actionspace.execution.executor import Executor
from actionspace.execution.raised import passes_on
from actionspace.execution.ready import Ready
from actionspace.observation import ArtifactStore
from actionspace.outcomes import Outcome, Succeeded
from actionspace.pipeline._run import _INT_BOUND, _INT_DIGESTS, _INT_MEMO
from actionspace.pipeline.observe import observe, observe_ready, plain_observation
from actionspace.policy.labels import Label
from actionspace.policy.principal import Principal
from actionspace.trace.events import expand_node
from actionspace.trace.recorder import Recorder
from actionspace.types import Observation, Provenance

if TYPE_CHECKING:
    from actionspace.pipeline.engine import Engine
    from actionspace.pipeline.fast import Entry

__all__ = ["Kept", "plain_node"]

_new = object.__new__

Kept: TypeAlias = tuple["Entry", int, "tuple[tuple[str, type], ...] | None"]
"""A plan's entry of one tool (:func:`_entry`): the entry, the :data:`~actionspace._epoch.EPOCH` read
before it was checked, and ``Entry.plain`` when a node's arguments may be checked by it alone
(flat and few enough, every name ASCII without U+0000: what ``unfit_arguments`` reads of a key)."""

_TOO_LOW = -_TOO_BIG
"""Below the ints ``unfit_arguments`` allows, made once: ``-_TOO_BIG`` made a new integer of
14,285 bits (a copy of all its digits) for every ``int`` argument checked."""
_INT_LOW = -_INT_BOUND
"""Below the ints put in their envelope directly, made once (``-_INT_BOUND`` was a new int each)."""

_WAITS: Any = object()
"""The value of a tool whose first step did not end its coroutine."""


def plain_node(
    engine: Engine,
    run: RunState,
    name: str,
    arguments: dict[str, Any],
    node_id: str,
    principal: Principal,
    rec: Recorder,
    kept: dict[str, Kept] | None = None,
) -> Observation | Coroutine[Any, Any, Observation] | None:
    """The node's observation, or a coroutine giving it once the tool answered; None (nothing
    recorded) when the call does not qualify and the caller takes :meth:`Engine.anode`.

    ``Engine.plain_node`` is this function itself (no forwarding frame per node): the engine's
    precompiled path, stages, executor and artifact store are read here, on every call, so a
    stage added mid-plan is seen by the next node. ``rec.call_id`` is the node's call id;
    ``arguments`` is the call's own copy (a ``dict``). ``kept``: the plan's entries by tool, each
    with the :data:`~actionspace._epoch.EPOCH` it was checked at, for one run and principal; an
    entry kept at the current epoch is taken as it is (nothing it was decided from changed since).
    """
    fast = engine.fast
    if not fast.enabled or not name:
        return None
    got = kept.get(name) if kept is not None else None
    if got is None or got[1] != EPOCH[0]:
        got = _entry(engine, run, name, principal, kept)
        if got is None:
            return None
    entry, _, typed = got
    # arguments of exactly the tool's flat names and types (Kept.typed), each int within the digits
    # unfit_arguments allows and each str ASCII without U+0000, are what unfit_arguments and the
    # schema (Entry.plain) both accept: neither is asked; anything else asks both, as before
    fits = False
    if typed is not None and len(arguments) == len(typed):
        fits = True
        try:
            for key, want in typed:
                value = arguments[key]
                kind = type(value)  # (compared apart: the value keeps its type for the checks below)
                if kind is not want:
                    fits = False
                    break
                if want is int:
                    if not _TOO_LOW < value < _TOO_BIG:
                        fits = False
                        break
                elif want is str and (not value.isascii() or "\x00" in value):
                    fits = False
                    break
        except KeyError:
            fits = False
    if not fits:
        check = entry.check
        if (
            unfit_arguments(arguments) is not None  # the stages refuse it
            # the schema's own check when it settles the arguments (FastPath.take's), else the tool's
            or not (entry.compiled.validator.is_valid if check is None else check)(arguments)
            or (
                entry.floats
                and float in map(type, arguments.values())
                and not entry.compiled.validator.is_valid(arguments)
            )
        ):
            return None
    spec = entry.spec
    call_id = rec.call_id
    assert call_id is not None
    flow = run.flow
    context = flow.context
    joined = entry.joined  # Entry.output, read without its call when the run label is the one held
    output = joined[1] if arguments and joined[0] is context else entry.output(context, arguments)
    label = output[0]
    flow.pending[call_id] = label
    seq, shape = run.seq, entry.shape
    ts = time.time()
    # the events of FastPath.ready, then record_proposed's, then the execution's: held as one
    # compact record (trace/events.py CompactNode) while they are numbered in a row and the
    # node's own label marks none of them (see Recorder.flush)
    first, second, third, last = islice(seq, 4)  # four numbers taken in one C call
    # ``arguments`` is the call's own copy, never changed (the tool gets its own keyword dict)
    compact = last - first == 3 and label.readers is None and label.confidentiality != "secret"
    if not compact:  # numbered apart (another thread numbered events of this run in between), or labelled
        numbers = (first, second, third, last)
        events = expand_node((first, ts, call_id, shape, arguments, node_id, -1, 0.0, None))
        rec.records.extend((n, k, t, c, d) for n, (_, k, t, c, d) in zip(numbers, events, strict=True))
    if not entry.inline:
        if compact:
            rec.nodes = [(first, ts, call_id, shape, arguments, node_id, -1, 0.0, None)]
        outcome = engine.executor.arun(spec, arguments, rec.retry)
        return _later(entry, call_id, node_id, arguments, label, output[2], rec, engine.artifacts, outcome)
    start = time.monotonic()
    try:
        coro = spec.fn(**arguments)  # type: ignore[misc]
        try:
            yielded = coro.send(None)
        except StopIteration as stop:
            value = stop.value
        except BaseException:
            coro.close()
            raise
        else:
            value = _WAITS
            if getattr(yielded, "_asyncio_future_blocking", None):
                # taken, as a task takes the future it is handed: until _resumed hands it to this
                # call's task, another call may await the same future (see _resumed)
                yielded._asyncio_future_blocking = False
    except BaseException as exc:  # a BaseException of the tool's own is its failure (raised.py)
        if compact:
            rec.nodes = [(first, ts, call_id, shape, arguments, node_id, -1, 0.0, None)]
        if passes_on(exc, in_task=True):
            raise
        pending = engine.executor.acontinue(spec, arguments, rec.retry, start, failure=exc)
        return _later(entry, call_id, node_id, arguments, label, output[2], rec, engine.artifacts, pending)
    if compact and value is not _WAITS:
        # it answered at once: _done, with the compact record made once and the ``ok``
        # observation folded in
        now = time.time()
        plain: Any
        if type(value) is int and entry.ints and _INT_LOW < value < _INT_BOUND:
            # the envelope of an int result written out (here and in _done): no frame of its own
            # per node. Its canonical text is its repr, whose digest is remembered (as the single
            # call's path does, pipeline/_run.py)
            digest = _INT_DIGESTS.get(value) or _int_digest(value)
            # the fields given as one dict, not as keywords: a keyword call of ``update`` builds
            # a dict of them first, then merges it
            provenance = _new(Provenance)
            provenance.__dict__.update(
                {"fetched_at": now, "resource_version": None, "trust": label.integrity, "labels": output[2]}
            )
            plain = _new(Observation)  # every field is already checked, as observe() does
            plain.__dict__.update(
                {
                    "call_id": call_id,
                    "tool": spec.name,
                    "tool_version": spec.version,
                    "data": value,
                    "content_hash": digest,
                    "provenance": provenance,
                }
            )
            rec.nodes = [(first, ts, call_id, shape, arguments, node_id, next(seq), now, digest)]
            return plain  # type: ignore[no-any-return]
        try:
            plain = plain_observation(spec, call_id, value, label, engine.artifacts, now, output[2])
        except BaseException:
            rec.nodes = [(first, ts, call_id, shape, arguments, node_id, -1, 0.0, None)]
            raise
        if isinstance(plain, Observation):
            rec.nodes = [(first, ts, call_id, shape, arguments, node_id, next(seq), now, plain.content_hash)]
            return plain
        rec.nodes = [(first, ts, call_id, shape, arguments, node_id, -1, 0.0, None)]
        ready = Ready(entry.compiled, call_id, node_id, arguments, arguments, None, None, label)
        if plain is not None:  # shaped and cut: observe() takes it as it is
            return observe(ready, Succeeded(value, 1), artifacts=engine.artifacts, rec=rec, shaped=plain)
        return observe_ready(ready, Succeeded(value, 1), rec, engine.artifacts)
    if compact:  # its tool waits
        rec.nodes = [(first, ts, call_id, shape, arguments, node_id, -1, 0.0, None)]
    elif value is not _WAITS:  # it answered at once, its events recorded one by one (_done)
        return _done(entry, call_id, node_id, arguments, label, output[2], None, rec, engine.artifacts, value)
    artifacts, executor, tags = engine.artifacts, engine.executor, output[2]
    return _resumed(
        entry, call_id, node_id, arguments, label, tags, rec, artifacts, executor, coro, yielded, start
    )


def _entry(
    engine: Engine, run: RunState, name: str, principal: Principal, kept: dict[str, Kept] | None
) -> Kept | None:
    """The valid entry of ``name`` without side effects (``FastPath.entry``, asked once per plan
    and tool), with the epoch read before it was checked and the names and types its arguments
    are checked by, kept in ``kept``; None: the call takes the stages (an entry with effects is
    never kept, nor taken here)."""
    epoch = EPOCH[0]  # before the checks: a change made while they run moves it past this value
    entry = engine.fast.entry(run, name, principal, engine._ordered)
    if entry is None or entry.effects:
        return None
    plain = entry.plain
    typed = (
        plain
        if plain is not None
        and len(plain) <= _FLAT_KEYS  # more: unfit_arguments walks them whole, their size counted
        and all(key.isascii() and "\x00" not in key for key, _ in plain)
        else None
    )
    got = (entry, epoch, typed)
    if kept is not None:
        kept[name] = got
    return got


def _int_digest(value: int) -> str:
    """The digest of ``value``'s canonical text (its repr), remembered (pipeline/_run.py's memo)."""
    if len(_INT_DIGESTS) >= _INT_MEMO:
        _INT_DIGESTS.clear()
    digest = _INT_DIGESTS[value] = sha256(int.__repr__(value).encode()).hexdigest()
    return digest


async def _later(
    entry: Entry,
    call_id: str,
    node_id: str,
    arguments: Mapping[str, Any],
    label: Label,
    tags: tuple[str, ...],
    rec: Recorder,
    artifacts: ArtifactStore | None,
    outcome: Awaitable[Outcome],
) -> Observation:
    return _done(entry, call_id, node_id, arguments, label, tags, await outcome, rec, artifacts)


async def _resumed(
    entry: Entry,
    call_id: str,
    node_id: str,
    arguments: Mapping[str, Any],
    label: Label,
    tags: tuple[str, ...],
    rec: Recorder,
    artifacts: ArtifactStore | None,
    executor: Executor,
    coro: Coroutine[Any, Any, Any],
    yielded: Any,
    start: float,
) -> Observation:
    """:func:`_later` of ``executor.acontinue(..., coro=coro, yielded=yielded)``, with the
    executor's frame entered only when the tool failed or timed out (then it types the failure
    and retries): a tool that answers is resumed through this frame and the timeout's alone.

    The tool's first step was taken earlier, often before this call's task ran (a plan begins a
    node's call at once, then its task continues it), and other calls may have begun meanwhile.
    A future the step waits on was taken then (:func:`plain_node` clears its "awaited" flag, as a
    task does with the future handed to it): another call awaiting the same future (one fetch
    shared by every call) finds it free to await, where asyncio refuses a second await of a
    future still flagged. The flag is set again here, as the await set it, for this task."""
    if getattr(yielded, "_asyncio_future_blocking", None) is False:
        yielded._asyncio_future_blocking = True
    try:
        value = await executor.resume(entry.spec, coro, yielded, start)
    except Exception as exc:
        outcome = await executor.acontinue(entry.spec, arguments, rec.retry, start, failure=exc)
        return _done(entry, call_id, node_id, arguments, label, tags, outcome, rec, artifacts)
    return _done(entry, call_id, node_id, arguments, label, tags, None, rec, artifacts, value)


def _done(
    entry: Entry,
    call_id: str,
    node_id: str,
    arguments: Mapping[str, Any],
    label: Label,
    tags: tuple[str, ...],
    outcome: Outcome | None,
    rec: Recorder,
    artifacts: ArtifactStore | None,
    value: Any = None,
) -> Observation:
    """What ``FastPath.execute`` makes of the outcome (:func:`observe_ready`); an ``ok`` plain
    observation of one attempt is folded into the node's compact record when it holds one.
    ``tags``: ``label.tags()`` (the entry's output holds them: not made again per node).
    ``outcome`` None: the first attempt returned ``value``."""
    shaped = None
    if outcome is None or (type(outcome) is Succeeded and outcome.attempts == 1):
        nodes = rec.nodes
        if outcome is not None:
            value = outcome.value
        if nodes:
            now = time.time()
            plain: Any
            if type(value) is int and entry.ints and _INT_LOW < value < _INT_BOUND:
                # as on the instant path above, written out: no frame of its own per node
                digest = _INT_DIGESTS.get(value) or _int_digest(value)
                provenance = _new(Provenance)
                provenance.__dict__.update(
                    {"fetched_at": now, "resource_version": None, "trust": label.integrity, "labels": tags}
                )
                spec = entry.spec
                plain = _new(Observation)  # every field is already checked, as observe() does
                plain.__dict__.update(
                    {
                        "call_id": call_id,
                        "tool": spec.name,
                        "tool_version": spec.version,
                        "data": value,
                        "content_hash": digest,
                        "provenance": provenance,
                    }
                )
                h = nodes[0]
                nodes[0] = (h[0], h[1], h[2], h[3], h[4], h[5], next(rec.run.seq), now, digest)
                return plain  # type: ignore[no-any-return]
            plain = plain_observation(entry.spec, call_id, value, label, artifacts, now, tags)
            if isinstance(plain, Observation):
                h = nodes[0]
                nodes[0] = (h[0], h[1], h[2], h[3], h[4], h[5], next(rec.run.seq), now, plain.content_hash)
                return plain
            shaped = plain  # shaped and cut (or None): observe() takes it as it is
        if outcome is None:
            outcome = Succeeded(value, 1)
    ready = Ready(entry.compiled, call_id, node_id, arguments, arguments, None, None, label)
    if shaped is not None:
        return observe(ready, outcome, artifacts=artifacts, rec=rec, shaped=shaped)
    return observe_ready(ready, outcome, rec, artifacts)
