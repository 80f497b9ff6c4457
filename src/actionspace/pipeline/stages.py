"""The stages a proposed call passes before it may run, in order, over one frozen input.

resolve → **authorize** → validate → approval → flow → budget/cache, then the node's identity and
key. Authorization comes before everything that could ask a person or spend a budget: a
principal without the scope gets ``permission_denied`` and no approval request is ever filed
(DESIGN §1). Each stage reads the frozen :class:`CallInput`, adds what it established to the
:class:`Draft`, and returns ``None`` to go on or the :class:`ActionError` that ends the call.

A user stage (``Runtime(stages=...)`` / ``Engine.add_stage``) has the same shape; it runs after
the built-in validate stage (the arguments are normalized then) and before the gates, so a
business rule can reject a call before anyone is asked to approve it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from actionspace._epoch import bump
from actionspace._fast import fast_init
from actionspace.approval.gate import Approvals, gate
from actionspace.catalog.registry import Catalog
from actionspace.catalog.spec import ToolSpec
from actionspace.catalog.versions import earlier_version_mismatch
from actionspace.discovery.runs import RunState, definition_hash, resolve
from actionspace.errors import ActionError, ConfigurationError
from actionspace.execution.guarded import Admission, Guard
from actionspace.execution.items import batch_verdict
from actionspace.execution.ready import Ready
from actionspace.ledger.entries import LedgerStore
from actionspace.ledger.keys import args_digest, idempotency_key, identity_digests
from actionspace.ledger.late import still_running
from actionspace.observation.pagination import CursorKey
from actionspace.pipeline._written import stored_as_written
from actionspace.pipeline.observe import validated_event
from actionspace.policy.flow import Binding, FlowPolicy
from actionspace.policy.flow_stage import call_label, flow_stage
from actionspace.policy.labels import Label
from actionspace.policy.principal import Principal, authorize
from actionspace.trace.events import EventRecord
from actionspace.trace.recorder import Recorder
from actionspace.types import SYSTEM_CLOCK, Observation, ToolCall
from actionspace.validation.validator import (
    CompiledTool,
    Validated,
    ValidationContext,
    compile_tool,
    validate,
)
from actionspace.validation.verdicts import NeedsApproval, Rejected

__all__ = [
    "CallInput",
    "Compiler",
    "Draft",
    "Stage",
    "Stages",
    "action_key",
    "check_occurrence",
    "identity_node",
    "keep_evidence",
    "node_named",
    "proposed",
    "record_proposed",
]


@fast_init
@dataclass(frozen=True, kw_only=True)
class CallInput:
    """One proposed call as every stage sees it (frozen: adding a field breaks no stage)."""

    run: RunState
    call: ToolCall
    principal: Principal
    rec: Recorder
    node_id: str | None = None
    """The caller's name for the logical action; None: node identity decides (see identity_node)."""
    provenance: Mapping[str, str] | None = None
    sources: Mapping[str, Sequence[str]] | None = None
    bound: Mapping[str, Binding] | None = None
    occurrence: int = 1
    """Which identical proposal of the same message this is (1 for the first), when the caller knows."""
    message: dict[str, int] | None = None
    """Identity node → proposals of it so far in this message, shared by the message's calls; when
    given, the occurrence is counted here, after the name resolved and the arguments were normalized."""
    fresh: bool = False
    """The caller wants a new read, not one served from the read cache."""


@dataclass(slots=True)
class Draft:
    """What the stages established so far; the engine turns it into a Ready call."""

    call_id: str
    node: str
    spec: ToolSpec | None = None
    compiled: CompiledTool | None = None
    checked: Validated | None = None
    approval: NeedsApproval | None = None
    label: Label | None = None
    admission: Admission | None = None
    values: Mapping[str, tuple[Any, ...]] | None = None
    """Per argument, each value's provenance, when a provenance stage established it."""
    written: str | None = None
    """The identity node of the arguments as written, when they are not in NFC (see ``approve``)."""
    exempt: Callable[[], Admission | ActionError | None] | None = None
    """The budget let the call through uncharged as a replay: its admission, should the ledger send it."""
    stored_key: str | None = None
    """The key of the ledger entry found under ``written`` (stored before node identity and keys read
    NFC, under the key of then): the action's key, for the budget's replay check and the ledger."""


Stage = Callable[[CallInput, Draft], ActionError | None]
"""A stage: ``None`` lets the call go on, an ActionError ends it (recorded as its observation)."""


def identity_node(turn: int, tool_key: str, arguments: Any, occurrence: int = 1) -> str:
    """The node of a logical action on the default path: (turn, name@version, canonical args, occurrence).

    Two proposals of the same tool with the same normalized arguments in the same user turn are one
    action (the second is replayed, never sent again); in a new turn they are a new action. Strings
    read in Unicode NFC (:func:`~actionspace.ledger.keys.args_digest`): ``"café"`` composed and
    decomposed are one node; arguments already in NFC keep the node they always had.
    """
    return node_named(turn, tool_key, args_digest(arguments), occurrence)


def node_named(turn: int, tool_key: str, digest: str, occurrence: int = 1) -> str:
    """:func:`identity_node` of arguments whose digest is ``digest`` (sha256 hex)."""
    suffix = f"/{occurrence}" if occurrence > 1 else ""
    return f"t{turn}/{tool_key}/{digest[:16]}{suffix}"


def check_occurrence(occurrence: int) -> None:
    """Raise ConfigurationError unless ``occurrence`` — the identical calls before a call in its
    model message, as the caller counted them — is a non-negative ``int`` (a bool is no count)."""
    if occurrence.__class__ is not int or occurrence < 0:
        raise ConfigurationError(f"occurrence must be a non-negative int, got {occurrence!r:.100}")


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


ContextFactory = Callable[[RunState, str, str, Principal], ValidationContext]


@dataclass(slots=True)
class Stages:
    """The built-in stages, bound to the runtime's catalog, approvals, policies and budgets."""

    catalog: Catalog
    compiler: Compiler
    ctx_factory: ContextFactory
    approvals: Approvals | None
    """Read at every call: a store swapped on ``rt.approvals`` is the one used."""
    flow_policy: FlowPolicy | None
    guard: Guard | None

    checks: int = 3
    """resolve, authorize and validate come first and read only memory; the gates follow."""
    ledger: LedgerStore | None = None
    """The ledger the engine commits through: a call it answers from its record spends no budget."""
    keep: Callable[[Recorder], None] | None = None
    """Stores a call's events so far, durably (set by the runtime, see :func:`keep_evidence`): called before
    an approval request for the call is filed, so that a request on disk has its evidence on disk."""
    cursor_key: CursorKey | None = None
    """Set: every call runs inside ``cursor_scope(cursor_key, run_id=..., tool=...)``, so the
    cursors a paged tool mints are read back only in their own run and tool
    (:mod:`actionspace.observation.pagination`); such calls take the stages' path. None (the
    default): cursors are sealed under the process's key alone."""

    def __setattr__(self, name: str, value: Any) -> None:
        # a field set anew (the flow policy, the guard, the cursor key): a precompiled entry kept
        # for a plan's tool (pipeline/fast_nodes.py) is checked again before its next node
        object.__setattr__(self, name, value)
        bump()

    def ordered(self, extra: Sequence[Stage] = (), late: Sequence[Stage] = ()) -> list[Stage]:
        """resolve → authorize → validate → (stages) → approval → flow → (late stages) → budget/cache."""
        gates = [self.approve, self.flow, *late]
        if self.guard is not None:
            gates.append(self.admit)
        return [self.resolve, self.authorize, self.validate, *extra, *gates]

    def resolve(self, inp: CallInput, d: Draft) -> ActionError | None:
        resolved = resolve(self.catalog, inp.run, inp.call.name)
        if isinstance(resolved, ActionError):
            inp.rec.add("resolved", {"tool": inp.call.name[:200], "category": resolved.category})
            return resolved
        d.spec = resolved
        d.compiled = self.compiler.get(resolved)
        return None

    def authorize(self, inp: CallInput, d: Draft) -> ActionError | None:
        assert d.spec is not None
        auth = authorize(d.spec, inp.principal)
        if isinstance(auth, Rejected):
            missing = auth.error.details.get("missing_scopes", [None])[0]
            event = {"verdict": "denied", "category": auth.error.category, "missing_scope": missing}
            inp.rec.add("authorized", event)
            return auth.error
        inp.rec.add("authorized", inp.principal.allowed_event)
        return None

    def validate(self, inp: CallInput, d: Draft) -> ActionError | None:
        spec, compiled = d.spec, d.compiled
        assert spec is not None and compiled is not None
        prov = inp.provenance if inp.provenance is not None else inp.call.provenance
        ctx = None if compiled.simple else self.ctx_factory(inp.run, d.node, d.call_id, inp.principal)
        checked = validate(compiled, inp.call.arguments, prov, ctx)
        verdict = checked.verdict
        if spec.batch is not None or spec.max_items is not None:
            verdict = batch_verdict(spec, checked.arguments, verdict)
        if isinstance(verdict, Rejected):
            error = verdict.error
            versions = self.catalog.versions(spec.name) if error.category == "invalid_arguments" else []
            if len(versions) > 1:  # arguments written for an earlier version: say so, naming both
                error = earlier_version_mismatch(spec, versions, inp.call.arguments) or error
            inp.rec.add("validated", validated_event(spec, "rejected", error))
            return error
        if isinstance(verdict, NeedsApproval):
            event = {**validated_event(spec, "needs_approval", None), "reason": verdict.reason}
            inp.rec.add("validated", event)
            d.approval = verdict
        else:
            inp.rec.add("validated", compiled.accepted_event)
        d.checked = checked
        if inp.node_id is None and spec.has_side_effects:
            digest, written = identity_digests(checked.arguments)
            occurrence, turn = inp.occurrence, inp.run.turn
            if inp.message is not None:
                first = node_named(turn, spec.key, digest)
                occurrence = inp.message[first] = inp.message.get(first, 0) + 1
            d.node = node_named(turn, spec.key, digest, occurrence)
            if written is not None:  # looked for in the ledger by the first gate, off the event loop
                d.written = node_named(turn, spec.key, written, occurrence)
        return None

    def approve(self, inp: CallInput, d: Draft) -> ActionError | None:
        if d.written is not None:
            self._written_node(inp, d)
        verdict, spec, checked = d.approval, d.spec, d.checked
        if verdict is None:
            return None
        assert spec is not None and checked is not None
        if self.approvals is None:
            details = {
                **verdict.details,
                "arguments": dict(checked.arguments),
                "provenance": dict(checked.provenance),
            }
            return ActionError.of("needs_approval", verdict.reason, details=details)
        approved = gate(
            self.approvals.store,
            run_id=inp.run.run_id,
            node_id=d.node,
            spec=spec,
            arguments=checked.arguments,
            provenance=checked.provenance,
            verdict=verdict,
            record=inp.rec.add,
            proposed_by=inp.principal.to_dict(),
            clock=self.approvals.clock,
            definition=definition_hash(spec),
            keep=self._keeper(inp),
            answered=self._answered(inp, d),
            label=call_label(
                inp.run.flow,
                spec,
                checked.arguments,
                checked.provenance,
                sources=inp.sources,
                bound=inp.bound,
            ),
        )
        if isinstance(approved, ActionError):
            return approved
        event = {"request_id": approved.id, "status": "consumed", "by": approved.decided_by}
        inp.rec.add("approval_decided", event)
        return None

    def _written_node(self, inp: CallInput, d: Draft) -> None:
        """Take the node the arguments named as written (not in NFC) when the ledger holds it: an
        entry stored before node identity read strings in NFC stays that action's (replayed once
        committed, never sent again); else the NFC node stands. One indexed read (of a batch's
        parts' nodes: pipeline/_written.py), for arguments not in NFC only; the gates run on a worker
        thread for a store not in memory. The key the entry was stored under, minted then over the
        arguments as written, stays the action's (see :func:`action_key`)."""
        written, d.written = d.written, None
        ledger, spec, checked = self.ledger, d.spec, d.checked
        if written is None or ledger is None or spec is None or checked is None:
            return
        found, key = stored_as_written(ledger, inp.run.run_id, spec, checked.arguments, written)
        if found:
            d.node, d.stored_key = written, key

    def flow(self, inp: CallInput, d: Draft) -> ActionError | None:
        spec, checked = d.spec, d.checked
        assert spec is not None and checked is not None
        label = flow_stage(
            policy=self.flow_policy,
            state=inp.run.flow,
            spec=spec,
            arguments=checked.arguments,
            provenance=checked.provenance,
            principal=inp.principal,
            run_id=inp.run.run_id,
            node_id=d.node,
            call_id=d.call_id,
            approvals=None if self.approvals is None else self.approvals.store,
            record=inp.rec.add,
            sources=inp.sources,
            bound=inp.bound,
            values=d.values,
            clock=SYSTEM_CLOCK if self.approvals is None else self.approvals.clock,
            definition=definition_hash(spec),
            keep=self._keeper(inp),
        )
        if isinstance(label, ActionError):
            return label
        d.label = label
        return None

    def _answered(self, inp: CallInput, d: Draft) -> Callable[[], bool] | None:
        """Whether the ledger answers ``d``'s action from its record (:func:`replayed`): asked by the
        approval gate for a repeat of a node whose approval has expired. None for a call the ledger
        does not hold (a read, or no ledger): an expired approval lets it through never again."""
        spec, checked, ledger = d.spec, d.checked, self.ledger
        if spec is None or checked is None or ledger is None or not spec.has_side_effects:
            return None
        return partial(replayed, ledger, action_key(inp, d, spec, checked.arguments))

    def _keeper(self, inp: CallInput) -> Callable[[], None] | None:
        """What stores ``inp``'s events so far, durably, before a request for it is filed (see
        :meth:`_kept`)."""
        return None if self.keep is None else partial(self._kept, inp)

    def _kept(self, inp: CallInput) -> None:
        """Store ``inp``'s events so far, durably; raises when they are not stored.

        A plan node's (an atomic group member's) events go ahead of its plan's buffer, which holds
        those of the nodes before it and waits for the plan's loop: written from the gate, they keep
        their numbers, so the trace reads in order once the buffer follows, and nothing waits for
        the loop. Stored with them is what a resume judges the node on besides: the plan's start
        and the calls before the plan, handed to the store at once and committed here too. A
        proposal among them is noted (:class:`_WrittenAhead`): :func:`proposed` records none again."""
        keep, rec = self.keep, inp.rec
        if keep is None:
            return
        proposal = any(r[1] == "proposed" and r[3] == rec.call_id for r in rec.records)
        keep(rec)
        if proposal and not rec.records:
            rec.records = _WrittenAhead()

    def admit(self, inp: CallInput, d: Draft) -> ActionError | None:
        guard = self.guard
        if guard is None:
            return None
        spec, checked = d.spec, d.checked
        assert spec is not None and checked is not None
        key = None
        if spec.has_side_effects and guard.meter is not None and self.ledger is not None:
            key = action_key(inp, d, spec, checked.arguments)
        admit = partial(
            guard.admit,
            spec,
            checked.arguments,
            run_id=inp.run.run_id,
            principal=inp.principal,
            call_id=d.call_id,
            record=inp.rec.add,
            fresh=inp.fresh,
            ledger_key=key,
            label=d.label,
        )
        if key is not None and self.ledger is not None and replayed(self.ledger, key):
            d.exempt = admit  # answered from the ledger's record, unless it turns sendable first
            return None
        admitted = admit()
        if isinstance(admitted, ActionError):
            return admitted
        d.admission = admitted
        return None


_SENT_AGAIN = ("transient", "rate_limited")
"""Categories of a ``failed`` action the ledger sends again (it did not commit); any other replays."""


def replayed(store: LedgerStore, key: str) -> bool:
    """Whether the ledger answers the action of ``key`` from its record, sending nothing: it is
    ``committed``, ``unknown_commit``, or ``failed`` for good (ledger/commit.py ``protocol``). Any
    other state may be sent (``accepted``, ``failed`` retryable, a holder that is gone), so it is
    admitted and charged as a new call; so is an action whose entry the store could not read, and
    an ``unknown_commit`` whose timed-out attempt still runs here (its late failure may make it
    sendable again). The answer holds until the ledger reads the entry: a replay it lets through
    carries its admission (``Draft.exempt``), which the ledger asks for should it send after all."""
    try:
        entry = store.get(key)
    except Exception:
        return False
    if entry is None:
        return False
    state = entry.state
    if state == "failed":
        return (entry.error or {}).get("category") not in _SENT_AGAIN
    return state == "committed" or (state == "unknown_commit" and not still_running(key))


def action_key(inp: CallInput, d: Draft, spec: ToolSpec, arguments: Any) -> str:
    """The idempotency key of ``d``'s action: the stored entry's when its node was found as written
    (``Draft.stored_key``: minted before keys read NFC, so a replay of it is found by the budget and
    the ledger alike, free as any replay, and a tool deduping by it is sent that key again); else
    :func:`~actionspace.ledger.keys.idempotency_key` of the node."""
    if d.stored_key is not None:
        return d.stored_key
    return idempotency_key(inp.run.run_id, d.node, spec.key, arguments)


def keep_evidence(flush: Callable[[Recorder], None], trace: object, rec: Recorder) -> None:
    """Hand ``rec``'s events so far to the trace store (``flush``, the engine's) and have the store
    commit them durably (``sync``, where its appends are deferred); raises when they are not
    stored. The call's later events follow them, in order. They are labelled with the run label of
    this moment, as any flush labels what it writes."""
    flush(rec)
    sync = getattr(trace, "sync", None)
    if sync is not None:
        sync()


def ready_of(inp: CallInput, d: Draft) -> Ready:
    """The Ready call the stages accepted, with its idempotency key when it has side effects."""
    spec, compiled, checked = d.spec, d.compiled, d.checked
    assert spec is not None and compiled is not None and checked is not None
    args = checked.arguments
    kwargs: Mapping[str, Any] = checked.python_arguments if checked.python_arguments is not None else args
    key = None
    if spec.has_side_effects:
        key = action_key(inp, d, spec, args)
        if spec.takes_key:
            kwargs = {**kwargs, "idempotency_key": key}
    return Ready(compiled, d.call_id, d.node, args, kwargs, key, d.admission, d.label, d.exempt)


class _WrittenAhead(list[EventRecord]):
    """A call's records after its earlier ones, its ``proposed`` among them, were stored ahead of
    the rest (:meth:`Stages._kept`, before its approval request): empty then, as any list."""

    __slots__ = ()


def proposed(inp: CallInput, result: Ready | Observation) -> Ready | Observation:
    """Record ``proposed`` for a call that no recorded model output holds (a plan node, a member of
    an atomic group, a call of a stream): the arguments it was checked with, so that the trace
    replay can decide it again. The provenance stage, when present, has recorded it already."""
    rec = inp.rec
    call_id = result.call_id if isinstance(result, Ready) else rec.call_id
    if call_id is None or type(rec.records) is _WrittenAhead:
        return result
    if any(r[1] == "proposed" and r[3] == call_id for r in rec.records):
        return result
    return record_proposed(inp, result)


def record_proposed(inp: CallInput, result: Ready | Observation) -> Ready | Observation:
    """:func:`proposed` once known that nothing recorded ``proposed`` for the call yet."""
    rec = inp.rec
    call_id = result.call_id if isinstance(result, Ready) else rec.call_id
    args = result.arguments if isinstance(result, Ready) else inp.call.arguments
    spec = result.compiled.spec if isinstance(result, Ready) else None
    data: dict[str, Any] = {"tool": spec.name if spec is not None else inp.call.name}
    if spec is not None:
        data["version"] = spec.version
    if isinstance(args, Mapping):
        data["arguments"] = dict(args)
    seq = next(inp.run.seq)
    rec.records.append((seq, "proposed", time.time(), call_id, data))
    return result
