"""The precompiled call path: one simple call of a tool that nothing can object to.

What the stages would decide about a call that depends only on the run, the principal and the
tool — authorization, the flow verdict, the trace payloads of the accepted call — is decided once
per (run, tool) and kept in an :class:`Entry`. The entry is used only while what it was decided
from is unchanged: the same spec (the run's own resolution of the name under the current catalog
generation, made by :func:`~actionspace.discovery.runs.resolve` on an earlier call; the first
call of a tool in a run, and the first after any catalog change, takes the general path), the
same principal, the same flow policy, no stage added or guard set, and the same run label (a new
label recomputes the output label only).

A call takes this path only when it provably ends as the general path would:

- the raw input is a single OpenAI ``tool_calls`` entry as JSON text (read once, with
  ``pydantic_core.from_json``) or a ``ToolCall`` whose arguments are an object — or, through
  :meth:`FastPath.ready`, one call its caller parsed already (a message of several calls, a plan
  node), which skips only the stages;
- the tool has no side effects, needs no approval, has no post-conditions, is not a batch or a
  stream, and validates with the JSON Schema alone (``CompiledTool.simple``, no conversion);
- the principal holds the tool's scopes and the flow policy allows the tool whatever labels its
  arguments carry (:func:`always_allows`: the built-in policies only, by exact type);
- a side-effecting tool (a write, an external call, a sink) is only *prepared* here, through
  :meth:`FastPath.ready` (pipeline/fast_effects.py): its flow verdict is kept per run label, its
  node and key are what the stages would give, and the ledger runs it as it runs any such call;
- no provenance, sources or bindings were given, and the arguments match the schema.

Anything else — a rejection, an unknown policy, a user stage, budgets, the read cache, streams,
approvals — returns ``None`` before any state changed, and the caller runs the general path.
A call's events are held as one compact record (:data:`~actionspace.trace.events.CompactCall`),
which the trace store expands into the events the stages record. After the tool ran, an ``ok``
plain result shaped without cutting anything gets its envelope here and is folded into that
record; anything else (failures, trimming, artifacts, retries) goes through
:func:`~actionspace.pipeline.observe.observe`, as on the general path. The flow state records
what the model was shown as ``FlowState.observed`` does (``FlowState.observed_as``).
``tests/pipeline/test_fast.py`` shows the two paths produce the same events, observations and
flow state over generated tools and calls.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from actionspace._json_values import finite_numbers, unfit_arguments
from actionspace.catalog.spec import ToolSpec
from actionspace.discovery.runs import RunState
from actionspace.execution.executor import Executor
from actionspace.execution.raised import passes_on
from actionspace.execution.ready import Ready
from actionspace.execution.streaming import is_streaming
from actionspace.observation import ArtifactStore
from actionspace.outcomes import Outcome, Succeeded
from actionspace.parse import ParseResult
from actionspace.parse._fast import openai_entry_parts
from actionspace.pipeline.calls import InFlight
from actionspace.pipeline.fast_effects import Verdict, always_allows, has_effects, labels_decide, ready_effect
from actionspace.pipeline.observe import observe, observe_ready, plain_observation
from actionspace.pipeline.stages import CallInput, Stage, Stages
from actionspace.policy.flow import spec_label
from actionspace.policy.flow_policies import FlowPolicy
from actionspace.policy.labels import PUBLIC_TRUSTED, Label
from actionspace.policy.principal import Principal, authorize
from actionspace.trace.events import CallShape, CompactCall, expand_call
from actionspace.trace.recorder import Recorder
from actionspace.trace.store_encoding import RAW_PREFIX_CHARS, bounded_raw, compact_raw
from actionspace.types import Observation, ToolCall
from actionspace.validation.validator import CompiledTool
from actionspace.validation.verdicts import Rejected

__all__ = ["Entry", "FastCall", "FastPath", "always_allows"]

_new = object.__new__

MAX_ENTRIES = 4096
"""Entries kept before the table is cleared (each is rebuilt on the next call of its tool)."""


def _simple_tool(spec: ToolSpec, compiled: CompiledTool) -> bool:
    """No approvals, batches, streams or argument conversion: nothing to defer to."""
    return (
        not spec.requires_approval
        and spec.batch is None
        and spec.max_items is None
        and not is_streaming(spec)
        and compiled.simple
        and spec.fn is not None
        and not spec.verify
        and spec.completion is None  # post-conditions run on the staged path
    )


_NO_FLOATS = frozenset({"integer", "string", "boolean", "null"})
"""JSON Schema types no non-finite number satisfies (``integer`` refuses infinities and NaN)."""


def _finite_by_schema(schema: Mapping[str, Any]) -> bool:
    """Whether ``schema`` holds every argument to a type no infinity or NaN satisfies: a closed
    object (``additionalProperties: false``, no pattern properties) each of whose properties
    names such types, with no reference whose siblings an older draft would ignore."""
    if schema.get("type") != "object" or schema.get("additionalProperties") is not False:
        return False
    if "patternProperties" in schema or "$ref" in schema:
        return False
    properties = schema.get("properties") or {}
    if not isinstance(properties, Mapping):
        return False
    for sub in properties.values():
        if not isinstance(sub, Mapping) or "$ref" in sub:
            return False
        kind = sub.get("type")
        kinds = [kind] if isinstance(kind, str) else kind
        if not isinstance(kinds, list) or not kinds or not all(k in _NO_FLOATS for k in map(str, kinds)):
            return False
    return True


Output = tuple[Label, "Label | None", tuple[str, ...]]
"""An output label, the run label it adds nothing to (None: not known to add nothing), and the
label's provenance tags (``Label.tags``, read once per run label, not once per call)."""


def _output(label: Label, context: Label | None = None) -> Output:
    if label == PUBLIC_TRUSTED:
        return label, context, label.tags()
    within = context if context is not None and context.join(label) is context else None
    return label, within, label.tags()


@dataclass(slots=True)
class Entry:
    """What the stages decide about any simple call of one tool in one run, decided once."""

    run: RunState
    spec: ToolSpec
    compiled: CompiledTool
    principal: Principal
    policy: FlowPolicy | None
    ordered: Sequence[Stage]
    bare: Output
    """The output of a call without arguments (the tool's label)."""
    joined: tuple[Label, Output]
    """(run label, the tool's label joined with it): replaced whole, so a reader in another
    thread never pairs one run label with the output label of another."""
    shape: CallShape
    """The payloads every call's trace events share (authorized, validated, tool and version)."""
    inline: bool
    """An async tool: the first step of its coroutine is taken on the calling path."""
    effects: bool = False
    """A side-effecting tool (:func:`~actionspace.pipeline.fast_effects.has_effects`):
    :meth:`FastPath.ready` prepares its calls (the ledger runs them, pipeline/fast_effects.py);
    :meth:`FastPath.take` leaves them to the stages."""
    finite: bool = False
    """The schema alone refuses a non-finite number anywhere in the arguments
    (:func:`_finite_by_schema`): a call whose schema check passed needs no walk for one."""
    verdict: Verdict | None = None
    """The flow verdict last computed for a call of a side-effecting tool, with the run label and
    argument names it holds for (replaced whole)."""

    def output(self, context: Label, arguments: Mapping[str, Any]) -> Output:
        """The output label of a call with ``arguments`` while the run label is ``context``,
        ``context`` again when that label is known to add nothing to it (else None), and its tags.

        Each argument is labelled with the run label (no sources, no bindings), so it joins in
        once there is any argument.
        """
        if not arguments:
            return self.bare
        joined = self.joined
        if joined[0] is not context:
            joined = self.joined = (context, _output(self.bare[0].join(context), context))
        return joined[1]


@dataclass(slots=True)
class FastCall:
    """One parsed call that may take the precompiled path, before any state changed."""

    entry: Entry
    name: str
    call_id: str | None
    arguments: dict[str, Any]
    raw: Any
    """The model output (recorded as ``model_output``): JSON text, a provider object, or None for a
    ToolCall."""
    fmt: str = "openai_chat"
    """The provider format ``parse`` read ``raw`` as (the ``parsed`` event's ``format``)."""

    def tool_call(self) -> ToolCall:
        return ToolCall(name=self.name, arguments=self.arguments, id=self.call_id)


class FastPath:
    """The table of entries of one engine and the precompiled path itself."""

    def __init__(self, stages: Stages) -> None:
        self.stages = stages
        self.enabled = True
        """False: every call runs the stages (for comparisons and the equivalence test)."""
        self._entries: dict[tuple[int, str], Entry] = {}
        self.in_flight: InFlight | None = None
        """Where :meth:`run` registers a call whose tool waits (``Runtime.close()`` cuts it)."""

    def take(
        self,
        raw: Any,
        run: RunState,
        principal: Principal,
        ordered: Sequence[Stage],
        parsed: ParseResult | None = None,
    ) -> FastCall | None:
        """The call in ``raw`` when it may take the precompiled path, else None (nothing changed).

        ``parsed``: ``parse(raw)`` of a provider object (a dict, or a list of Responses items);
        such a raw output qualifies when it holds exactly one call, in any format (a Chat
        Completions or Anthropic message, Responses items).
        """
        if not self.enabled:
            return None
        fmt, plain = "openai_chat", False
        if type(raw) is str:
            if raw[:1] != "{":
                return None
            read = openai_entry_parts(raw)
            if read is None:
                return None
            name, call_id, arguments = read
            model_output: Any = raw
            plain = raw.isascii() and "\\u" not in raw  # no escape: no U+0000, no surrogate
        elif type(raw) is ToolCall:
            if raw.provenance:
                return None
            name, call_id, arguments, model_output = raw.name, raw.id, raw.arguments, None
        elif (type(raw) is dict or type(raw) is list) and parsed is not None:
            if parsed.error is not None or len(parsed.calls) != 1 or parsed.calls[0].provenance:
                return None
            one, fmt = parsed.calls[0], parsed.format
            name, call_id, arguments, model_output = one.name, one.id, one.arguments, raw
        else:
            return None
        if type(arguments) is not dict or not name:
            return None
        entry = self.entry(run, name, principal, ordered)
        if entry is None or entry.effects:
            return None
        unfit = not (entry.finite or finite_numbers(arguments)) if plain else unfit_arguments(arguments)
        if unfit or not entry.compiled.validator.is_valid(arguments):
            return None  # the stages refuse what arguments may not hold, or the schema does
        call = _new(FastCall)  # the generated __init__ is a Python call of its own, once per call
        call.entry, call.name, call.call_id, call.arguments, call.raw, call.fmt = (
            entry,
            name,
            call_id,
            arguments,
            model_output,
            fmt,
        )
        return call

    def ready(self, inp: CallInput, ordered: Sequence[Stage]) -> Ready | None:
        """The Ready call the stages would return for ``inp``, with their events, or None to run them.

        For a caller that parsed the call already (a message of several calls, a plan node): the
        same conditions as :meth:`take`, plus no bindings, provenance or sources.
        """
        call = inp.call
        if (
            not self.enabled
            or inp.fresh
            or inp.sources
            or inp.bound
            or inp.provenance
            or call.provenance
            or type(call.arguments) is not dict
            or not call.name
            or unfit_arguments(call.arguments) is not None
        ):
            return None
        run = inp.run
        entry = self.entry(run, call.name, inp.principal, ordered)
        args = call.arguments
        if entry is None or not entry.compiled.validator.is_valid(args):
            return None
        if entry.effects:
            return ready_effect(entry, inp, args)
        node = inp.node_id or f"n{next(run.nodes)}"
        call_id = call.id or f"{run.run_id}:{node}"
        rec = inp.rec
        rec.call_id = call_id
        label = entry.output(run.flow.context, args)[0]
        run.flow.pending[call_id] = label
        rec.add("authorized", entry.shape.authorized)
        rec.add("validated", entry.shape.validated)
        return Ready(entry.compiled, call_id, node, args, args, None, None, label)

    async def execute(
        self, ready: Ready, rec: Recorder, *, executor: Executor, artifacts: ArtifactStore | None
    ) -> Observation:
        """What the engine's execution gives for a Ready call :meth:`ready` made, its events
        included: an ``ok`` plain result is put in its envelope directly, anything else goes
        through :func:`~actionspace.pipeline.observe.observe`."""
        spec = ready.compiled.spec
        dispatched = {"tool": spec.name, "version": spec.version, "node_id": ready.node_id, "attempt": 1}
        rec.add("dispatched", dispatched)
        return observe_ready(ready, await executor.arun(spec, ready.kwargs, rec.retry), rec, artifacts)

    def entry(self, run: RunState, name: str, principal: Principal, ordered: Sequence[Stage]) -> Entry | None:
        """The valid entry of (run, tool ``name``) for ``principal``, built when missing or stale."""
        # Only a resolution this run already made under the current catalog: resolving anew may
        # change the run (a version mismatch re-pins the name), which the general path must do.
        hit = run.resolved.get(name)
        if run.disclosure or hit is None or hit[0] != self.stages.catalog.generation:
            return None
        spec = hit[1]
        stages = self.stages
        key = (id(run), name)
        entry = self._entries.get(key)
        if (
            entry is not None
            and entry.run is run
            and entry.spec is spec
            and entry.principal is principal
            and entry.policy is stages.flow_policy
            and entry.ordered is ordered
            and stages.guard is None
            and stages.cursor_key is None
        ):
            return entry
        built = self._build(run, spec, principal, ordered)
        if built is not None:
            if len(self._entries) >= MAX_ENTRIES:
                self._entries.clear()
            self._entries[key] = built
        else:
            self._entries.pop(key, None)
        return built

    def _build(
        self, run: RunState, spec: ToolSpec, principal: Principal, ordered: Sequence[Stage]
    ) -> Entry | None:
        stages = self.stages
        if stages.guard is not None or stages.cursor_key is not None or len(ordered) != stages.checks + 2:
            return None  # budgets, the read cache, bound cursors or a user stage apply
        compiled = stages.compiler.get(spec)
        if not _simple_tool(spec, compiled):
            return None
        effects = has_effects(spec)
        if not (
            labels_decide(stages.flow_policy)
            if effects
            else always_allows(stages.flow_policy, spec, principal)
        ):
            return None
        if isinstance(authorize(spec, principal), Rejected):
            return None
        bare = _output(spec_label(spec))
        context = run.flow.context
        return Entry(
            run=run,
            spec=spec,
            compiled=compiled,
            principal=principal,
            policy=stages.flow_policy,
            ordered=ordered,
            bare=bare,
            joined=(context, _output(bare[0].join(context), context)),
            shape=CallShape(
                principal.allowed_event,
                compiled.accepted_event,
                spec.name,
                spec.version,
            ),
            inline=spec.is_async,
            effects=effects,
            finite=_finite_by_schema(spec.input_schema),
        )

    async def run(
        self,
        call: FastCall,
        rec: Recorder,
        node_id: str | None,
        *,
        blocking: bool,
        executor: Executor,
        artifacts: ArtifactStore | None,
    ) -> Observation:
        """Record the stages' events, run the tool and shape its observation, as the stages do.

        The events are held as one compact call record
        (:data:`~actionspace.trace.events.CompactCall`) that the trace store expands into the same
        events when read; an ``ok`` observation of a plain result, shaped without cutting
        anything, is folded into it as well.
        """
        entry = call.entry
        run, spec = entry.run, entry.spec
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
        held: CompactCall = (
            first,
            ts,
            call_id,
            entry.shape,
            model,
            call.name,
            call.call_id,
            node,
            -1,
            ts,
            None,
        )
        compact = numbers[-1] - first == span
        if not compact:  # another thread numbered events of this run in between: keep the numbers
            events = expand_call(held)
            numbered = zip(numbers, events, strict=True)
            rec.records.extend((n, k, t, c, d) for n, (_, k, t, c, d) in numbered)
        elif rec.call is None:
            rec.call = held
        else:
            rec.add_call(held)
        outcome: Outcome | None = None
        if blocking:
            outcome = executor.run(spec, args, rec.retry)
        elif entry.inline:  # an async tool's first step, taken here: most finish without waiting
            start = time.monotonic()
            try:
                coro = spec.fn(**args)  # type: ignore[misc]
                try:
                    yielded = coro.send(None)
                except StopIteration as stop:
                    value = stop.value
                except BaseException:
                    coro.close()
                    raise
                else:
                    if self.in_flight is not None:  # it waits: close() may cut it (pipeline/calls.py)
                        self.in_flight.waits(rec)
                    outcome = await executor.acontinue(
                        spec, args, rec.retry, start, coro=coro, yielded=yielded
                    )
            except BaseException as exc:  # a BaseException of the tool's own is its failure (raised.py)
                if passes_on(exc, in_task=True):
                    raise
                outcome = await executor.acontinue(spec, args, rec.retry, start, failure=exc)
        else:
            if spec.blocking and self.in_flight is not None:  # on a worker thread: it waits
                self.in_flight.waits(rec)
            outcome = await executor.arun(spec, args, rec.retry)
        if outcome is None:
            attempts = 1
        elif type(outcome) is Succeeded:
            value, attempts = outcome.value, outcome.attempts
        else:
            attempts = 0
        if compact and attempts == 1 and rec.call is held:
            now = time.time()
            plain = plain_observation(spec, call_id, value, label, artifacts, now, tags)
            if isinstance(plain, Observation):  # folded into the call's record
                rec.call = (*held[:8], next(seq), now, plain.content_hash)
                flow.observed_as(plain, label, within)
                return plain
            shaped = plain  # shaped and cut (or None): observe() takes it as it is
        else:
            shaped = None
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
