"""Replay a recorded run's decisions against a fresh runtime, without executing any tool.

For every call of the run, in order, the replay takes the call as the model proposed it (the
``model_output`` event; the normalized arguments of ``proposed`` when recorded) and decides it
again with the fresh runtime's catalog, principal, validators and flow policy:

- **resolve**: the recorded ``name@version`` must exist in the fresh catalog with the same schema
  hash (a changed schema is a different tool);
- **authorize**: the principal's scopes against the tool (``allowed`` / ``denied``);
- **validate**: schema, refinements, bindings and business validators (``accepted`` /
  ``rejected`` / ``needs_approval``), with the recorded provenance;
- **flow**: the flow policy over the argument labels and value provenance the trace recorded
  (``flow_checked``, ``proposed``): ``allow`` / ``ask`` / ``deny``;
- **approval**: a call the replay holds for approval must be one the run asked a person about,
  and the other way round (the person's answer is an input and is not replayed).

Decisions that read only the trace-independent parts of the world (budgets and the read cache
spend and fill as tools run) are listed as recorded; a decision the replay cannot re-run is
``skipped``, never reported as reproduced. A difference is a :class:`Decision` with
``same=False``; ``actionspace trace replay`` exits 1 on any.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from actionspace._loader import load_callable
from actionspace.catalog.spec import ToolSpec
from actionspace.errors import UnknownToolError
from actionspace.policy.flow_policies import Allow, Ask, FlowPolicy, FlowRequest
from actionspace.policy.labels import Label
from actionspace.policy.principal import Principal, authorize
from actionspace.policy.provenance import KINDS, Source, ValueProvenance
from actionspace.trace.events import TraceEvent
from actionspace.validation.validator import ValidationContext, compile_tool, validate
from actionspace.validation.verdicts import NeedsApproval, Rejected

__all__ = ["Decision", "ReplayRuntime", "Replayed", "replay_events"]


class ReplayRuntime(Protocol):
    """What the replay needs of a runtime (``actionspace.Runtime`` is one)."""

    @property
    def catalog(self) -> Any: ...

    @property
    def principal(self) -> Principal: ...

    @property
    def flow_policy(self) -> FlowPolicy | None: ...

    @property
    def state(self) -> Mapping[str, Any]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """One decision of one call: what the run recorded and what the replay decided."""

    call_id: str
    tool: str
    stage: str
    recorded: str
    replayed: str

    @property
    def same(self) -> bool:
        return self.recorded == self.replayed or self.replayed == "skipped"

    def to_dict(self) -> dict[str, Any]:
        return {
            "call_id": self.call_id,
            "tool": self.tool,
            "stage": self.stage,
            "recorded": self.recorded,
            "replayed": self.replayed,
            "same": self.same,
        }


@dataclass(frozen=True, slots=True)
class Replayed:
    """Every decision of a run, replayed."""

    run_id: str
    decisions: tuple[Decision, ...] = field(default_factory=tuple)

    @property
    def differences(self) -> list[Decision]:
        return [d for d in self.decisions if not d.same]

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "decisions": [d.to_dict() for d in self.decisions],
            "differences": len(self.differences),
        }


@dataclass(slots=True)
class _Call:
    call_id: str
    name: str = ""
    arguments: Any = None
    provenance: Mapping[str, str] = field(default_factory=dict)
    events: dict[str, list[Mapping[str, Any]]] = field(default_factory=dict)


def _calls(events: Sequence[TraceEvent]) -> list[_Call]:
    """The run's calls in order, each with its proposal and its events by kind."""
    from actionspace.parse import parse

    pending: list[Any] = []
    calls: dict[str, _Call] = {}
    for e in events:
        if e.kind == "model_output":
            pending = list(parse(e.data.get("raw")).calls)
            continue
        if e.call_id is None:
            continue
        call = calls.get(e.call_id)
        if call is None:
            call = calls[e.call_id] = _Call(e.call_id)
            if pending:
                proposed = pending.pop(0)
                call.name, call.arguments = proposed.name, proposed.arguments
                call.provenance = dict(proposed.provenance)
        call.events.setdefault(e.kind, []).append(e.data)
        if e.kind == "proposed":
            call.arguments = dict(e.data.get("arguments") or {})
        if e.kind in ("validated", "resolved") and e.data.get("tool") and not call.name:
            call.name = str(e.data["tool"])
    return list(calls.values())


def replay_events(run_id: str, events: Iterable[TraceEvent], runtime: ReplayRuntime) -> Replayed:
    """Replay every recorded decision of ``events`` (one run's) against ``runtime``."""
    ordered = sorted(events, key=lambda e: e.seq)
    decisions: list[Decision] = []
    for call in _calls(ordered):
        decisions.extend(_replay_call(call, runtime, run_id))
    return Replayed(run_id, tuple(decisions))


def _replay_call(call: _Call, rt: ReplayRuntime, run_id: str) -> list[Decision]:
    out: list[Decision] = []

    def add(stage: str, recorded: str, replayed: str) -> None:
        out.append(
            Decision(call_id=call.call_id, tool=call.name, stage=stage, recorded=recorded, replayed=replayed)
        )

    validated = _last(call, "validated")
    resolved = _last(call, "resolved")
    spec = _resolve(rt, call, validated)
    if resolved is not None:
        add(
            "resolve", f"error:{resolved.get('category')}", "ok" if spec is not None else "error:unknown_tool"
        )
        return out
    if validated is not None:
        recorded = f"{validated.get('tool')}@{validated.get('version')}#{validated.get('schema_hash')}"
        replayed = "error:unknown_tool" if spec is None else f"{spec.name}@{spec.version}#{spec.schema_hash}"
        add("resolve", recorded, replayed)
    if spec is None:
        return out
    authorized = _last(call, "authorized")
    if authorized is not None:
        verdict = authorize(spec, rt.principal)
        add(
            "authorize",
            str(authorized.get("verdict")),
            "denied" if isinstance(verdict, Rejected) else "allowed",
        )
    if validated is None:
        return out
    checked = validate(compile_tool(spec), call.arguments, call.provenance, _context(rt, run_id, call))
    verdict_name = (
        "rejected"
        if isinstance(checked.verdict, Rejected)
        else "needs_approval"
        if isinstance(checked.verdict, NeedsApproval)
        else "accepted"
    )
    add("validate", str(validated.get("verdict")), verdict_name)
    flowed = _last(call, "flow_checked")
    flow = "skipped"
    if flowed is not None and verdict_name != "rejected":
        flow = _flow(rt, spec, checked.arguments, flowed, call, run_id)
        add("flow", _recorded_flow(str(flowed.get("decision"))), flow)
    asked = bool(call.events.get("approval_requested")) or any(
        d.get("status") == "consumed" for d in call.events.get("approval_decided", [])
    )
    if flowed is not None or verdict_name == "needs_approval":
        wants = verdict_name == "needs_approval" or flow == "ask"
        add("approval", "asked" if asked else "not asked", "asked" if wants else "not asked")
    for budget in call.events.get("budget", []):
        add("budget", str(budget.get("verdict", budget.get("decision", "recorded"))), "skipped")
    return out


def _last(call: _Call, kind: str) -> Mapping[str, Any] | None:
    found = call.events.get(kind)
    return found[-1] if found else None


def _resolve(rt: ReplayRuntime, call: _Call, validated: Mapping[str, Any] | None) -> ToolSpec | None:
    """The fresh catalog's ``name@version`` the run used (None when it has no such tool)."""
    version = None if validated is None else validated.get("version")
    try:
        spec: ToolSpec = rt.catalog.get(call.name, str(version) if version is not None else None)
    except (UnknownToolError, KeyError):
        return None
    return spec


def _context(rt: ReplayRuntime, run_id: str, call: _Call) -> ValidationContext:
    return ValidationContext(
        run_id=run_id,
        node_id=call.call_id,
        call_id=call.call_id,
        principal_id=rt.principal.id,
        scopes=tuple(rt.principal.scopes),
        resource_version=lambda kind, rid: None,
        state=rt.state,
    )


def _recorded_flow(decision: str) -> str:
    """The policy's answer behind a recorded flow decision (approvals are the person's)."""
    return {"approved": "ask", "declassified": "deny"}.get(decision, decision)


def _flow(
    rt: ReplayRuntime,
    spec: ToolSpec,
    arguments: Mapping[str, Any],
    flowed: Mapping[str, Any],
    call: _Call,
    run_id: str,
) -> str:
    policy = rt.flow_policy
    if policy is None:
        return "allow"
    recorded = flowed.get("arguments") or {}
    labels = {a: Label.from_dict(v.get("label") or {}) for a, v in recorded.items() if isinstance(v, Mapping)}
    proposed = _last(call, "proposed")
    values = None if proposed is None else _values(proposed.get("provenance") or {})
    request = FlowRequest(
        spec=spec,
        arguments=arguments,
        arg_labels=labels,
        principal=rt.principal,
        run_id=run_id,
        provenance=values,
    )
    decision = policy.check(request)
    return "allow" if isinstance(decision, Allow) else "ask" if isinstance(decision, Ask) else "deny"


def _values(recorded: Mapping[str, Any]) -> dict[str, tuple[ValueProvenance, ...]]:
    """The ``proposed`` event's provenance strings back as values."""
    return {
        name: tuple(
            ValueProvenance(
                str(v.get("path", "")),
                parse_source(str(v.get("source", "model"))),
                bool(v.get("key")),
                bool(v.get("embedded")),
            )
            for v in items
        )
        for name, items in recorded.items()
    }


def parse_source(text: str) -> Source:
    """``str(Source)`` back into a Source (an unknown kind reads as ``model``)."""
    kind, _, rest = text.partition("(")
    rest = rest.rstrip(")")
    if kind not in KINDS:
        return Source("model")
    if kind in ("tool_result", "untrusted"):
        call_id, _, path = rest.rpartition(", ")
        return Source(kind, call_id or None, "" if path == "/" else path)
    return Source(kind, None, rest)


Factory = Callable[[], ReplayRuntime]


def load_factory(spec: str) -> Factory:
    """``module:function`` → the function that builds the fresh runtime. Raises ConfigurationError."""
    return load_callable(spec, option="--runtime")


def render_text(result: Replayed) -> str:
    """One line per decision (``=`` reproduced, ``!`` differs), then the count of differences."""
    lines = [
        f"{'=' if d.same else '!'} {d.call_id} {d.tool} {d.stage}: "
        f"recorded {d.recorded}, replayed {d.replayed}"
        for d in result.decisions
    ]
    lines.append(f"{len(result.decisions)} decisions, {len(result.differences)} differ")
    return "\n".join(lines)
