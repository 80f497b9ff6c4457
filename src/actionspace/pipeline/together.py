"""The calls of one model message run together where that changes nothing but the wall time.

A model that proposes several calls in one message (OpenAI's parallel tool calls, several
Anthropic ``tool_use`` blocks) proposed them all before it saw any result.
:func:`run_together` prepares them one after the other, in the message's order, and begins a
call's tool without waiting for the calls before it to end where their read/write sets commute
(DESIGN §7) and the call meets the decisions it would meet once they were shown
(:func:`prepares_alike`). Observations are shown to the flow state in the message's order, and
each call's events, recorded apart, join the message's in event order. Once the runtime closes
(``engine.runs.closed``), a call not begun yet is not sent: it ends ``cancelled``. Once one of
them writes, at most 128 calls are begun and not shown at a time; the next waits for them to be shown.
``tests/pipeline/test_message_together.py`` compares it with the calls run one after the other.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from actionspace.discovery.runs import RunState
from actionspace.errors import ActionError
from actionspace.execution.ready import Ready
from actionspace.pipeline.fast_effects import always_allows, has_effects, labels_decide
from actionspace.pipeline.stages import CallInput, Stage
from actionspace.plan.conflicts import call_sets, conflicting
from actionspace.policy.flow import FlowState, evaluate, spec_label
from actionspace.policy.flow_policies import Allow
from actionspace.policy.labels import PUBLIC_TRUSTED, Label
from actionspace.trace.recorder import Recorder
from actionspace.types import Observation, ToolCall

if TYPE_CHECKING:
    from actionspace.pipeline.engine import Engine
    from actionspace.pipeline.fast import FastPath

__all__ = ["prepares_alike", "run_together"]

_log = logging.getLogger("actionspace")

_BEGUN_AT_MOST = 128
"""Calls begun and not shown yet, at most, once one of them writes: each call is then checked for a
conflict with every one of them, so a message of thousands of calls costs checks in proportion to
its calls, not their square. Reads alone are never checked and run together however many."""


async def run_together(
    engine: Engine,
    calls: Sequence[ToolCall],
    run: RunState,
    rec: Recorder,
    given: Callable[..., CallInput],
) -> list[Observation]:
    """The observations of a message's several calls, in order, each call's tool begun
    without waiting for the calls before it to end where that changes no decision.

    The calls are prepared one after the other, in the message's order. A call is prepared
    while calls before it still run only when the stages decide it as they would once those
    calls were shown (:func:`prepares_alike`). Any other call first waits for every call before
    it to end and be shown, as a message's calls did one at a time. A call prepared runs in a
    task of its own once every call before it whose read/write sets it does not commute with has
    ended. ``rec`` is the message's recorder; ``given`` makes a call's input (:class:`CallInput`
    with the message's own fields).
    """
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
            if begun and ((writing and len(begun) >= _BEGUN_AT_MOST) or not _alike(engine, inp, unshown)):
                await _show(begun, out, rec, flow)  # as one call after the other
                unshown, writing = PUBLIC_TRUSTED, False
            ready: Ready | Observation
            try:
                ready = (
                    _not_begun(call, call.id or f"{run.run_id}:n{next(run.nodes)}")
                    if engine.runs.closed
                    else await engine.aprepare_input(inp)
                )
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
                        if b.task is not None and conflicting(b.reads, b.writes, reads, writes) is not None
                    ]
                    if writes or writing
                    else []
                )
                writing = writing or bool(writes)
                task = loop.create_task(_one(engine, ready, own, call, after))
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


def prepares_alike(fast: FastPath, inp: CallInput, ordered: Sequence[Stage], unshown: Label | None) -> bool:
    """Whether the stages prepare ``inp`` now as they would once calls not shown to the flow
    state yet were shown; ``unshown`` is the join of their output labels (None: not known).
    Nothing is recorded or changed.

    The stages must decide from the call alone: no budget, read cache or user stage, no
    provenance, sources or bindings, a name this run resolved already under the current
    catalog, no approval. The flow decision must read no label those calls change: either
    their labels add nothing to the run label and the policy answers from labels alone
    (:func:`labels_decide`) and allows the call, or the tool has no side effects, the policy
    never refuses it (:func:`always_allows`) and its own output label already holds theirs.
    """
    call = inp.call
    args = call.arguments
    if (
        unshown is None
        or inp.fresh
        or inp.sources
        or inp.bound
        or inp.provenance
        or call.provenance
        or type(args) is not dict
        or not call.name
    ):
        return False
    stages = fast.stages
    if stages.guard is not None or len(ordered) != stages.checks + 2:
        return False  # budgets, the read cache or a user stage apply
    run = inp.run
    hit = run.resolved.get(call.name)
    if run.disclosure or hit is None or hit[0] != stages.catalog.generation:
        return False
    spec = hit[1]
    if spec.requires_approval:
        return False
    context = run.flow.context
    policy = stages.flow_policy
    if _adds_nothing(context, unshown):
        if always_allows(policy, spec, inp.principal):
            return True
        if not labels_decide(policy):
            return False
        # A refusal names every call shown so far as an origin: one that would be refused
        # waits for the calls before it, and is refused naming them, as one after the other.
        check = evaluate(policy, run.flow, spec, args, principal=inp.principal, run_id=run.run_id)
        return isinstance(check.decision, Allow)
    if has_effects(spec) or not always_allows(policy, spec, inp.principal):
        return False
    own = spec_label(spec)
    if args:  # each argument is labelled with the run label
        own = own.join(context)
    return _adds_nothing(own, unshown)


def _adds_nothing(label: Label, other: Label) -> bool:
    """Joining ``other`` into ``label`` leaves it as it is."""
    return other == PUBLIC_TRUSTED or label.join(other) == label


def _alike(engine: Engine, inp: CallInput, unshown: Label | None) -> bool:
    """:func:`prepares_alike`; False when it cannot tell (the call then waits)."""
    try:
        return prepares_alike(engine.fast, inp, engine.ordered, unshown)
    except Exception:  # a bug of ours: waiting is the safe answer, and the stages type the call
        _log.exception("actionspace: deciding whether a call of a message may begin at once failed")
        return False


async def _one(
    engine: Engine, ready: Ready, rec: Recorder, call: ToolCall, after: list[asyncio.Task[Observation]]
) -> Observation:
    """A prepared call of a message, once the calls it must follow have ended."""
    if after:
        await asyncio.wait(after)
    if engine.runs.closed:  # closed while it waited: never sent
        return _not_begun(call, ready.call_id)
    try:
        begun = engine.run_ready(ready, rec, False)  # close() cuts it while its tool runs
        spec, cut = ready.compiled.spec, engine.messages.in_flight.cuttable
        return await cut(begun, rec, spec, ready.call_id, ready.key)
    except Exception as exc:  # a bug of ours or of the tool's wrapper: typed, never raised
        return engine.internal(exc, rec, call)


def _not_begun(call: ToolCall, call_id: str) -> Observation:
    """A call of the message that the runtime closed before it began: ``cancelled``, not sent."""
    error = ActionError.of(
        "cancelled", "the Runtime was closed before this call began; it was not sent", details={"sent": False}
    )
    return Observation.failure(error, call_id=call_id, tool=call.name[:200])


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
