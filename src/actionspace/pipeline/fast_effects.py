"""What the precompiled path may decide once: the flow policy's answers, and the preparation of a
side-effecting call (a write, an external call, a sink).

:func:`always_allows` and :func:`labels_decide` say which policies answer without looking at a
call's argument values. :func:`ready_effect` prepares a side-effecting call: its execution stays
where the stages would send it (the ledger: key, intent, dispatch, outcome; a sink without side
effects runs as any call); only what the stages decide before it is taken here, exactly as they
would decide it:

- authorization and validation as for any call on the precompiled path (pipeline/fast.py);
- the node: the caller's, or the identity node of (turn, tool, arguments, occurrence) for a call
  with no node id, counted per message as the validate stage counts it;
- the flow verdict, from a policy whose answer depends only on the tool, the principal and the
  arguments' labels (:func:`labels_decide`). Every argument carries the run label here (no
  sources, bindings or provenance), so the verdict and its ``flow_checked`` event are computed by
  :func:`~actionspace.policy.flow.evaluate` once per (run label, argument names) and kept in the
  entry; a verdict other than allow returns None and the stages run (the approval gate, the
  declassification request);
- the idempotency key of a call with side effects, as
  :func:`~actionspace.pipeline.stages.ready_of` mints it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from actionspace.catalog.spec import ToolSpec
from actionspace.execution.ready import Ready
from actionspace.ledger.keys import idempotency_key, identity_digests
from actionspace.pipeline.stages import CallInput, node_named
from actionspace.policy.flow import evaluate
from actionspace.policy.flow_policies import (
    AllOf,
    Allow,
    AllowAll,
    AnyOf,
    FlowPolicy,
    NoSecretToExternalSink,
    ReadClearance,
    UntrustedHighRiskArgs,
    UntrustedWrites,
)
from actionspace.policy.labels import PUBLIC_TRUSTED, Label, may_read
from actionspace.policy.principal import Principal

if TYPE_CHECKING:
    from actionspace.discovery.runs import RunState
    from actionspace.pipeline.fast import Entry

__all__ = ["Verdict", "always_allows", "has_effects", "labels_decide", "ready_effect", "verdict_of"]

_LABEL_ONLY = (AllowAll, NoSecretToExternalSink, ReadClearance, UntrustedHighRiskArgs, UntrustedWrites)

Verdict = tuple[
    Label, tuple[str, ...], "dict[str, Any] | None", Label, "tuple[Label, Label | None, tuple[str, ...]]"
]
"""(run label, argument names, the ``flow_checked`` payload or None, the output label, and the
output as ``pipeline/_entry.py`` ``output_of`` gives it under that run label: the label, the run
label when the output adds nothing to it (else None), its provenance tags) of an allow."""


def has_effects(spec: ToolSpec) -> bool:
    """A call that changes or leaves the system: only its preparation is precompiled."""
    return spec.has_side_effects or bool(spec.labels.sink) or spec.effect in ("write", "external")


def always_allows(policy: FlowPolicy | None, spec: ToolSpec, principal: Principal) -> bool:
    """True when ``policy`` allows every call of ``spec`` by ``principal``, whatever its labels.

    Only the built-in policies are known, by exact type (a subclass may override ``check``);
    any other policy answers False and the call takes the general path.
    """
    if policy is None:
        return True
    kind = type(policy)
    labels = spec.labels
    writes = spec.effect in ("write", "external") or bool(labels.sink)
    if kind is AllowAll:
        return True
    if kind is NoSecretToExternalSink:
        return not labels.sink
    if kind is UntrustedHighRiskArgs or kind is UntrustedWrites:
        return not writes
    if kind is ReadClearance:
        if labels.confidentiality != "secret" and labels.readers is None:
            return True
        return may_read(Label(confidentiality=labels.confidentiality, readers=labels.readers), principal)
    if kind is AllOf:
        assert isinstance(policy, AllOf)
        return all(always_allows(p, spec, principal) for p in policy.policies)
    if kind is AnyOf:
        assert isinstance(policy, AnyOf)
        return any(always_allows(p, spec, principal) for p in policy.policies)
    return False


def labels_decide(policy: FlowPolicy | None) -> bool:
    """True when ``policy`` answers from the tool, the principal and the argument labels alone.

    Only the built-in policies are known, by exact type (a subclass may override ``check``); one
    that reads argument values (``ReadersCoverRecipients``) or any other policy answers False.
    """
    if policy is None:
        return True
    kind = type(policy)
    if kind in _LABEL_ONLY:
        return True
    if kind is AllOf or kind is AnyOf:
        assert isinstance(policy, AllOf | AnyOf)
        return all(labels_decide(p) for p in policy.policies)
    return False


def verdict_of(entry: Entry, run: RunState, principal: Principal, args: dict[str, Any]) -> Verdict | None:
    """The flow verdict of ``args`` under the current run label, if it allows; kept in the entry."""
    flow = run.flow
    context = flow.context
    names = tuple(args)
    held = entry.verdict
    if held is not None and held[0] is context and held[1] == names:
        return held
    spec = entry.spec
    check = evaluate(entry.policy, flow, spec, args, principal=principal, run_id=run.run_id)
    if not isinstance(check.decision, Allow):
        return None
    event: dict[str, Any] | None = None
    if check.request.writes:  # as flow_stage records it for an allowed call
        event = {
            "decision": "allow",
            "tool": spec.name,
            "arguments": {
                a: {"label": lab.to_dict(), "sources": check.how.get(a, [])}
                for a, lab in check.request.arg_labels.items()
            },
            "output": check.output.to_dict(),
        }
    out = check.output
    within = context if out == PUBLIC_TRUSTED or context.join(out) is context else None  # output_of's
    held = entry.verdict = (context, names, event, out, (out, within, out.tags()))
    return held


def ready_effect(entry: Entry, inp: CallInput, args: dict[str, Any]) -> Ready | None:
    """The Ready call the stages would give for a side-effecting call whose arguments the entry's
    schema accepted, with their events; None (nothing recorded or changed) to run the stages."""
    verdict = verdict_of(entry, inp.run, inp.principal, args)
    if verdict is None:
        return None
    run, spec, rec = inp.run, entry.spec, inp.rec
    effects = spec.has_side_effects
    digest = ""
    if inp.node_id is None and effects:
        digest, written = identity_digests(args)
        if written is not None:  # not NFC: the stages look for the node as written in the ledger
            return None
    node = inp.node_id or f"n{next(run.nodes)}"
    call_id = inp.call.id or f"{run.run_id}:{node}"
    rec.call_id = call_id
    rec.add("authorized", entry.shape.authorized)
    rec.add("validated", entry.shape.validated)
    if inp.node_id is None and effects:  # the identity node, as the validate stage names it
        occurrence = inp.occurrence
        if inp.message is not None:
            first = node_named(run.turn, spec.key, digest)
            occurrence = inp.message[first] = inp.message.get(first, 0) + 1
        node = node_named(run.turn, spec.key, digest, occurrence)
    if verdict[2] is not None:
        rec.add("flow_checked", verdict[2])
    label = verdict[3]
    run.flow.pending[call_id] = label
    if not effects:  # a sink without side effects: no key, no ledger
        return Ready(entry.compiled, call_id, node, args, args, None, None, label)
    key = idempotency_key(run.run_id, node, spec.key, args)
    kwargs = {**args, "idempotency_key": key} if spec.takes_key else args
    return Ready(entry.compiled, call_id, node, args, kwargs, key, None, label)
