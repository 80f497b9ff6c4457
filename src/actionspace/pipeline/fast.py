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
flow state over generated tools and calls. The call itself runs in pipeline/_run.py, split at the
tool's first wait: ``Runtime.acall`` enters no coroutine of the engine's while the tool does not
wait (``Messages.quick``), and the memory trace store gets the call's record there directly.
The commonest case (one entry as JSON text, an async tool, the stores in memory) is written out
in one frame (pipeline/_direct.py), which hands anything else back here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from actionspace._epoch import EPOCH
from actionspace._json_values import finite_numbers, unfit_arguments
from actionspace.catalog.spec import ToolSpec
from actionspace.discovery.runs import RunState
from actionspace.execution.executor import Executor
from actionspace.execution.ready import Ready
from actionspace.observation import ArtifactStore
from actionspace.parse import ParseResult
from actionspace.parse._fast import openai_entry_parts
from actionspace.pipeline._entry import (
    Entry,
    FastCall,
    checks_of,
    finite_by_schema,
    output_of,
    plain_of,
    positional_of,
    shapes_ints,
    simple_tool,
    typed_of,
)
from actionspace.pipeline._run import AppendCall, begin
from actionspace.pipeline.calls import InFlight
from actionspace.pipeline.fast_effects import always_allows, has_effects, labels_decide, ready_effect
from actionspace.pipeline.observe import observe_ready
from actionspace.pipeline.stages import CallInput, Stage, Stages
from actionspace.policy.flow import spec_label
from actionspace.policy.principal import Principal, authorize
from actionspace.trace.events import CallShape
from actionspace.trace.recorder import Recorder
from actionspace.types import Observation, ToolCall
from actionspace.validation.verdicts import Rejected

__all__ = ["AppendCall", "Entry", "FastCall", "FastPath", "always_allows"]

_new = object.__new__

MAX_ENTRIES = 4096
"""Entries kept before the table is cleared (each is rebuilt on the next call of its tool)."""


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
            name, call_id, arguments, escaped = read
            model_output: Any = raw
            plain = not escaped and raw.isascii()  # no escape: no U+0000, no surrogate
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
        # The entry's validity, as self.entry checks it, read without its call (the common case).
        stages = self.stages
        hit = run.resolved.get(name)
        entry = self._entries.get((id(run), name)) if hit is not None else None
        if (
            entry is None
            or run.disclosure
            or hit is None
            or hit[0] != stages.catalog.generation
            or entry.spec is not hit[1]
            or entry.run is not run
            or entry.principal is not principal
            or entry.policy is not stages.flow_policy
            or entry.ordered is not ordered
            or stages.guard is not None
            or stages.cursor_key is not None
        ):
            entry = self.entry(run, name, principal, ordered)
            if entry is None:
                return None
        if entry.effects:
            return None
        unfit = not (entry.finite or finite_numbers(arguments)) if plain else unfit_arguments(arguments)
        check = entry.check
        if (
            unfit
            or not (entry.compiled.validator.is_valid if check is None else check)(arguments)
            or (
                entry.floats
                and float in map(type, arguments.values())
                and not entry.compiled.validator.is_valid(arguments)
            )
        ):
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

    def stamped(
        self, run: RunState, name: str, principal: Principal, ordered: Sequence[Stage], *, built: bool = False
    ) -> Entry | None:
        """:meth:`entry`, stamped (``Entry.checked``) with :data:`~actionspace._epoch.EPOCH` as
        read before its checks (a change made while they run moves the counter past that value);
        None while the precompiled path is off, or as :meth:`entry`. ``built``: only an entry
        built before and still valid, never one built here (None then: the general path builds it,
        as ``FastPath.take`` does, and a later call finds it).

        The frames that take a call by its entry (pipeline/_direct.py with ``built``,
        pipeline/_write_admit.py) take a kept entry as it is while its stamp is the counter's
        value, its run, principal and stage list are the call's and the run has no disclosure
        (what the counter does not cover: one expression in each frame, no call); any other entry
        is asked of this method."""
        epoch = EPOCH[0]
        if not self.enabled:
            return None
        kept = self._entries.get((id(run), name))
        if built and kept is None:
            return None
        entry = self.entry(run, name, principal, ordered)
        if entry is None or (built and entry is not kept):
            return None
        entry.checked = epoch
        return entry

    def _build(
        self, run: RunState, spec: ToolSpec, principal: Principal, ordered: Sequence[Stage]
    ) -> Entry | None:
        stages = self.stages
        if stages.guard is not None or stages.cursor_key is not None or len(ordered) != stages.checks + 2:
            return None  # budgets, the read cache, bound cursors or a user stage apply
        compiled = stages.compiler.get(spec)
        if not simple_tool(spec, compiled):
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
        bare = output_of(spec_label(spec))
        context = run.flow.context
        check, floats = checks_of(compiled)
        plain = plain_of(compiled)
        return Entry(
            run=run,
            spec=spec,
            compiled=compiled,
            principal=principal,
            policy=stages.flow_policy,
            ordered=ordered,
            bare=bare,
            joined=(context, output_of(bare[0].join(context), context)),
            shape=CallShape(
                principal.allowed_event,
                compiled.accepted_event,
                spec.name,
                spec.version,
            ),
            inline=spec.is_async,
            effects=effects,
            finite=finite_by_schema(spec.input_schema),
            check=check,
            floats=floats,
            ints=shapes_ints(spec),
            plain=plain,
            positional=positional_of(spec.fn, plain),
            typed=typed_of(compiled) if effects else None,
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
        direct: AppendCall | None = None,
    ) -> Observation:
        """Record the stages' events, run the tool and shape its observation, as the stages do
        (:func:`~actionspace.pipeline._run.begin`, awaited to its end)."""
        step = begin(self.in_flight, call, rec, node_id, blocking, executor, artifacts, direct)
        return step if isinstance(step, Observation) else await step
