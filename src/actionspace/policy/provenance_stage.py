"""The provenance stage: establish each argument value's provenance, check the caller's claims,
and record the ``proposed`` event.

It runs after validation (the arguments are normalized and the defaults written in) and before
the gates, through the engine's stage seam::

    stage = ProvenanceStage()
    rt = Runtime(flow_policy=NoSecretToExternalSink() & ArgumentPolicy(rules), stages=[stage])

For every call it:

1. infers the provenance of every value (:func:`actionspace.policy.provenance.infer`) from the
   run's user messages and the observations shown so far;
2. checks what the caller asserted — ``provenance={"to": "user"}`` (``user``,
   ``tool_result:<call id>``, ``model_inferred``; ``default`` only for a value the schema filled)
   and ``sources={"to": ["user", "<call id>"]}`` — against the same evidence. A claim the
   evidence does not bear out (a value the user never typed, an unknown call id, a kind outside
   the closed set) is ``policy_violation``: nothing further runs;
3. records ``proposed``: the tool, the normalized arguments and each value's provenance (the
   Recorder marks it with the run's label, so a viewer who may not read it sees it redacted);
4. hands the provenance to the flow policies (``FlowRequest.provenance``), where an
   :class:`~actionspace.policy.arguments.ArgumentPolicy` judges it;
5. writes each verified ``sources=`` binding into the call's per-argument provenance
   (:func:`verified_provenance`), so an approval request shows ``user`` or
   ``tool_result:<call id>`` for such an argument, not ``model_inferred``.

A runtime with a user stage never takes the precompiled fast path, so every call is seen here.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from actionspace.errors import ActionError
from actionspace.policy.flow import USER, FlowState
from actionspace.policy.provenance import (
    Evidence,
    FieldTrust,
    ValueProvenance,
    infer,
    leaves,
    structure,
)

__all__ = ["ProvenanceStage", "check_claims", "evidence_of", "verified_provenance"]

MAX_RUNS = 256
"""Runs whose call-id → tool map the stage keeps (the oldest are forgotten first)."""

_NO_CLAIM = frozenset({"model_inferred", "model"})


def evidence_of(
    state: FlowState,
    tools: Mapping[str, str] | None = None,
    fields: FieldTrust | None = None,
    cache: dict[str, Any] | None = None,
) -> Evidence:
    """The evidence of a run's flow state: its user messages and the observations it remembers.

    Each observation is read as the output of the tool it names (``state.tools``); ``tools``
    (call id → tool name) names it for one that names none."""
    untrusted_user = state.user_label.untrusted
    users = [(text, untrusted_user) for text in state.user_texts]
    tools = tools or {}
    named = state.tools
    observations = {
        cid: (named.get(cid) or tools.get(cid), lab.untrusted, data)
        for cid, (lab, data) in list(state.seen.items())
    }
    return Evidence(users, observations, fields=fields, cache=cache)


def check_claims(
    evidence: Evidence,
    arguments: Mapping[str, Any],
    *,
    provenance: Mapping[str, str] | None,
    sources: Mapping[str, Sequence[str]] | None,
    defaults: Sequence[str] = (),
) -> dict[str, str]:
    """Per argument, why the caller's claim about it is false (empty: every claim holds)."""
    false: dict[str, str] = {}
    for name, claim in (provenance or {}).items():
        if name not in arguments or claim in _NO_CLAIM:
            continue
        why = _false_provenance(evidence, arguments[name], str(claim), name in defaults)
        if why:
            false[name] = why
    for name, claimed in (sources or {}).items():
        if name not in arguments or name in false:
            continue
        ids = [str(s) for s in claimed]
        if not ids:
            continue
        unknown = [i for i in ids if i != USER and not evidence.knows(i)]
        if unknown:
            false[name] = f"sources {unknown} are not observations of this run"
            continue
        missing = _not_found(evidence, arguments[name], ids)
        if missing:
            false[name] = f"{missing} occurs in none of {ids}"
    return false


def _false_provenance(evidence: Evidence, value: Any, claim: str, is_default: bool) -> str | None:
    if claim == "default":
        return None if is_default else "the schema's default did not fill it"
    if claim == USER:
        missing = _not_found(evidence, value, [USER])
        return f"{missing} is not in the user's messages" if missing else None
    kind, _, call_id = claim.partition(":")
    if kind == "tool_result" and call_id:
        if not evidence.knows(call_id):
            return f"{call_id!r} is not an observation of this run"
        missing = _not_found(evidence, value, [call_id])
        return f"{missing} is not in {call_id!r}" if missing else None
    return f"{claim!r} is not a provenance (user, tool_result:<call id>, model_inferred, default)"


def _not_found(evidence: Evidence, value: Any, ids: Sequence[str]) -> str | None:
    """A value of ``value`` (shortened) found in none of ``ids``, or None when all are found."""
    for _path, leaf, _key in leaves(value):
        if leaf is None or leaf == "" or isinstance(leaf, bool):
            continue  # a flag carries one bit: no source is claimed for it
        if not any(evidence.sources(leaf, only=i) for i in ids):
            return repr(str(leaf)[:60])
    return None


class ProvenanceStage:
    """The stage (see module doc). ``fields``: per tool, output fields written by the system."""

    def __init__(self, *, fields: FieldTrust | None = None) -> None:
        self.fields = fields
        self._tools: OrderedDict[str, tuple[dict[str, str], dict[str, Any]]] = OrderedDict()
        self._structure: dict[tuple[str, str], frozenset[Any]] = {}

    def _fixed(self, spec: Any) -> frozenset[Any]:
        key = (spec.key, spec.schema_hash)
        fixed = self._structure.get(key)
        if fixed is None:
            fixed = self._structure[key] = structure(spec.input_schema)
        return fixed

    def _run(self, run_id: str) -> tuple[dict[str, str], dict[str, Any]]:
        """(call id → tool name, call id → prepared observation) of one run."""
        known = self._tools.get(run_id)
        if known is None:
            known = self._tools[run_id] = ({}, {})
            while len(self._tools) > MAX_RUNS:
                self._tools.popitem(last=False)
        else:
            self._tools.move_to_end(run_id)
        return known

    def __call__(self, inp: Any, d: Any) -> ActionError | None:
        """The stage: ``inp`` is the engine's ``CallInput``, ``d`` its ``Draft`` (typed loosely:
        this layer sits below the pipeline and must not import it)."""
        spec, checked = d.spec, d.checked
        assert spec is not None and checked is not None
        tools, cache = self._run(inp.run.run_id)
        tools[d.call_id] = spec.name
        evidence = evidence_of(inp.run.flow, tools, self.fields, cache)
        arguments = checked.arguments
        supplied = inp.call.arguments if isinstance(inp.call.arguments, dict) else {}
        filled = checked.provenance.items()
        defaults = [a for a, p in filled if p == "default" and a not in supplied]
        claimed = inp.provenance if inp.provenance is not None else inp.call.provenance
        bound = None
        if inp.bound:
            refs = {n: b.origins for n, b in inp.bound.items() if b.origins}
            bound = {n: [(c, lab.untrusted) for c, lab in o] for n, o in refs.items()}
        values = infer(evidence, arguments, defaults=defaults, bound=bound, fixed=self._fixed(spec))
        unbound = {a: v for a, v in arguments.items() if not (bound and a in bound)}
        false = check_claims(
            evidence,
            unbound,
            provenance={a: p for a, p in (claimed or {}).items() if a not in defaults},
            sources=inp.sources,
            defaults=defaults,
        )
        inp.rec.add(
            "proposed",
            {
                "tool": spec.name,
                "version": spec.version,
                "arguments": dict(arguments),
                "provenance": {a: [vp.to_dict() for vp in vps] for a, vps in values.items()},
                **({"false_claims": false} if false else {}),
            },
        )
        if false:
            return ActionError.of(
                "policy_violation",
                f"false provenance claim(s) for {spec.name}: "
                + "; ".join(f"{a}: {why}" for a, why in sorted(false.items())),
                details={
                    "rule": "provenance_claim",
                    "arguments": {a: [w] for a, w in false.items()},
                },
            )
        d.values = values
        if inp.sources:
            shown = verified_provenance(checked.provenance, inp.sources, unbound)
            if shown != checked.provenance:
                d.checked = dataclasses.replace(checked, provenance=shown)
        return None


def verified_provenance(
    provenance: Mapping[str, str],
    sources: Mapping[str, Sequence[str]],
    arguments: Mapping[str, Any],
) -> dict[str, str]:
    """``provenance`` (per argument: the caller's claim, ``model_inferred`` when it made none) with
    each unclaimed argument that a ``sources=`` binding names shown by that binding (``user``,
    ``tool_result:<call id>``; several joined by `` + ``). Call it once the binding is verified:
    approval requests show what it says, not ``model_inferred``."""
    out = dict(provenance)
    for name, claimed in sources.items():
        ids = [str(i) for i in claimed]
        if name not in arguments or not ids or out.get(name, "model_inferred") not in _NO_CLAIM:
            continue
        out[name] = " + ".join(USER if i == USER else f"tool_result:{i}" for i in ids)
    return out


def provenance_summary(values: Mapping[str, Sequence[ValueProvenance]]) -> dict[str, list[str]]:
    """Per argument, its values' provenance as strings (for approvals and reports)."""
    return {a: sorted({str(vp.source) for vp in vps}) for a, vps in values.items()}
