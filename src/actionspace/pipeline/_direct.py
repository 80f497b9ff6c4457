"""The commonest simple call in one frame: the JSON text of one OpenAI ``tool_calls`` entry,
with no escape, for a tool whose precompiled entry is valid, in a run whose stores are in memory
(``Engine.quick``, made once per engine by :func:`direct_caller`).

What ``openai_entry_parts``, :meth:`FastPath.take <actionspace.pipeline.fast.FastPath.take>`,
:func:`~actionspace.pipeline._run.begin` and :func:`~actionspace.pipeline._run.tail` do for such
a call, written out in one function: each of those layers is a Python call with branches for
inputs this one never sees (provider objects, ``ToolCall``), and together they were most of the
call's interpreter work. Anything not read exactly as they read it goes back to
``Messages.quick`` before any state changed (or ends as None where ``take`` would); a blocking
sync tool (``ToolSpec.blocking``: a worker thread enforces its timeout) is begun by ``begin``, its
entry read once. Any other sync tool is called here as ``Executor.arun``'s attempt calls it, in
place of an async tool's first step (no thread, no timeout: ``blocking=False``); an awaitable it
hands back is stepped as an async tool's coroutine, timed from then
(``tests/pipeline/test_w92_direct_sync_tool.py``). Once the events are numbered, what is not the
common case (a tool that waits or fails, a result not shaped inline, another thread's events
in between, a bug of ours, a cancellation, a record the store cannot take now) goes on through
``ended`` and ``tail`` with the recorder ``begin`` would hold at that point. The record is handed
to the memory store as it keeps it (its shape as the store's number, cached in the entry). For
an ``int`` result the flow state's record (``FlowState.observed_as``), the run's ``mark()`` and
the store's append (``append_kept``, through its ``call_log``) are written out here too: each was a
call of its own on every call. The tool's first step is taken by the engine's driver
(``pipeline/_drive.py``), which receives a returned value without a ``StopIteration``. The
entry's validity is read whole once per value of ``actionspace._epoch.EPOCH`` (``Entry.checked``),
and plain arguments are passed by position when their names are the tool function's first
parameters (``Entry.positional``): no keyword dict is built and matched on each call.
``tests/pipeline/test_direct.py`` holds this function, the path it stands in for and the stages
equal over generated tools and calls, and covers each hand-over.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from hashlib import sha256
from inspect import isawaitable
from typing import TYPE_CHECKING, Any

from pydantic_core import from_json

from actionspace import _crash
from actionspace._crash import point
from actionspace._epoch import EPOCH
from actionspace._json_values import finite_numbers
from actionspace.execution.executor import _PLAIN, _await
from actionspace.execution.raised import passes_on
from actionspace.parse._fast import repeats_a_key
from actionspace.pipeline._direct_ends import KeepsCalls, begun, keeps, raised, stepped
from actionspace.pipeline._drive import DONE, driver, handed
from actionspace.pipeline._run import (
    _INT_BOUND,
    _INT_DIGESTS,
    _INT_MEMO,
    Step,
    _log,
    ended,
    holding,
    parsed,
    tail,
)
from actionspace.policy.flow import MAX_REMEMBERED
from actionspace.policy.labels import PUBLIC_TRUSTED
from actionspace.policy.principal import Principal
from actionspace.trace.events import expand_call
from actionspace.trace.recorder import Recorder
from actionspace.trace.store_encoding import RAW_PREFIX_CHARS
from actionspace.types import SHOWN_UNDER, Observation, Provenance

if TYPE_CHECKING:
    from actionspace.pipeline.messages import Messages

__all__ = ["KeepsCalls", "Quick", "begun", "direct_caller", "keeps", "raised", "stepped"]

_time = time.time
_monotonic = time.monotonic
_INT_LOW = -_INT_BOUND
_digest_of = _INT_DIGESTS.get  # bound once (the memo is cleared in place, never replaced)
_to_end = OrderedDict.move_to_end  # its lookup on the instance is not specialized


class _MadeProvenance:
    """A :class:`Provenance` being made: its fields set as plain attributes (the interpreter's
    specialized stores), then ``__class__`` assigned, which gives the instance its dict. That is
    cheaper than ``object.__new__`` (a call through its argument tuple) and stores into the new
    instance's ``__dict__``; the layouts match (``__class__`` assignment checks it: a class that
    stopped matching raises TypeError here at import, not per call)."""

    fetched_at: float
    resource_version: None
    trust: str
    labels: tuple[str, ...]


class _MadeObservation:
    """An :class:`Observation` being made, as :class:`_MadeProvenance`."""

    call_id: str
    tool: str
    tool_version: str | None
    data: int
    content_hash: str
    provenance: Provenance


_MadeProvenance().__class__ = Provenance  # type: ignore[assignment]
_MadeObservation().__class__ = Observation  # type: ignore[assignment]


Quick = Callable[
    [Any, str, "str | None", "Principal | None"],
    "Observation | Coroutine[Any, Any, Observation | None] | None",
]
"""``Engine.quick``: the observation, the coroutine that ends the call, or None (not a simple call)."""


def direct_caller(messages: Messages) -> Quick:
    """``Messages.quick`` with the common case written out in a frame of its own (see the module
    docstring); anything else is handed to ``messages.quick`` before any state changed. The
    engine's run registry, precompiled path and stages are fixed for its life: read here once."""
    engine = messages.engine
    runs, fast, general = engine.runs, engine.fast, messages.quick
    in_flight = messages.in_flight
    live, entries = runs.live, fast._entries
    drivers = [driver()]
    run_of = live.get  # bound once: an OrderedDict's method is looked up unspecialized on every call

    def quick(
        raw: Any, run_id: str, node_id: str | None, who: Principal | None
    ) -> Observation | Coroutine[Any, Any, Observation | None] | None:
        run = run_of(run_id)
        if (
            run is None
            or type(raw) is not str
            or node_id is not None
            or not runs.in_memory
            or engine.sink is not messages._sink
            or len(raw) > RAW_PREFIX_CHARS
            or "\\u" in raw
            or not raw.isascii()
        ):
            return general(raw, run_id, node_id, who)
        store = messages.store
        if store is None:
            return general(raw, run_id, node_id, who)
        # The entry, read as parse/_fast.openai_entry_parts reads text with no escape and no key
        # given twice (anything else: that reading decides).
        try:
            value = from_json(raw, allow_inf_nan=False)
        except ValueError:
            return general(raw, run_id, node_id, who)
        # An entry as a model sends it: its id, type and function, read by subscripts (an entry
        # without one of them, or with more, is read by Messages.quick). ``raw`` parsed, so it has
        # a first character; text starting with anything but "{" is not one this frame reads.
        if type(value) is not dict or len(value) != 3 or raw[0] != "{":
            return general(raw, run_id, node_id, who)
        try:
            given = value["id"]
            kind = value["type"]
            function = value["function"]
            name = function["name"]
            text = function["arguments"]
        except (KeyError, TypeError):  # a missing key, or a function that is no object
            return general(raw, run_id, node_id, who)
        if (
            kind != "function"
            or type(name) is not str
            or (given is not None and type(given) is not str)
            or type(text) is not str
        ):
            return general(raw, run_id, node_id, who)
        try:
            args = from_json(text, allow_inf_nan=False)
        except ValueError:
            return general(raw, run_id, node_id, who)
        if text[0] != "{" or type(args) is not dict:  # parsed text from "{" is an object
            return general(raw, run_id, node_id, who)
        given_args = len(args)
        if raw.count(":") != 3 + len(function) + given_args and repeats_a_key(raw, text):
            return None  # the parser refuses it (``duplicate_key``)
        call_id = given or None  # an empty id is no id, as parse reads it
        # The entry's validity, as FastPath.take reads it. The name is not stripped: a resolved
        # name has no space around it, so one that has misses.
        principal = who or run.principal
        ordered = engine._ordered
        entry = entries.get((id(run), name))
        # Kept while its stamp is EPOCH's value (actionspace/_epoch.py: the run's resolution of
        # the name under the catalog's generation, the flow policy, the guard and the cursor key
        # move it when they change) and what it does not cover is the call's; else checked whole
        # and stamped (FastPath.stamped, as pipeline/_write_admit.py asks it; one it would build
        # anew is built by the general path, as before).
        if (
            entry is None
            or entry.checked != EPOCH[0]
            or entry.run is not run
            or entry.principal is not principal
            or entry.ordered is not ordered
            or run.disclosure
            or not fast.enabled
        ):
            entry = fast.stamped(run, name, principal, ordered, built=True)
            if entry is None:
                return general(raw, run_id, node_id, who)
        if entry.effects:
            return None  # as FastPath.take: the ledger runs it, after the stages
        # Arguments that are exactly the names of a flat schema, each of exactly its Python type
        # (Entry.plain), are valid with nothing to settle: the compiled schema is not asked.
        # Their values are kept in the tool's parameter order when the names are its first
        # parameters (Entry.positional): passed by position, no keyword dict is built and matched.
        plain = entry.plain
        values: list[Any] | None = None
        if plain is not None and given_args == len(plain):
            try:
                if entry.positional:
                    values = []
                    for key, want in plain:
                        value = args[key]
                        if type(value) is not want:
                            plain = values = None
                            break
                        values.append(value)
                else:
                    for key, want in plain:
                        if type(args[key]) is not want:
                            plain = None
                            break
            except KeyError:
                plain = values = None
        else:
            plain = None
        if plain is None:
            check = entry.check
            if (
                not (entry.finite or finite_numbers(args))
                or not (entry.compiled.validator.is_valid if check is None else check)(args)
                or (
                    entry.floats
                    and float in map(type, args.values())
                    and not entry.compiled.validator.is_valid(args)
                )
            ):
                return None  # as FastPath.take: the stages refuse it
        spec = entry.spec
        sync = not entry.inline  # run here too unless it is blocking (ToolSpec.blocking: a thread)
        if sync and spec.blocking:  # as Messages.quick runs it
            return begun(messages, parsed(entry, name, call_id, args, raw), run, None, messages._append)
        # Taken: the events are numbered and the tool's first step runs, as begin does.
        seq = run.seq
        ts = now = _time()
        first, second, third, fourth, fifth = next(seq), next(seq), next(seq), next(seq), next(seq)
        node = f"n{next(run.nodes)}"
        cid = call_id or f"{run.run_id}:{node}"
        flow = run.flow
        joined = entry.joined  # Entry.output without its call while the run label is the one held
        out = (
            (joined[1] if joined[0] is flow.context else entry.output(flow.context, args))
            if args
            else entry.bare
        )
        label, within, tags = out
        flow.pending[cid] = label
        obs_seq, digest = -1, None  # the call's record: held as begin holds it, until the tool ended
        rec: Recorder | None = None
        compact = fifth - first == 4
        if not compact:  # another thread numbered events of this run in between: keep the numbers
            rec = Recorder(run, cid)
            held = (first, ts, cid, entry.shape, raw, name, call_id, node, -1, ts, None)
            numbered = zip((first, second, third, fourth, fifth), expand_call(held), strict=True)
            rec.records.extend((n, k, t, c, d) for n, (_, k, t, c, d) in numbered)
        step: Step
        try:
            start = _monotonic()
            coro: Any = None
            try:
                coro = spec.fn(**args) if values is None else spec.fn(*values)  # type: ignore[misc]
                if sync and (type(coro) in _PLAIN or not isawaitable(coro)):  # as Executor._aattempt
                    result, coro = coro, None
                else:  # an async tool's coroutine, or an awaitable a sync tool handed back
                    if sync:  # awaited as Executor._aattempt awaits it: timed from here
                        coro, start = _await(coro), _monotonic()
                    try:  # the engine's driver (pipeline/_drive.py), taken whole: no other call shares it
                        item = drivers.pop()
                    except IndexError:  # in use: a tool's first step called again, or another thread's call
                        item = None
                    try:
                        if item is None:
                            yielded = coro.send(None)
                        else:
                            drive, box, send = item
                            yielded = send(coro)
                            if yielded is DONE:
                                result = box[0]
                                box[0] = coro = None
                                drivers.append(item)
                            else:  # it waits inside the driver, which now ends as its coroutine would
                                handed(box)
                                coro = drive
                                drivers.append(driver())
                    except StopIteration as stop:
                        result = stop.value
                        coro = None
                    except BaseException:
                        if item is not None and not drivers:  # the tool's failure ended the driver too
                            drivers.append(driver())
                        coro.close()
                        raise
            except BaseException as exc:  # a BaseException of the tool's own is its failure (raised.py)
                if passes_on(exc, in_task=True):
                    raise
                held = (first, ts, cid, entry.shape, raw, name, call_id, node, -1, ts, None)
                rec = rec or holding(run, cid, held)
                call = parsed(entry, name, call_id, args, raw)
                rest = (compact, label, within, tags, node, engine.artifacts)
                step = ended(engine.executor, start, None, None, exc, call, rec, held, *rest)
            else:
                if coro is not None:  # it waits: close() may cut it (pipeline/calls.py)
                    held = (first, ts, cid, entry.shape, raw, name, call_id, node, -1, ts, None)
                    rec = rec or holding(run, cid, held)
                    in_flight.waits(rec)
                    call = parsed(entry, name, call_id, args, raw)
                    rest = (compact, label, within, tags, node, engine.artifacts)
                    step = ended(engine.executor, start, coro, yielded, None, call, rec, held, *rest)
                elif compact and type(result) is int and entry.ints and _INT_LOW < result < _INT_BOUND:
                    # What _run.tail makes of it: the canonical text is the int's repr.
                    now = _time()
                    digest = _digest_of(result)
                    if digest is None:
                        if len(_INT_DIGESTS) >= _INT_MEMO:
                            _INT_DIGESTS.clear()
                        digest = _INT_DIGESTS[result] = sha256(int.__repr__(result).encode()).hexdigest()
                    # Every field is already checked, as observe() does; set in the order observe()
                    # sets them on a plain instance, which then takes its class (_MadeProvenance).
                    provenance: Any = _MadeProvenance()
                    provenance.fetched_at = now
                    provenance.resource_version = None
                    provenance.trust = label.integrity
                    provenance.labels = tags
                    provenance.__class__ = Provenance
                    made: Any = _MadeObservation()
                    made.call_id = cid
                    made.tool = tool = spec.name
                    made.tool_version = spec.version
                    made.data = result
                    made.content_hash = digest
                    made.provenance = provenance
                    made.__class__ = Observation
                    obs: Observation = made
                    obs_seq = next(seq)
                    # flow.observed_as(obs, label, within), written out for an observation with no
                    # items and no artifact: while ``within`` is the run label and ``label`` is
                    # public or its call ids are at their cap, the record is the call id's alone.
                    # The locks are taken by their methods, not ``with``: its special-method
                    # lookups and bound methods were a tenth of this branch's C work.
                    lock = flow._lock
                    lock.acquire()
                    try:
                        seen = flow.seen
                        try:  # noqa: SIM105  (pending.pop(cid, None) or suppress(): a call each)
                            del flow.pending[cid]
                        except KeyError:
                            pass
                        context = flow.context
                        if within is not context or (
                            label is not PUBLIC_TRUSTED and label is not flow._full and flow._room(label)
                        ):
                            flow._add(cid, label)
                            context = flow.context
                        again = cid in seen
                        seen[cid] = (label, result)
                        if again:
                            _to_end(seen, cid)
                        flow.tools[cid] = tool
                        shown = context.readers is None and context.confidentiality != "secret"
                        if not shown:
                            obs.__dict__[SHOWN_UNDER] = context.tags()
                        if len(seen) > MAX_REMEMBERED:
                            flow._trim()
                    finally:
                        lock.release()
                    if (
                        shown
                        and not flow.pending
                        and (
                            flow.version,
                            (
                                flow.label_version,
                                run.turn,
                                run.pins_version,
                                run.explicit_offer,
                                run.disclosure,
                                len(run.described),
                                id(run.principal),
                                run.errors_mark,
                            ),
                        )
                        == run.saved  # RunState.mark(), built here
                    ):  # handed to the store as RunRegistry.flush would: nothing else is left to flush
                        if _crash._target is not None:
                            point("during_observation_write")
                        try:
                            kept = entry.kept
                            if kept is not None and kept[0] is store:  # MemoryTraceStore.append_kept
                                record = (
                                    first,
                                    ts,
                                    cid,
                                    kept[1],
                                    raw,
                                    name,
                                    call_id,
                                    node,
                                    obs_seq,
                                    now,
                                    digest,
                                )
                                # Without the store's lock once the run has a next number: the
                                # number is read and raised with no call between (no switch of
                                # threads under the GIL, and ints run no code), before the record
                                # goes in, so no reader sees the record under a lower number.
                                # A free-threaded build's store holds no run in ``nexts``
                                # (MemoryTraceStore.call_log): every record takes the lock there.
                                nexts = kept[4]
                                rid = run.run_id
                                if rid in nexts:
                                    if obs_seq >= nexts[rid]:
                                        nexts[rid] = obs_seq + 1
                                    kept[2].append(record)
                                else:  # the run's first number: set under the store's lock
                                    store.append_kept(rid, record)
                            else:
                                index = store.shape_index(entry.shape)
                                record = (
                                    first,
                                    ts,
                                    cid,
                                    index,
                                    raw,
                                    name,
                                    call_id,
                                    node,
                                    obs_seq,
                                    now,
                                    digest,
                                )
                                store.append_kept(run.run_id, record)
                                entry.kept = (store, index, *store.call_log(run.run_id))
                        except Exception:
                            _log.exception(
                                "actionspace: the trace store rejected %d events of run %s", 0, run.run_id
                            )
                        return obs
                    step = obs
                else:
                    held = (first, ts, cid, entry.shape, raw, name, call_id, node, -1, ts, None)
                    rec = rec or holding(run, cid, held)
                    step = tail(
                        parsed(entry, name, call_id, args, raw),
                        rec,
                        None,
                        result,
                        held,
                        compact,
                        label,
                        within,
                        tags,
                        node,
                        engine.artifacts,
                        messages._append,
                        in_flight,
                    )
        except Exception as exc:  # a bug of ours or of the tool's wrapper: typed, never raised
            rec = rec or holding(
                run, cid, (first, ts, cid, entry.shape, raw, name, call_id, node, obs_seq, now, digest)
            )
            step = engine.internal(exc, rec, parsed(entry, name, call_id, args, raw).tool_call())
            flow.observed(step)
        except BaseException:  # what was recorded is still stored
            rec = rec or holding(
                run, cid, (first, ts, cid, entry.shape, raw, name, call_id, node, obs_seq, now, digest)
            )
            stored = raised(messages, rec, parsed(entry, name, call_id, args, raw), run)
            if stored is None:
                raise
            return stored
        if rec is None:  # an observation made here that the store could not take here
            rec = holding(
                run, cid, (first, ts, cid, entry.shape, raw, name, call_id, node, obs_seq, now, digest)
            )
        return stepped(messages, step, parsed(entry, name, call_id, args, raw), rec, run)

    return quick
