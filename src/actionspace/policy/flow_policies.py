"""Flow policies: what may flow into a call, given the labels of its arguments.

A policy looks at one :class:`FlowRequest` and answers :data:`ALLOW`, :class:`Ask` (a human
decides, through the approval queue) or :class:`Deny` (``policy_violation``). Policies compose:

- ``p & q``: both must allow; the stricter answer wins (Deny beats Ask beats Allow);
- ``p | q``: either allowing is enough; when neither allows, the milder answer wins.

Built-ins: :class:`NoSecretToExternalSink`, :class:`ReadersCoverRecipients`,
:class:`UntrustedHighRiskArgs`, :class:`UntrustedWrites`, :class:`ReadClearance`, :class:`AllowAll`;
:data:`DEFAULT_FLOW_POLICY` is ``NoSecretToExternalSink() & UntrustedHighRiskArgs(on="ask")``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from actionspace.catalog.spec import ToolSpec
from actionspace.policy.labels import _RANK, PUBLIC_TRUSTED, Label, may_read
from actionspace.policy.occurrence import scalars
from actionspace.policy.principal import Principal

__all__ = [
    "ALLOW",
    "DEFAULT_FLOW_POLICY",
    "RECIPIENT_ARG_NAMES",
    "AllOf",
    "Allow",
    "AllowAll",
    "AnyOf",
    "Ask",
    "Decision",
    "Deny",
    "FlowPolicy",
    "FlowRequest",
    "NoSecretToExternalSink",
    "Origins",
    "ReadClearance",
    "ReadersCoverRecipients",
    "UntrustedHighRiskArgs",
    "UntrustedWrites",
]

OnViolation = Literal["ask", "deny"]

Origins = tuple[tuple[str, Label], ...]
"""Where an argument's label came from: (source id, label) pairs. Source ids are ``user``, a call
id, or ``context`` when nothing more precise is known."""

RECIPIENT_ARG_NAMES: frozenset[str] = frozenset(
    {"recipient", "recipients", "to", "cc", "bcc", "email", "emails", "user_email", "participants"}
)
"""Arguments :class:`ReadersCoverRecipients` reads the recipients from, by default."""


@dataclass(frozen=True, slots=True)
class Allow:
    """The call may proceed."""


@dataclass(frozen=True, slots=True)
class Ask:
    """A human must approve this exact call (its argument digest) before it runs."""

    reason: str
    details: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Deny:
    """The call must not run: ``policy_violation``.

    ``declassify``: an approved declassification of this exact call lets it through.
    """

    reason: str
    details: Mapping[str, Any] = field(default_factory=dict)
    declassify: bool = False


Decision = Allow | Ask | Deny
ALLOW = Allow()


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowRequest:
    """Everything a flow policy sees about one call (add fields here; never positional)."""

    spec: ToolSpec
    arguments: Mapping[str, Any]
    arg_labels: Mapping[str, Label]
    """Per top-level argument, the join of everything it was derived from."""
    principal: Principal
    run_id: str
    origins: Mapping[str, Origins] = field(default_factory=dict)
    """Per argument, the sources that made up its label (for error details and the trace)."""
    provenance: Mapping[str, tuple[Any, ...]] | None = None
    """Per argument, the provenance of each of its values (``ValueProvenance``, see
    :mod:`actionspace.policy.provenance`); None when no provenance stage ran."""
    joined: Label = field(init=False)
    """The join of every argument label (bottom for a call without arguments)."""

    def __post_init__(self) -> None:
        joined = PUBLIC_TRUSTED
        for label in self.arg_labels.values():
            joined = joined.join(label)
        object.__setattr__(self, "joined", joined)

    @property
    def writes(self) -> bool:
        """True for a call that changes or leaves the system (write, external, or a declared sink)."""
        return self.spec.effect in ("write", "external") or bool(self.spec.labels.sink)

    def tainted_by(self, arg: str, bad: Callable[[Label], bool]) -> list[str]:
        """The sources of ``arg`` whose label satisfies ``bad`` (``["context"]`` when unknown)."""
        found = [source for source, label in self.origins.get(arg, ()) if bad(label)]
        return found or ["context"]


class FlowPolicy:
    """Base class: override :meth:`check`. Compose with ``&`` and ``|``."""

    def check(self, request: FlowRequest) -> Decision:
        raise NotImplementedError

    def __and__(self, other: FlowPolicy) -> FlowPolicy:
        return AllOf(self, other)

    def __or__(self, other: FlowPolicy) -> FlowPolicy:
        return AnyOf(self, other)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _flatten(kind: type[AllOf] | type[AnyOf], policies: Iterable[FlowPolicy]) -> tuple[FlowPolicy, ...]:
    out: list[FlowPolicy] = []
    for p in policies:
        if not isinstance(p, FlowPolicy):
            raise TypeError(f"{p!r} is not a FlowPolicy")
        out.extend(p.policies if type(p) is kind else (p,))
    return tuple(out)


def _merge(decisions: list[Ask] | list[Deny]) -> tuple[str, dict[str, Any]]:
    reason = "; ".join(d.reason for d in decisions)
    arguments: dict[str, list[str]] = {}
    for d in decisions:
        for arg, sources in dict(d.details.get("arguments") or {}).items():
            arguments.setdefault(arg, [])
            arguments[arg].extend(s for s in sources if s not in arguments[arg])
    return reason, {"rules": [dict(d.details) for d in decisions], "arguments": arguments}


class AllOf(FlowPolicy):
    """Every policy must allow (``p & q``): any Deny denies, else any Ask asks."""

    def __init__(self, *policies: FlowPolicy) -> None:
        self.policies = _flatten(AllOf, policies)

    def check(self, request: FlowRequest) -> Decision:
        decisions = [p.check(request) for p in self.policies]
        denies = [d for d in decisions if isinstance(d, Deny)]
        if denies:
            if len(denies) == 1:
                return denies[0]
            reason, details = _merge(denies)
            return Deny(reason, details, declassify=all(d.declassify for d in denies))
        asks = [d for d in decisions if isinstance(d, Ask)]
        if len(asks) == 1:
            return asks[0]
        if asks:
            return Ask(*_merge(asks))
        return ALLOW

    def __repr__(self) -> str:
        return " & ".join(repr(p) for p in self.policies)


class AnyOf(FlowPolicy):
    """Either policy allowing is enough (``p | q``); otherwise any Ask asks, else Deny."""

    def __init__(self, *policies: FlowPolicy) -> None:
        self.policies = _flatten(AnyOf, policies)

    def check(self, request: FlowRequest) -> Decision:
        decisions: list[Decision] = []
        for p in self.policies:
            decision = p.check(request)
            if isinstance(decision, Allow):
                return ALLOW
            decisions.append(decision)
        asks = [d for d in decisions if isinstance(d, Ask)]
        if asks:
            return asks[0] if len(asks) == 1 else Ask(*_merge(asks))
        denies = [d for d in decisions if isinstance(d, Deny)]
        if len(denies) == 1:
            return denies[0]
        reason, details = _merge(denies)
        return Deny(reason, details, declassify=any(d.declassify for d in denies))

    def __repr__(self) -> str:
        return "(" + " | ".join(repr(p) for p in self.policies) + ")"


def _check_on(on: str) -> OnViolation:
    if on not in ("ask", "deny"):
        raise ValueError(f"on must be 'ask' or 'deny', got {on!r}")
    return "ask" if on == "ask" else "deny"


class AllowAll(FlowPolicy):
    """Allows every call (labels are still computed and stamped)."""

    def check(self, request: FlowRequest) -> Decision:
        return ALLOW


class NoSecretToExternalSink(FlowPolicy):
    """A sink receives nothing above its ceiling: ``sink_max``, or ``internal`` when unset.

    So secret data never reaches an external sink unless declassified. ``on="deny"`` (default)
    answers ``policy_violation`` (an approved declassification of the exact call lets it through);
    ``on="ask"`` files an approval request instead.
    """

    def __init__(self, *, on: OnViolation = "deny") -> None:
        self.on = _check_on(on)

    def check(self, request: FlowRequest) -> Decision:
        labels = request.spec.labels
        if not labels.sink:
            return ALLOW
        ceiling = labels.sink_max or "internal"
        limit = _RANK[ceiling]
        over = {a: lab for a, lab in request.arg_labels.items() if lab.rank > limit}
        if not over:
            return ALLOW
        level = max(over.values(), key=lambda lab: lab.rank).confidentiality
        details = {
            "rule": "no_secret_to_external_sink",
            "ceiling": ceiling,
            "arguments": {a: request.tainted_by(a, lambda lab: lab.rank > limit) for a in sorted(over)},
        }
        reason = (
            f"{request.spec.name} sends data out and may receive at most {ceiling} data; "
            f"argument(s) {', '.join(sorted(over))} carry {level} data"
        )
        if self.on == "ask":
            return Ask(f"declassify: {reason}", details)
        return Deny(reason, details, declassify=True)

    def __repr__(self) -> str:
        return f"NoSecretToExternalSink(on={self.on!r})"


def _recipients(value: Any) -> tuple[list[str], list[str]]:
    """Everyone a recipient argument names, as (addresses, others): every scalar in it — list
    elements, object keys and values alike — a string as an address, a number or flag as its JSON
    text among the others (no reader id reads it; null names nobody)."""
    addresses: list[str] = []
    others: list[str] = []
    for leaf in scalars(value):
        if isinstance(leaf, str):
            addresses.append(leaf)
        elif leaf is not None:
            others.append(json.dumps(leaf))
    return addresses, others


class ReadersCoverRecipients(FlowPolicy):
    """Data with a reader set goes only to its readers.

    For a sink whose joined argument label has a reader set, every recipient (every value of
    ``recipient_args``, default :data:`RECIPIENT_ARG_NAMES`, down to each list element and each
    key and value of an object) must be a reader; a sink with no recipient argument cannot show
    that, so it is denied too. Not declassifiable.
    """

    def __init__(self, *, recipient_args: Iterable[str] | None = None) -> None:
        self.recipient_args = frozenset(recipient_args) if recipient_args is not None else RECIPIENT_ARG_NAMES

    def check(self, request: FlowRequest) -> Decision:
        readers = request.joined.readers
        if not request.spec.labels.sink or readers is None:
            return ALLOW
        names = sorted(a for a in request.arguments if a in self.recipient_args)
        recipients: list[str] = []
        others: list[str] = []
        for a in names:
            addresses, rest = _recipients(request.arguments[a])
            recipients += addresses
            others += rest
        # no address at all cannot show who receives the data; anything else is judged per recipient
        outside = sorted({r for r in recipients if r not in readers} | (set(others) if recipients else set()))
        if recipients and not outside:
            return ALLOW
        restricted = sorted(a for a, lab in request.arg_labels.items() if lab.readers is not None)
        details = {
            "rule": "readers_cover_recipients",
            "readers": sorted(readers),
            "outside_readers": outside,
            "arguments": {a: request.tainted_by(a, lambda lab: lab.readers is not None) for a in restricted},
        }
        who = ", ".join(outside) if outside else "no recipient argument"
        return Deny(f"{request.spec.name} would send data readable only by its readers to {who}", details)

    def __repr__(self) -> str:
        return "ReadersCoverRecipients()"


class _UntrustedArguments(FlowPolicy):
    """A write or sink with some arguments derived from untrusted data → Ask or Deny.

    A subclass names its ``rule``, which arguments count (:meth:`_hits`) and the reason given.
    """

    rule: ClassVar[str]

    def __init__(self, *, on: OnViolation = "ask") -> None:
        self.on = _check_on(on)

    def check(self, request: FlowRequest) -> Decision:
        if not request.writes:
            return ALLOW
        hits = self._hits(request)
        if not hits:
            return ALLOW
        details = {
            "rule": self.rule,
            "arguments": {a: request.tainted_by(a, lambda lab: lab.untrusted) for a in hits},
        }
        reason = self._reason(request, hits)
        return Ask(reason, details) if self.on == "ask" else Deny(reason, details)

    def _hits(self, request: FlowRequest) -> list[str]:
        raise NotImplementedError

    def _reason(self, request: FlowRequest, hits: list[str]) -> str:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(on={self.on!r})"


class UntrustedHighRiskArgs(_UntrustedArguments):
    """A write or sink whose high-risk arguments derive from untrusted data → Ask or Deny.

    High-risk arguments are ``spec.labels.high_risk_args`` (derived from argument names by default:
    recipient, amount, account, URL …; see ``HIGH_RISK_ARG_NAMES``).
    """

    rule = "untrusted_high_risk_args"

    def _hits(self, request: FlowRequest) -> list[str]:
        risky = request.spec.labels.high_risk_args or ()
        return [a for a in risky if a in request.arg_labels and request.arg_labels[a].untrusted]

    def _reason(self, request: FlowRequest, hits: list[str]) -> str:
        return f"high-risk argument(s) {', '.join(hits)} of {request.spec.name} derive from untrusted data"


class UntrustedWrites(_UntrustedArguments):
    """Any write or sink with an argument derived from untrusted data → Ask or Deny."""

    rule = "untrusted_writes"

    def _hits(self, request: FlowRequest) -> list[str]:
        return sorted(a for a, lab in request.arg_labels.items() if lab.untrusted)

    def _reason(self, request: FlowRequest, hits: list[str]) -> str:
        return f"{request.spec.name} would write data derived from untrusted content ({', '.join(hits)})"


class ReadClearance(FlowPolicy):
    """Reading is authorized: a tool whose output is secret, or has a reader set, may be called only
    by a principal that may read that label (in the readers, or holding ``labels:<level>``)."""

    def check(self, request: FlowRequest) -> Decision:
        labels = request.spec.labels
        if labels.confidentiality != "secret" and labels.readers is None:
            return ALLOW
        output = Label(confidentiality=labels.confidentiality, readers=labels.readers)
        if may_read(output, request.principal):
            return ALLOW
        return Deny(
            f"principal {request.principal.id!r} may not read {output.confidentiality} output of "
            f"{request.spec.name}",
            {"rule": "read_clearance", "label": output.to_dict(), "arguments": {}},
        )


DEFAULT_FLOW_POLICY: FlowPolicy = NoSecretToExternalSink() & UntrustedHighRiskArgs(on="ask")
"""Secret data never reaches an external sink; untrusted high-risk arguments need approval."""
