"""Replay a recorded run's decisions against a fresh runtime, without executing any tool.

The replay reads the run's events and decides every recorded decision again with the fresh
runtime's catalog, principal, validators, flow policy, discovery and budgets. No tool runs: the
decisions are the stages before dispatch.

- **offer** (``candidates_offered``): the same request (names, query, limit, phase,
  capabilities, errors seen) to the fresh discovery must offer the same set of tools, each with
  the same ``name@version`` and schema hash;
- **resolve** (``resolved``, and the tool a ``validated`` event names): the recorded
  ``name@version`` must exist in the fresh catalog with the same schema hash (a version the
  catalog dropped while it holds others of the name cannot be decided again: the call is
  ``unreplayed``, naming the versions held);
- **authorize**: the principal's scopes against the tool (``allowed`` / ``denied``);
- **validate**: schema, refinements, bindings and business validators (``accepted`` /
  ``rejected`` / ``needs_approval``), on the arguments as proposed (``model_output``), or as
  normalized (``proposed``) when recorded;
- **provenance** (``proposed``): the caller's provenance claims checked again; a false claim is
  a ``policy_violation`` (see :func:`actionspace.trace._replay_checks.provenance_again` for
  which claims the trace lets it check);
- **flow**: the flow policy over the argument labels and value provenance the trace recorded
  (``flow_checked``, ``proposed``): ``allow`` / ``ask`` / ``deny``;
- **approval**: a call the replay holds for approval must be one the run asked a person about,
  and the other way round (the person's answer is an input and is not replayed);
- **budget**: each admission asked again of a fresh meter holding the fresh runtime's budgets,
  fed what the run's earlier calls used, each call charged to the principal the run recorded for
  it (``allowed`` / ``denied:<unit>``).

A decision the trace does not let the replay make (a plan node's arguments are not recorded, an
event is malformed or from an older format, a labelled run's values were redacted for the viewer
who exported it) is ``unreplayed`` with the reason: reported, never
counted as reproduced, and never an exception. Every recorded decision event
(:data:`DECISION_KINDS`) yields at least one decision naming its ``seq``. A difference is a
:class:`Decision` that was re-decided with another outcome; ``actionspace trace replay`` exits 1
on any (and, with ``--strict``, on any unreplayed decision).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from actionspace._loader import load_callable
from actionspace.catalog.spec import ToolSpec
from actionspace.errors import UnknownToolError
from actionspace.policy.flow_policies import FlowPolicy
from actionspace.policy.principal import Principal, authorize
from actionspace.trace import _replay_checks as checks
from actionspace.trace._replay_calls import DECISION_KINDS, Call, split
from actionspace.trace._replay_checks import parse_source
from actionspace.trace.events import TraceEvent
from actionspace.trace.render import safe_line
from actionspace.validation.validator import ValidationContext, compile_tool, validate
from actionspace.validation.verdicts import NeedsApproval, Rejected

__all__ = [
    "DECISION_KINDS",
    "UNKNOWN_KINDS_NOTE",
    "UNREPLAYED",
    "Decision",
    "ReplayRuntime",
    "Replayed",
    "parse_source",
    "replay_events",
]

UNREPLAYED = "unreplayed"
"""The ``replayed`` value (with ``: reason``) of a decision the replay could not make."""


class ReplayRuntime(Protocol):
    """What the replay needs of a runtime (``actionspace.Runtime`` is one).

    Optional: ``discovery`` (for offers) and ``meter`` (whose ``budgets`` the budget decisions
    use; none means no budget applies).
    """

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
    """One decision of one call (or offer): what the run recorded and what the replay decided."""

    call_id: str
    tool: str
    stage: str
    recorded: str
    replayed: str
    seq: int | None = None
    """The recorded event this decision re-decides (None: derived, e.g. an approval not asked)."""

    @property
    def replayable(self) -> bool:
        """False when the replay could not make this decision (see ``replayed`` for why)."""
        return not self.replayed.startswith(UNREPLAYED)

    @property
    def same(self) -> bool:
        return self.recorded == self.replayed

    @property
    def differs(self) -> bool:
        return self.replayable and not self.same

    def to_dict(self) -> dict[str, Any]:
        return {
            "call_id": self.call_id,
            "tool": self.tool,
            "stage": self.stage,
            "seq": self.seq,
            "recorded": self.recorded,
            "replayed": self.replayed,
            "same": self.same,
        }


@dataclass(frozen=True, slots=True)
class Replayed:
    """Every decision of a run, replayed."""

    run_id: str
    decisions: tuple[Decision, ...] = field(default_factory=tuple)
    recorded_events: tuple[int, ...] = ()
    """The seq of every recorded decision event of the run."""
    problems: tuple[str, ...] = ()
    """Events the replay could not read (reported, never raised)."""
    unknown_kinds: tuple[tuple[str, int], ...] = ()
    """``(kind, events)`` of each event kind this version does not know, the most frequent first:
    not replayed. A newer version's kind and a custom one recorded with ``Runtime.record`` read
    alike (the trace does not mark which is which)."""

    @property
    def differences(self) -> list[Decision]:
        return [d for d in self.decisions if d.differs]

    @property
    def unreplayed(self) -> list[Decision]:
        return [d for d in self.decisions if not d.replayable]

    @property
    def redecided_events(self) -> set[int]:
        """The recorded decision events whose every decision was re-decided."""
        out = {d.seq for d in self.decisions if d.seq is not None}
        out -= {d.seq for d in self.unreplayed}
        return {s for s in out if s is not None}

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "decisions": [d.to_dict() for d in self.decisions],
            "recorded_decision_events": len(self.recorded_events),
            "redecided_decision_events": len(self.redecided_events),
            "differences": len(self.differences),
            "unreplayed": len(self.unreplayed),
            "problems": list(self.problems),
            "unknown_kinds": dict(self.unknown_kinds),
        }


def replay_events(run_id: str, events: Iterable[TraceEvent], runtime: ReplayRuntime) -> Replayed:
    """Replay every recorded decision of ``events`` (one run's) against ``runtime``.

    Never raises on what the events hold: what cannot be read is reported.
    """
    run = split(events)
    decisions: list[Decision] = []
    budget = _budgets(run_id, runtime, run.owner)
    offers = iter(run.offers)
    offer = next(offers, None)
    for call in run.calls:  # in the run's order: each offer before the calls that followed it
        while offer is not None and offer.seq < call.first_seq:
            decisions.append(_offer(offer.seq, offer.data, runtime))
            offer = next(offers, None)
        try:
            decisions.extend(_replay_call(call, runtime, run_id, budget))
        except Exception as exc:  # a malformed or older event: the call's decisions are reported
            why = f"{UNREPLAYED}: {type(exc).__name__}: {str(exc)[:120]}"
            for kind, items in call.events.items():
                if kind in DECISION_KINDS:
                    for seq, _ in items:
                        decisions.append(_unread(call, kind, seq, why))
    while offer is not None:
        decisions.append(_offer(offer.seq, offer.data, runtime))
        offer = next(offers, None)
    covered = {d.seq for d in decisions}
    for seq in run.decision_events:  # a decision event no call or offer holds (no data, no call id)
        if seq not in covered:
            decisions.append(
                Decision(
                    call_id="",
                    tool="",
                    stage="event",
                    recorded="recorded",
                    replayed=f"{UNREPLAYED}: event {seq} is not readable",
                    seq=seq,
                )
            )
    unknown = tuple(sorted(run.unknown_kinds.items(), key=lambda item: (-item[1], item[0])))
    return Replayed(run_id, tuple(decisions), tuple(run.decision_events), tuple(run.problems), unknown)


def _unread(call: Call, kind: str, seq: int, why: str) -> Decision:
    return Decision(
        call_id=call.call_id, tool=call.name, stage=kind, recorded="recorded", replayed=why, seq=seq
    )


def _budgets(
    run_id: str, rt: ReplayRuntime, owner: tuple[str, str | None] | None
) -> checks.BudgetReplay | None:
    try:
        return checks.BudgetReplay(run_id, rt, owner)
    except Exception:
        return None


def _offer(seq: int, data: Mapping[str, Any], rt: ReplayRuntime) -> Decision:
    try:
        recorded = checks.offered(data)
    except Exception as exc:
        return Decision(
            call_id="",
            tool="",
            stage="offer",
            recorded="recorded",
            replayed=f"{UNREPLAYED}: {exc}",
            seq=seq,
        )
    try:
        again = checks.offered_again(data, rt)
    except Exception as exc:
        again = f"{UNREPLAYED}: {type(exc).__name__}: {str(exc)[:120]}"
    return Decision(call_id="", tool="", stage="offer", recorded=recorded, replayed=again, seq=seq)


def _replay_call(
    call: Call, rt: ReplayRuntime, run_id: str, budget: checks.BudgetReplay | None
) -> list[Decision]:
    out: list[Decision] = []

    def add(stage: str, recorded: str, replayed: str, seq: int | None) -> None:
        out.append(
            Decision(
                call_id=call.call_id,
                tool=call.name,
                stage=stage,
                recorded=recorded,
                replayed=replayed,
                seq=seq,
            )
        )

    resolved = call.last("resolved")
    validated_at = call.last("validated")
    validated = None if validated_at is None else validated_at[1]
    spec = _resolve(rt, call, validated)
    dropped = None if spec is not None else _dropped(rt, call, validated)
    missing = f"{UNREPLAYED}: no such tool" if dropped is None else f"{UNREPLAYED}: {dropped}"
    if resolved is not None:
        replayed = "ok" if spec is not None else "error:unknown_tool"
        add("resolve", f"error:{resolved[1].get('category')}", replayed, resolved[0])
    elif validated_at is not None:
        recorded = f"{validated_at[1].get('tool')}@{validated_at[1].get('version')}"
        recorded += f"#{validated_at[1].get('schema_hash')}"
        if not isinstance(validated_at[1].get("tool"), str):
            replayed = f"{UNREPLAYED}: the event names no tool"
        elif spec is None:
            replayed = "error:unknown_tool" if dropped is None else missing
        else:
            replayed = f"{spec.name}@{spec.version}#{spec.schema_hash}"
        add("resolve", recorded, replayed, validated_at[0])
    authorized = call.last("authorized")
    if authorized is not None:
        if spec is None:
            add("authorize", str(authorized[1].get("verdict")), missing, authorized[0])
        else:
            verdict = authorize(spec, rt.principal)
            again = "denied" if isinstance(verdict, Rejected) else "allowed"
            add("authorize", str(authorized[1].get("verdict")), again, authorized[0])
    later = ("proposed", "flow_checked", "approval_requested", "budget")
    rest = [k for k in later if k in call.events]
    if spec is None or validated_at is None:
        for kind in rest:
            for seq, _ in call.events[kind]:
                add(kind, "recorded", f"{UNREPLAYED}: the call was not validated again", seq)
        if validated_at is not None:
            add("validate", str(validated_at[1].get("verdict")), missing, validated_at[0])
        return out
    verdict_name, arguments = _validate(rt, run_id, call, spec)
    add("validate", str(validated_at[1].get("verdict")), verdict_name, validated_at[0])
    for seq, data in call.events.get("proposed", []):
        add(
            "provenance",
            checks.provenance_recorded(data),
            _guard(checks.provenance_again, call, data),
            seq,
        )
    flowed = call.last("flow_checked")
    flow = "skipped"
    if flowed is not None:
        if verdict_name == "rejected":
            flow = f"{UNREPLAYED}: validation rejects the call now"
        else:
            flow = _guard(checks.flow_again, rt, spec, arguments or {}, flowed[1], call, run_id)
        add("flow", checks.recorded_flow(str(flowed[1].get("decision"))), flow, flowed[0])
    asked = call.last("approval_requested")
    was_asked = asked is not None or any(
        d.get("status") == "consumed" for _, d in call.events.get("approval_decided", [])
    )
    recorded_approval = validated_at[1].get("verdict") == "needs_approval"
    held = recorded_approval or asked is not None or verdict_name == "needs_approval"
    if flowed is not None or held:
        if verdict_name.startswith(UNREPLAYED) or flow.startswith(UNREPLAYED):
            wants = f"{UNREPLAYED}: the decisions it follows were not replayed"
        else:
            wants = "asked" if verdict_name == "needs_approval" or flow == "ask" else "not asked"
        add(
            "approval",
            "asked" if was_asked else "not asked",
            wants,
            None if asked is None else asked[0],
        )
    for seq, data in call.events.get("budget", []):
        if budget is None:
            again = f"{UNREPLAYED}: the runtime's budgets could not be read"
        else:
            again = _guard(budget.admit, call, spec, data)
        add("budget", checks.budget_recorded(data), again, seq)
    return out


def _guard(fn: Callable[..., str], *args: Any) -> str:
    """``fn(*args)``, or ``unreplayed: <why>`` when the trace does not hold what it needs."""
    try:
        return fn(*args)
    except Exception as exc:
        return f"{UNREPLAYED}: {type(exc).__name__}: {str(exc)[:120]}"


def _validate(rt: ReplayRuntime, run_id: str, call: Call, spec: ToolSpec) -> tuple[str, Any]:
    """The validation verdict again, and the normalized arguments (None when not replayed)."""
    if call.redacted:
        return f"{UNREPLAYED}: the trace holds the call's arguments redacted", None
    if call.arguments is None:
        return f"{UNREPLAYED}: the trace does not hold the call's arguments", None
    try:
        context = _context(rt, run_id, call)
        checked = validate(compile_tool(spec), call.arguments, call.claims, context)
    except Exception as exc:
        return f"{UNREPLAYED}: {type(exc).__name__}: {str(exc)[:120]}", None
    if isinstance(checked.verdict, Rejected):
        return "rejected", checked.arguments
    if isinstance(checked.verdict, NeedsApproval):
        return "needs_approval", checked.arguments
    return "accepted", checked.arguments


def _resolve(rt: ReplayRuntime, call: Call, validated: Mapping[str, Any] | None) -> ToolSpec | None:
    """The fresh catalog's ``name@version`` the run used (None when it has no such tool)."""
    name, _, version = call.name.partition("@")
    if validated is not None and isinstance(validated.get("tool"), str):
        name, version = validated["tool"], str(validated.get("version") or "")
    try:
        spec: ToolSpec = rt.catalog.get(name, version or None)
    except (UnknownToolError, KeyError):
        return None
    return spec


def _dropped(rt: ReplayRuntime, call: Call, validated: Mapping[str, Any] | None) -> str | None:
    """Why a call on a version the fresh catalog no longer holds, while it holds other versions of
    the name (a retired version dropped, as an MCP server's churn does), cannot be decided again;
    None when the name is not in the catalog at all (then ``error:unknown_tool`` is a difference)."""
    if validated is None or not isinstance(validated.get("tool"), str) or not validated.get("version"):
        return None
    name, version = validated["tool"], str(validated["version"])
    try:
        versions = [str(s.version) for s in rt.catalog.versions(name)]
    except Exception:  # a catalog without versions(): nothing tells a dropped version apart
        return None
    if not versions or version in versions:
        return None
    held = ", ".join(f"{name}@{v}" for v in versions[-3:])
    return f"{name}@{version} is no longer in the catalog (dropped); it holds {held}"


def _context(rt: ReplayRuntime, run_id: str, call: Call) -> ValidationContext:
    return ValidationContext(
        run_id=run_id,
        node_id=call.call_id,
        call_id=call.call_id,
        principal_id=rt.principal.id,
        scopes=tuple(rt.principal.scopes),
        resource_version=lambda kind, rid: None,
        state=rt.state,
    )


Factory = Callable[[], ReplayRuntime]


def load_factory(spec: str) -> Factory:
    """``module:function`` → the function that builds the fresh runtime.

    Raises ConfigurationError.
    """
    return load_callable(spec, option="--runtime")


def render_text(result: Replayed) -> str:
    """One line per decision, then the counts.

    ``=`` reproduced, ``!`` differs, ``?`` not replayed.
    """
    lines = [f"? {safe_line(p, _TEXT_SHOWN)}" for p in result.problems]
    for d in result.decisions:  # what a trace holds may hold line breaks and terminal escapes
        mark = "?" if not d.replayable else "=" if d.same else "!"
        where = "" if d.seq is None else f"#{d.seq} "
        call, tool, stage = (safe_line(x, 200) if x else "-" for x in (d.call_id, d.tool, d.stage))
        lines.append(
            f"{mark} {where}{call} {tool} {stage}: "
            f"recorded {safe_line(d.recorded, _TEXT_SHOWN)}, replayed {safe_line(d.replayed, _TEXT_SHOWN)}"
        )
    if result.unknown_kinds:
        lines.append(f"{UNKNOWN_KINDS_NOTE}: {_kinds_text(result.unknown_kinds)}")
    lines.append(
        f"{len(result.decisions)} decisions, {len(result.differences)} differ, "
        f"{len(result.unreplayed)} not replayed; {len(result.redecided_events)} of "
        f"{len(result.recorded_events)} recorded decision events re-decided"
    )
    return "\n".join(lines)


UNKNOWN_KINDS_NOTE = "not replayed: kinds this version does not know"
_TEXT_SHOWN = 2000
_KINDS_SHOWN = 20


def _kinds_text(kinds: tuple[tuple[str, int], ...]) -> str:
    """``kind ×n, …`` for the most frequent kinds, each on one line with its control characters
    escaped (a kind is whatever the trace holds: an imported file may hold any text)."""
    shown = ", ".join(f"{safe_line(kind, 60)} ×{count}" for kind, count in kinds[:_KINDS_SHOWN])
    more = len(kinds) - _KINDS_SHOWN
    return f"{shown}, +{more} more kinds" if more > 0 else shown
