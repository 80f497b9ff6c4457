"""The flow check inside the authorize stage: label the call, ask the policy, act on the answer.

- Allow: the call goes on; its output label is returned (the observe stage stamps it).
- Ask: the approval gate. The request is bound to the argument digest and to the rule ``flow``
  (an approval given for another rule of the same call does not count here). A request filed
  records the call's label: the context joined with its arguments' labels (:func:`call_label`).
- Deny: ``policy_violation`` (recovery: drop the tainted input or ask to declassify). When the
  denial is declassifiable (a secret reaching a sink), a pending ``declassify`` request is filed
  in the approval queue; once a human approves it, the very same call (same digest) goes through
  once. Nothing is sent while a call is blocked.

Every write, external or sink call (and every call that is not simply allowed) records a
``flow_checked`` event: the decision, each argument's label and the sources it came from.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import Any

from actionspace._canonical import args_digest, digest_json
from actionspace.approval.gate import Keep, file_request, find_decision
from actionspace.approval.requests import ApprovalRequest, ApprovalStore, new_request_id
from actionspace.catalog.spec import ToolSpec
from actionspace.errors import ActionError
from actionspace.policy.flow import Binding, FlowState, argument_labels, evaluate
from actionspace.policy.flow_policies import Allow, Ask, Deny, FlowPolicy
from actionspace.policy.labels import Label
from actionspace.policy.principal import Principal
from actionspace.types import SYSTEM_CLOCK, Clock

__all__ = ["call_label", "flow_stage", "schema_defaults"]

Record = Callable[[str, Mapping[str, Any]], None]


def flow_stage(
    *,
    policy: FlowPolicy | None,
    state: FlowState,
    spec: ToolSpec,
    arguments: Mapping[str, Any],
    provenance: Mapping[str, str],
    principal: Principal,
    run_id: str,
    node_id: str,
    call_id: str,
    approvals: ApprovalStore | None,
    record: Record,
    sources: Mapping[str, Sequence[str]] | None = None,
    bound: Mapping[str, Binding] | None = None,
    values: Mapping[str, tuple[Any, ...]] | None = None,
    clock: Clock = SYSTEM_CLOCK,
    definition: str | None = None,
    keep: Keep | None = None,
) -> Label | ActionError:
    """The call's output label when it may go on, else the error that ends it.

    ``clock``: where the expiry of an approval reads the time — the clock the approvals were
    decided by (``Approvals.clock``), so an approval expires here when it expires anywhere.
    ``definition``: the tool's definition hash, which an approval is bound to (``approval.gate``).
    ``keep``: stores the call's events before a request is filed (``approval.gate.file_request``).
    """
    defaults = schema_defaults(spec, arguments, provenance) if provenance else ()
    check = evaluate(
        policy,
        state,
        spec,
        arguments,
        principal=principal,
        run_id=run_id,
        sources=sources,
        bound=bound,
        defaults=defaults,
        provenance=values,
    )
    decision = check.decision
    verdict = "allow" if isinstance(decision, Allow) else ("ask" if isinstance(decision, Ask) else "deny")
    outcome: Label | ActionError = check.output
    bind: dict[str, Any] = {
        "run_id": run_id,
        "node_id": node_id,
        "spec": spec,
        "arguments": arguments,
        "provenance": provenance,
        "record": record,
        "proposed_by": principal.to_dict(),
        "clock": clock,
        "definition": definition,
        "keep": keep,
    }
    if not isinstance(decision, Allow):  # a request it files records the call's label
        bind["label"] = _joined(state.context, check.request.arg_labels.values())
    if isinstance(decision, Ask):
        asked = _gate(approvals, "flow", decision.reason, decision.details, **bind)
        if isinstance(asked, ApprovalRequest):
            verdict = "approved"
        else:
            outcome = asked
    elif isinstance(decision, Deny):
        outcome = _violation(decision)
        if decision.declassify and approvals is not None:
            reason = f"declassify: {decision.reason}"
            held = _gate(approvals, "declassify", reason, decision.details, **bind)
            if isinstance(held, ApprovalRequest):
                verdict, outcome = "declassified", check.output
            elif held.category == "needs_approval":
                details = {**outcome.details, "declassify_request": held.details.get("request_id")}
                outcome = ActionError.of("policy_violation", outcome.message, details=details)
    if verdict != "allow" or check.request.writes:
        record(
            "flow_checked",
            {
                "decision": verdict,
                "tool": spec.name,
                "arguments": {
                    a: {"label": lab.to_dict(), "sources": check.how.get(a, [])}
                    for a, lab in check.request.arg_labels.items()
                },
                "output": check.output.to_dict(),
                **({"reason": decision.reason[:300]} if not isinstance(decision, Allow) else {}),
            },
        )
    if not isinstance(outcome, ActionError):
        state.pending[call_id] = outcome
    return outcome


def call_label(
    state: FlowState,
    spec: ToolSpec,
    arguments: Mapping[str, Any],
    provenance: Mapping[str, str],
    *,
    sources: Mapping[str, Sequence[str]] | None = None,
    bound: Mapping[str, Binding] | None = None,
) -> Label:
    """The label of a call as :func:`flow_stage` computes it for a request it files: the run's
    context joined with the label of each argument (a plan's ``$ref`` inputs, verified sources)."""
    defaults = schema_defaults(spec, arguments, provenance) if provenance else ()
    labels, _origins, _how = argument_labels(
        state, arguments, sources=sources, bound=bound, defaults=defaults
    )
    return _joined(state.context, labels.values())


def _joined(context: Label, labels: Iterable[Label]) -> Label:
    for label in labels:
        context = context.join(label)
    return context


def schema_defaults(spec: ToolSpec, arguments: Mapping[str, Any], provenance: Mapping[str, str]) -> list[str]:
    """The arguments marked ``default`` that hold exactly their schema's default: those carry no
    label. The mark alone proves nothing (a caller, or a plan node, may write it for any value),
    so a value the schema does not fix carries the context label like any other."""
    props = spec.input_schema.get("properties")
    if not isinstance(props, Mapping):
        return []
    marked = [a for a, mark in provenance.items() if mark == "default" and a in arguments]
    return [a for a in marked if _is_default(arguments[a], props.get(a))]


def _is_default(value: Any, schema: Any) -> bool:
    """True when ``schema`` declares a default and ``value`` is it as JSON (``1`` is not ``true``;
    key order does not count)."""
    if not isinstance(schema, Mapping) or "default" not in schema:
        return False
    try:
        return digest_json(value) == digest_json(schema["default"])
    except ValueError:  # not JSON: not the schema's constant
        return False


def _lapsed(request: ApprovalRequest, clock: Clock) -> bool:
    """True for an approval whose expiry has passed (one consumed now was valid a moment ago)."""
    return request.expires_at is not None and clock.time() >= request.expires_at


def _violation(decision: Deny) -> ActionError:
    return ActionError.of(
        "policy_violation",
        decision.reason,
        details={**dict(decision.details), "declassifiable": decision.declassify},
    )


def _gate(
    store: ApprovalStore | None,
    rule: str,
    reason: str,
    details: Mapping[str, Any],
    *,
    run_id: str,
    node_id: str,
    spec: ToolSpec,
    arguments: Mapping[str, Any],
    provenance: Mapping[str, str],
    record: Record,
    proposed_by: Mapping[str, Any],
    clock: Clock,
    definition: str | None,
    label: Label,
    keep: Keep | None,
) -> ApprovalRequest | ActionError:
    """The approved request of ``rule`` for this exact call (consumed now), or the error to return."""
    if store is None:
        return ActionError.of("needs_approval", reason, details={**dict(details), "approval_rule": rule})
    digest = args_digest(dict(arguments))
    find = partial(
        find_decision,
        store,
        run_id=run_id,
        node_id=node_id,
        tool=spec.key,
        digest=digest,
        rule=rule,
        record=record,
        effects=False,
        clock=clock,
        proposer=proposed_by,
        definition=definition,
    )
    found = find(replays=spec.has_side_effects)
    if isinstance(found, ApprovalRequest) and _lapsed(found, clock):
        # consumed earlier under this node, and expired since: the call may not have been sent
        # (it failed, or a later gate stopped it), so it goes through only on a decision still valid
        found = find(replays=False)
    if found is not None:
        return found
    request = ApprovalRequest(
        id=new_request_id(),
        run_id=run_id,
        node_id=node_id,
        tool=spec.key,
        args_digest=digest,
        arguments=dict(arguments),
        provenance={name: provenance.get(name, "model_inferred") for name in arguments},
        reason=reason,
        details={**dict(details), "approval_rule": rule},
    )
    return file_request(
        store,
        request,
        record,
        reason=reason[:300],
        rule=rule,
        effects=False,
        proposed_by=proposed_by,
        definition=definition,
        label=label,
        keep=keep,
    )
