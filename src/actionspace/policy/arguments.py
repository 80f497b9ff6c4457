"""Per-argument provenance policies: which provenances each parameter of a tool accepts.

A :class:`Param` names, for one parameter, the provenance kinds that are allowed, those that need
an approval of the exact call, and what happens to any other (``deny`` by default)::

    send_money = {
        "recipient": Param("user | tool_result"),           # else policy_violation
        "amount": Param("user | tool_result", ask="untrusted"),  # a bill's amount: ask
    }
    policy = NoSecretToExternalSink() & ArgumentPolicy({"send_money": send_money})

An argument is judged by each of its scalars and keys (:mod:`actionspace.policy.provenance`): one
element of a list taken from an untrusted page makes the list untrusted. A parameter the tool
declares high-risk (``labels.high_risk_args``) that the schema's default filled is never used
silently: the call asks, whatever the rule. Tools and parameters with no rule are allowed (compose
with another policy for them). The provenance comes from :class:`~actionspace.policy.
provenance_stage.ProvenanceStage`; a request that reached this policy without it raises
``ConfigurationError`` (the runtime was built without the stage).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from actionspace.errors import ConfigurationError
from actionspace.policy.flow_policies import ALLOW, Ask, Decision, Deny, FlowPolicy, FlowRequest
from actionspace.policy.provenance import KINDS, Kind, ValueProvenance

__all__ = ["ANY", "ArgumentPolicy", "Param", "kinds"]

ANY = "user | tool_result | untrusted | default | model"
"""Every provenance (for a parameter that may hold anything, such as a message body)."""


def kinds(text: str) -> frozenset[Kind]:
    """The kinds of ``"user | tool_result"`` (``""``: none). Raises ValueError on an unknown kind."""
    out: set[Kind] = set()
    for part in text.split("|"):
        name = part.strip()
        if not name:
            continue
        if name not in KINDS:
            raise ValueError(f"unknown provenance {name!r}; choose from {KINDS}")
        out.add(name)
    return frozenset(out)


@dataclass(frozen=True, slots=True, init=False)
class Param:
    """The provenances one parameter accepts: ``allow`` runs, ``ask`` needs an approval of the exact
    call, any other kind gets ``otherwise`` (``deny``: policy_violation, or ``ask``).

    ``links``: when given, the addresses embedded in a string (URLs, e-mail addresses, account
    numbers; see :func:`~actionspace.policy.provenance.embedded`) are judged by these kinds
    instead (any other gets ``otherwise``); when None, they are judged like the value itself.
    """

    allow: frozenset[Kind]
    ask: frozenset[Kind]
    otherwise: Literal["ask", "deny"]
    links: frozenset[Kind] | None

    def __init__(
        self,
        allow: str,
        *,
        ask: str = "",
        otherwise: Literal["ask", "deny"] = "deny",
        links: str | None = None,
    ) -> None:
        if otherwise not in ("ask", "deny"):
            raise ValueError(f"otherwise must be 'ask' or 'deny', got {otherwise!r}")
        allowed, asked = kinds(allow), kinds(ask)
        if allowed & asked:
            raise ValueError(f"{sorted(allowed & asked)} both allowed and asked")
        object.__setattr__(self, "allow", allowed)
        object.__setattr__(self, "ask", asked)
        object.__setattr__(self, "otherwise", otherwise)
        object.__setattr__(self, "links", None if links is None else kinds(links))

    def verdict(self, kind: Kind, *, embedded: bool = False) -> Literal["allow", "ask", "deny"]:
        """What a value of provenance ``kind`` gets (``embedded``: an address inside a string)."""
        if embedded and self.links is not None:
            return "allow" if kind in self.links else self.otherwise
        if kind in self.allow:
            return "allow"
        if kind in self.ask:
            return "ask"
        return self.otherwise

    def __repr__(self) -> str:
        parts = [repr(" | ".join(k for k in KINDS if k in self.allow))]
        if self.ask:
            parts.append(f"ask={' | '.join(k for k in KINDS if k in self.ask)!r}")
        if self.otherwise != "deny":
            parts.append(f"otherwise={self.otherwise!r}")
        if self.links is not None:
            parts.append(f"links={' | '.join(k for k in KINDS if k in self.links)!r}")
        return f"Param({', '.join(parts)})"


class ArgumentPolicy(FlowPolicy):
    """Judges each argument of a call by its provenance, per tool and parameter (see module doc).

    ``rules``: tool name → parameter name → :class:`Param`.
    """

    def __init__(self, rules: Mapping[str, Mapping[str, Param]]) -> None:
        for tool, params in rules.items():
            for name, rule in params.items():
                if not isinstance(rule, Param):
                    raise TypeError(f"{tool}.{name}: {rule!r} is not a Param")
        self.rules = {tool: dict(params) for tool, params in rules.items()}

    def check(self, request: FlowRequest) -> Decision:
        spec = request.spec
        provenance = request.provenance
        if provenance is None:
            raise ConfigurationError(
                "ArgumentPolicy needs each argument's provenance: add ProvenanceStage to the runtime's stages"
            )
        rules = self.rules.get(spec.name, {})
        denied: dict[str, list[ValueProvenance]] = {}
        asked: dict[str, list[ValueProvenance]] = {}
        for name, rule in rules.items():
            for vp in provenance.get(name, ()):
                verdict = rule.verdict(vp.source.kind, embedded=vp.embedded)
                if verdict != "allow":
                    (denied if verdict == "deny" else asked).setdefault(name, []).append(vp)
        risky = set(spec.labels.high_risk_args or ()) | set(spec.high_risk_args)
        for name in sorted(risky - set(denied)):
            defaults = [vp for vp in provenance.get(name, ()) if vp.source.kind == "default"]
            if defaults:
                held = asked.setdefault(name, [])
                held.extend(vp for vp in defaults if vp not in held)
        if denied:
            return Deny(_reason(spec.name, denied, "may not take"), _details(denied))
        if asked:
            return Ask(_reason(spec.name, asked, "needs approval for"), _details(asked))
        return ALLOW

    def __repr__(self) -> str:
        return f"ArgumentPolicy({len(self.rules)} tools)"


def _where(vp: ValueProvenance) -> str:
    return f"{vp.path or '/'}: {vp.source}"


def _details(found: Mapping[str, list[ValueProvenance]]) -> dict[str, Any]:
    return {
        "rule": "argument_provenance",
        "arguments": {a: [_where(vp) for vp in v] for a, v in sorted(found.items())},
    }


def _reason(tool: str, found: Mapping[str, list[ValueProvenance]], verb: str) -> str:
    parts = [
        f"{name} ({', '.join(sorted({vp.source.kind for vp in v}))})" for name, v in sorted(found.items())
    ]
    return f"{tool} {verb} argument(s) of this provenance: {'; '.join(parts)}"
