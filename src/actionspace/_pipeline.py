"""The stages between a parsed call and its observation, shared by the sync and async paths.

``prepare`` runs resolve → validate → authorize and either returns a ``Ready`` call or the error
observation that ends it; the caller executes a ``Ready`` call its own way (sync or async), then
``observe`` shapes the outcome. Every stage appends its event to the call's ``Recorder``.
"""

from __future__ import annotations

import hashlib
import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from difflib import get_close_matches
from typing import Any

import rfc8785

from actionspace._crash import point
from actionspace.approval.gate import gate
from actionspace.approval.requests import ApprovalStore
from actionspace.catalog.registry import Catalog
from actionspace.catalog.spec import ToolSpec
from actionspace.discovery.disclosure import undescribed
from actionspace.errors import ActionError
from actionspace.execution.executor import Failed, Outcome
from actionspace.execution.guarded import Admission, Guard
from actionspace.execution.items import batch_verdict
from actionspace.execution.result import ToolResult
from actionspace.observation import ArtifactStore, shape
from actionspace.policy.flow import Binding, FlowPolicy, FlowState
from actionspace.policy.flow_stage import flow_stage
from actionspace.policy.labels import Label
from actionspace.policy.principal import Principal, authorize
from actionspace.trace.events import AppendsRecords, EventRecord, TraceEvent, TraceStore
from actionspace.types import Observation, Provenance, ToolCall
from actionspace.validation.validator import (
    CompiledTool,
    Validated,
    ValidationContext,
    compile_tool,
    validate,
)
from actionspace.validation.verdicts import NeedsApproval, Rejected

__all__ = [
    "Ready",
    "RecordSink",
    "Recorder",
    "RunState",
    "idempotency_key",
    "observe",
    "prepare",
    "record_sink",
]


@dataclass(slots=True)
class RunState:
    """What the runtime remembers of one run: its event counter, node counter and offer pins."""

    run_id: str
    principal: Principal
    seq: itertools.count[int]
    nodes: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    pins: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Tool name → (version, schema hash) as offered (or first resolved) in this run."""
    explicit_offer: bool = False
    """True after ``Runtime.offer``: only pinned names may be called."""
    resolved: dict[str, tuple[int, ToolSpec]] = field(default_factory=dict)
    """Called name → (catalog generation, spec): a resolution stays valid until the catalog changes."""
    disclosure: bool = False
    """Progressive disclosure (``Runtime.offer(disclosure=True)``): only described tools may be called."""
    described: set[str] = field(default_factory=set)
    """Tool names whose full definition was read in this run (``Runtime.describe`` / ``describe_tool``)."""
    flow: FlowState = field(default_factory=FlowState)
    """The run's context label and what the model was shown (policy/flow.py)."""


class Recorder:
    """Collects one call's events as compact records; the store gets them together, once."""

    __slots__ = ("call_id", "records", "run")

    def __init__(self, run: RunState, call_id: str | None) -> None:
        self.run = run
        self.call_id = call_id
        self.records: list[EventRecord] = []

    def add(self, kind: str, data: Mapping[str, Any]) -> None:
        self.records.append((next(self.run.seq), kind, time.time(), self.call_id, data))

    def retry(self, attempt: int, error: ActionError, delay: float) -> None:
        """The executor's hook before each retry."""
        self.add("attempt", {"attempt": attempt, "category": error.category, "delay_s": round(delay, 4)})

    def flush(self, sink: RecordSink) -> None:
        if self.records:
            point("during_observation_write")
            context = self.run.flow.context
            if context.secret or context.readers is not None:  # viewers see these only if cleared
                mark = context.to_dict()
                self.records = [(q, k, t, c, {**d, "label": mark}) for q, k, t, c, d in self.records]
            sink(self.run.run_id, self.records)
            self.records = []


RecordSink = Callable[[str, Sequence[EventRecord]], None]
"""Where a Recorder's records go: a store's ``append_records``, or a converter to ``append_many``."""


def record_sink(store: TraceStore) -> RecordSink:
    """The cheapest way to hand records to ``store`` (decided once, not per call)."""
    if isinstance(store, AppendsRecords):
        return store.append_records

    def convert(run_id: str, records: Sequence[EventRecord]) -> None:
        store.append_many(
            [
                TraceEvent(run_id=run_id, seq=seq, kind=kind, ts=ts, call_id=call_id, data=data)
                for seq, kind, ts, call_id, data in records
            ]
        )

    return convert


@dataclass(slots=True)
class Ready:
    """A call that passed every check before execution."""

    compiled: CompiledTool
    call_id: str
    node_id: str
    arguments: Mapping[str, Any]
    kwargs: Mapping[str, Any]
    """What the function receives (converted arguments plus runtime-filled parameters)."""
    key: str | None
    admission: Admission | None = None
    """Budget reservation and cache lookup, when budgets or the read cache apply to the call."""
    label: Label | None = None
    """The output label (the tool's label joined with the argument labels), stamped by observe."""


def idempotency_key(run_id: str, node_id: str, tool_key: str, arguments: Any) -> str:
    """``as1_`` + first 32 hex of sha256 over the RFC 8785 JSON of (run, node, name@version, args)."""
    digest = hashlib.sha256(rfc8785.dumps([run_id, node_id, tool_key, arguments])).hexdigest()
    return f"as1_{digest[:32]}"


class Compiler:
    """Compiled tools by ``name@version``, compiled on first use."""

    def __init__(self) -> None:
        self._compiled: dict[str, CompiledTool] = {}

    def get(self, spec: ToolSpec) -> CompiledTool:
        compiled = self._compiled.get(spec.key)
        if compiled is None or compiled.spec is not spec:
            compiled = self._compiled[spec.key] = compile_tool(spec)
        return compiled

    def forget(self, spec: ToolSpec) -> None:
        self._compiled.pop(spec.key, None)


def _fail(
    rec: Recorder, error: ActionError, call_id: str, tool: str, version: str | None = None
) -> Observation:
    obs = Observation.failure(error, call_id=call_id, tool=tool, tool_version=version)
    rec.add("observation", _observation_event(obs))
    return obs


def resolve(catalog: Catalog, run: RunState, name: str) -> ToolSpec | ActionError:
    """The spec a call's tool name means in this run (unknown_tool / version_mismatch otherwise).

    In a disclosure run, a tool never described in the run is ``unknown_tool`` naming ``describe_tool``.
    """
    if run.disclosure:
        never_described = undescribed(run, name)
        if never_described is not None:
            return never_described
    hit = run.resolved.get(name)
    if hit is not None and hit[0] == catalog.generation:
        return hit[1]
    found = _resolve(catalog, run, name)
    if isinstance(found, ToolSpec):
        run.resolved[name] = (catalog.generation, found)
    return found


def _resolve(catalog: Catalog, run: RunState, name: str) -> ToolSpec | ActionError:
    base, _, asked = name.partition("@")
    pin = run.pins.get(base)
    if pin is None:
        spec = None if run.explicit_offer else catalog.current(base)
        if spec is None:
            offered = sorted(run.pins) if run.explicit_offer else sorted(s.name for s in catalog.offerable())
            close = get_close_matches(base, offered, n=3, cutoff=0.6)
            return ActionError.of(
                "unknown_tool",
                f"no tool {base!r} is offered to this run"
                + (f"; did you mean {close[0]!r}?" if close else ""),
                alternatives=close or offered[:20],
                details={"offered": offered[:50], "requested": name[:200]},
            )
        pin = run.pins[base] = (spec.version, spec.schema_hash)
    version, offered_hash = pin
    spec = catalog.find(f"{base}@{version}")
    current = catalog.current(base)
    if asked and asked != version:
        return _mismatch(run, base, f"{base}@{asked} was not offered; this run has {base}@{version}", current)
    if spec is None or spec.lifecycle == "retired" or spec.schema_hash != offered_hash:
        return _mismatch(
            run, base, f"{base}@{version} as offered to this run is no longer available", current
        )
    return spec


def _mismatch(run: RunState, base: str, message: str, current: ToolSpec | None) -> ActionError:
    details: dict[str, Any] = {
        "offered": f"{base}@{run.pins[base][0]}",
        "offered_schema_hash": run.pins[base][1],
    }
    if current is not None:
        details["current"] = current.describe()
        run.pins[base] = (current.version, current.schema_hash)
    return ActionError.of("version_mismatch", message, details=details)


def prepare(
    *,
    catalog: Catalog,
    compiler: Compiler,
    run: RunState,
    call: ToolCall,
    node_id: str | None,
    principal: Principal,
    provenance: Mapping[str, str] | None,
    rec: Recorder,
    ctx_factory: Any,
    approvals: ApprovalStore | None = None,
    guard: Guard | None = None,
    flow_policy: FlowPolicy | None = None,
    sources: Mapping[str, Sequence[str]] | None = None,
    bound: Mapping[str, Binding] | None = None,
) -> Ready | Observation:
    """Resolve, validate and authorize one call; an Observation means it ends here.

    ``guard`` (budgets and the read cache) admits the call last, after authorization.
    ``flow_policy`` (None: allow) checks the argument labels after the scopes; ``sources`` and
    ``bound`` bind arguments to earlier values (see :mod:`actionspace.policy.flow`).
    """
    node = node_id or f"n{next(run.nodes)}"
    call_id = call.id or f"{run.run_id}:{node}"
    rec.call_id = call_id
    resolved = resolve(catalog, run, call.name)
    if isinstance(resolved, ActionError):
        rec.add("resolved", {"tool": call.name[:200], "category": resolved.category})
        return _fail(rec, resolved, call_id, call.name[:200])
    spec = resolved
    compiled = compiler.get(spec)
    prov = provenance if provenance is not None else call.provenance
    ctx = None if compiled.simple else ctx_factory(run, node, call_id, principal)
    checked: Validated = validate(compiled, call.arguments, prov, ctx)
    verdict = checked.verdict
    if spec.batch is not None or spec.max_items is not None:
        verdict = batch_verdict(spec, checked.arguments, verdict)
    if isinstance(verdict, Rejected):
        err = verdict.error
        rec.add("validated", _validated_event(spec, "rejected", err))
        return _fail(rec, err, call_id, spec.name, spec.version)
    if isinstance(verdict, NeedsApproval):
        rec.add("validated", {**_validated_event(spec, "needs_approval", None), "reason": verdict.reason})
        if approvals is None:
            details = {
                **verdict.details,
                "arguments": dict(checked.arguments),
                "provenance": dict(checked.provenance),
            }
            return _fail(
                rec,
                ActionError.of("needs_approval", verdict.reason, details=details),
                call_id,
                spec.name,
                spec.version,
            )
        approved = gate(
            approvals,
            run_id=run.run_id,
            node_id=node,
            spec=spec,
            arguments=checked.arguments,
            provenance=checked.provenance,
            verdict=verdict,
            record=rec.add,
        )
        if isinstance(approved, ActionError):
            return _fail(rec, approved, call_id, spec.name, spec.version)
        rec.add(
            "approval_decided", {"request_id": approved.id, "status": "consumed", "by": approved.decided_by}
        )
    else:
        rec.add("validated", compiled.accepted_event)
    auth = authorize(spec, principal)
    if isinstance(auth, Rejected):
        rec.add(
            "authorized",
            {
                "verdict": "denied",
                "category": auth.error.category,
                "missing_scope": auth.error.details.get("missing_scopes", [None])[0],
            },
        )
        return _fail(rec, auth.error, call_id, spec.name, spec.version)
    rec.add("authorized", principal.allowed_event)
    args = checked.arguments
    label = flow_stage(
        policy=flow_policy,
        state=run.flow,
        spec=spec,
        arguments=args,
        provenance=checked.provenance,
        principal=principal,
        run_id=run.run_id,
        node_id=node,
        call_id=call_id,
        approvals=approvals,
        record=rec.add,
        sources=sources,
        bound=bound,
    )
    if isinstance(label, ActionError):
        return _fail(rec, label, call_id, spec.name, spec.version)
    admission = None
    if guard is not None:
        admitted = guard.admit(
            spec, args, run_id=run.run_id, principal=principal, call_id=call_id, record=rec.add
        )
        if isinstance(admitted, ActionError):
            return _fail(rec, admitted, call_id, spec.name, spec.version)
        admission = admitted
    kwargs: Mapping[str, Any] = checked.python_arguments if checked.python_arguments is not None else args
    key = None
    if spec.has_side_effects:
        key = idempotency_key(run.run_id, node, spec.key, args)
        if spec.takes_key:
            kwargs = {**kwargs, "idempotency_key": key}
    return Ready(compiled, call_id, node, args, kwargs, key, admission, label)


def _validated_event(spec: ToolSpec, verdict: str, error: ActionError | None) -> dict[str, Any]:
    data: dict[str, Any] = {
        "verdict": verdict,
        "tool": spec.name,
        "version": spec.version,
        "schema_hash": spec.schema_hash,
    }
    if error is not None:
        data["category"] = error.category
        if error.field_errors:
            data["field_errors"] = [f.to_dict() for f in error.field_errors]
        else:
            data["message"] = error.message[:300]
    return data


def observe(
    ready: Ready, outcome: Outcome, *, artifacts: ArtifactStore | None, rec: Recorder, keep_raw: bool = False
) -> Observation:
    """Shape a tool outcome into the observation envelope and record it.

    ``keep_raw`` stores the full raw output as an artifact even when nothing was cut (streams).
    """
    spec = ready.compiled.spec
    if isinstance(outcome, Failed):
        return _fail(rec, outcome.error, ready.call_id, spec.name, spec.version)
    value = outcome.value
    effects: tuple[Any, ...] = ()
    version = remote = cursor = None
    total = None
    complete = True
    paging: dict[str, str] = {}
    if isinstance(value, ToolResult):
        effects, version, remote = tuple(value.effects), value.resource_version, value.remote_id
        complete, cursor, total = value.complete, value.cursor, value.total
        if value.sort_key is not None:
            paging["sort_key"] = value.sort_key
        if value.after is not None:
            paging["after"] = value.after
        value = value.data
    shaped = shape(
        value, rule=spec.trim, max_bytes=spec.max_observation_bytes, artifacts=artifacts, keep_raw=keep_raw
    )
    provenance = object.__new__(Provenance)
    label = ready.label
    provenance.__dict__.update(
        fetched_at=time.time(),
        resource_version=version,
        trust=spec.labels.integrity if label is None else label.integrity,
        labels=ready.compiled.output_labels if label is None else label.tags(),
    )
    fields: dict[str, Any] = {
        "call_id": ready.call_id,
        "tool": spec.name,
        "tool_version": spec.version,
        "data": shaped.data,
        "content_hash": shaped.content_hash,
        "provenance": provenance,
    }
    if effects:
        fields["effects"] = effects
    if shaped.trimming is not None:
        fields["trimming"] = shaped.trimming
    if shaped.artifact_ref is not None:
        fields["artifact_ref"] = shaped.artifact_ref
    if not (complete and shaped.complete):
        fields["complete"] = False
    if cursor is not None or total is not None:
        fields["cursor"], fields["total"] = cursor, total
    diagnostics: dict[str, Any] = dict(paging) if paging else {}
    if outcome.attempts > 1:
        diagnostics["attempts"] = outcome.attempts
    if remote is not None:
        diagnostics["remote_id"] = remote
    if ready.key is not None:
        diagnostics["idempotency_key"] = ready.key
    if spec.lifecycle == "deprecated":
        diagnostics["deprecated_by"] = spec.deprecated_by
    if diagnostics:
        fields["diagnostics"] = diagnostics
    obs = object.__new__(Observation)  # every field is already checked: skip the keyword checks
    obs.__dict__.update(fields)
    if effects or shaped.trimming is not None or shaped.artifact_ref is not None:
        rec.add("observation", _observation_event(obs))
    else:
        rec.add(
            "observation",
            {"status": "ok", "tool": spec.name, "version": spec.version, "content_hash": shaped.content_hash},
        )
    return obs


def _observation_event(obs: Observation) -> dict[str, Any]:
    data: dict[str, Any] = {"status": obs.status, "tool": obs.tool, "version": obs.tool_version}
    if obs.error is not None:
        data["category"] = obs.error.category
        data["recovery"] = list(obs.error.recovery)
        data["message"] = obs.error.message[:300]
    else:
        data["content_hash"] = obs.content_hash
        if obs.trimming is not None:
            data["trimming"] = obs.trimming.to_dict()
        if obs.artifact_ref is not None:
            data["artifact_ref"] = obs.artifact_ref
        if obs.effects:
            data["effects"] = [e.to_dict() for e in obs.effects]
    return data


def context_factory(resource_version: Any, state: Mapping[str, Any]) -> Any:
    """A function building the ValidationContext for a call (only rich validation needs it)."""

    def make(run: RunState, node: str, call_id: str, principal: Principal) -> ValidationContext:
        return ValidationContext(
            run_id=run.run_id,
            node_id=node,
            call_id=call_id,
            principal_id=principal.id,
            scopes=tuple(principal.scopes),
            resource_version=resource_version,
            state=state,
        )

    return make
