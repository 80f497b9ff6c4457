"""The replay's offer, budget and provenance decisions (see :mod:`actionspace.trace.replay`)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from actionspace.catalog.spec import ToolSpec
from actionspace.errors import ActionError
from actionspace.policy.budget import Budgets, Meter, Reservation, Usage, estimate, item_count
from actionspace.policy.flow_policies import Allow, Ask, FlowRequest
from actionspace.policy.labels import Label
from actionspace.policy.principal import Principal
from actionspace.policy.provenance import KINDS, Evidence, Source, ValueProvenance, leaves
from actionspace.trace._replay_calls import Call
from actionspace.trace.offers import left_out_of

__all__ = [
    "BudgetReplay",
    "budget_recorded",
    "flow_again",
    "offered",
    "offered_again",
    "parse_source",
    "provenance_again",
    "provenance_recorded",
    "recorded_flow",
    "recorded_principal",
]

_DESCRIBE = "describe_tool"
"""Added to a disclosure offer without a schema: not a catalog tool, not compared."""


def _tool(item: Any) -> str | None:
    if not isinstance(item, Mapping) or item.get("name") == _DESCRIBE:
        return None
    return f"{item.get('name')}@{item.get('version')}#{item.get('schema_hash')}"


def offered(data: Mapping[str, Any]) -> str:
    """The recorded offer: ``name@version#schema_hash`` of each offered tool, sorted."""
    items = data.get("offered")
    if not isinstance(items, list):
        raise ValueError("no list of offered tools")
    return " ".join(sorted(t for t in map(_tool, items) if t is not None)) or "(none)"


def offered_again(data: Mapping[str, Any], rt: Any) -> str:
    """The same request (names, query, limit, phase, capabilities, errors seen) to ``rt``.

    A packed event needs its ``full_set`` (:func:`~actionspace.trace.offers.with_full_set`).
    """
    discovery, catalog = getattr(rt, "discovery", None), getattr(rt, "catalog", None)
    if discovery is None or catalog is None:
        raise ValueError("the runtime has no discovery")
    skipped = {key for key, reason in left_out_of(data) if reason == "not_requested"}
    names = None
    if skipped:
        full = [str(k) for k in data.get("full_set") or []]
        names = {k.partition("@")[0] for k in full if k not in skipped}
    caps = data.get("capabilities")
    selection = discovery.select(
        catalog,
        rt.principal,
        query=data.get("query"),
        limit=data.get("limit"),
        phase=data.get("phase"),
        capabilities=None if caps is None else [str(c) for c in caps],
        errors=[str(x) for x in data.get("errors_seen") or []],
        names=names,
    )
    specs: Sequence[ToolSpec] = selection.offered
    again = sorted(f"{s.name}@{s.version}#{s.schema_hash}" for s in specs if s.name != _DESCRIBE)
    return " ".join(again) or "(none)"


class BudgetReplay:
    """A fresh in-memory meter with the fresh runtime's budgets, fed the run's calls in order.

    Each recorded admission is asked again: the estimate is computed anew from the fresh spec
    when the arguments are known (a cache hit, or unknown arguments, reuse the recorded
    estimate), and each admitted call is settled with what the run recorded it used
    (``metered``). Each call is charged to the principal the run recorded for it
    (:func:`recorded_principal`), as the live run charged it: budgets are kept per run and
    principal, so charging every call of a run shared by several principals to one of them would
    refuse calls the run admitted. Usage of the principal's other runs is not in the trace: a
    ``per="principal"`` budget is judged on this run's usage alone.
    """

    def __init__(self, run_id: str, rt: Any, owner: tuple[str, str | None] | None = None) -> None:
        meter = getattr(rt, "meter", None)
        budgets = getattr(meter, "budgets", None)
        self.meter = Meter(budgets) if isinstance(budgets, Budgets) and len(budgets) else None
        self.run_id = run_id
        if owner is None:  # a trace without ``run_started``: the fresh runtime's principal
            principal: Principal = rt.principal
            owner = (principal.id, principal.tenant)
        self.owner = owner

    def admit(self, call: Call, spec: ToolSpec | None, recorded: Mapping[str, Any]) -> str:
        """``allowed`` or ``denied:<unit>`` for the admission ``recorded`` (a ``budget`` event)."""
        if self.meter is None:
            return "allowed"
        amount = self._amount(call, spec, recorded)
        who = recorded_principal(call, self.owner)
        reservation = self.meter.admit(self.run_id, who, amount)
        if isinstance(reservation, ActionError):
            return f"denied:{reservation.details.get('unit')}"
        self._settle(call, reservation)
        return "allowed"

    def _amount(self, call: Call, spec: ToolSpec | None, recorded: Mapping[str, Any]) -> Usage:
        args = call.arguments
        if spec is not None and isinstance(args, Mapping) and not call.events.get("cache_hit"):
            items = item_count(spec, args) if spec.batch is not None or spec.items_from else 1
            return estimate(spec, args, items=items)
        return _usage(recorded.get("estimate"))

    def _settle(self, call: Call, reservation: Reservation) -> None:
        assert self.meter is not None
        charged = [d.get("charged") for _, d in call.events.get("metered", [])]
        self.meter.settle(reservation, _usage(charged[-1]) if charged else reservation.amount)


def recorded_principal(call: Call, owner: tuple[str, str | None]) -> tuple[str, str | None]:
    """The principal (id, tenant) the run recorded for ``call``: the ``authorized`` event names it
    (its tenant too, when it has one); a trace written before tenants were recorded there gives
    the run's owner's tenant to the owner's id and none to another id (so a principal without a
    tenant acting in a run whose owner has its id and a tenant is taken for the owner). A call
    with no principal recorded (no ``authorized`` event) is the run's owner's (``run_started``)."""
    authorized = call.last("authorized")
    data: Mapping[str, Any] = {} if authorized is None else authorized[1]
    who, tenant = data.get("principal"), data.get("tenant")
    if not isinstance(who, str):
        return owner
    if isinstance(tenant, str):
        return (who, tenant)
    return (who, owner[1] if who == owner[0] and "tenant" not in data else None)


def _usage(value: Any) -> Usage:
    if not isinstance(value, Mapping):
        raise ValueError("no recorded usage")
    return Usage(
        calls=int(value.get("calls", 0)),
        items=int(value.get("items", 0)),
        bytes=int(value.get("bytes", 0)),
        money=float(value.get("money", 0.0)),
    )


def budget_recorded(data: Mapping[str, Any]) -> str:
    verdict = str(data.get("verdict"))
    return f"denied:{data.get('unit')}" if verdict == "denied" else verdict


def provenance_recorded(data: Mapping[str, Any]) -> str:
    """``claims hold`` or ``false claims: a, b`` (the arguments whose claim was false)."""
    false = data.get("false_claims") or {}
    if not isinstance(false, Mapping):
        raise ValueError("false_claims is not an object")
    return f"false claims: {', '.join(sorted(map(str, false)))}" if false else "claims hold"


_USER_CLAIM = re.compile(r" is not in the user's messages$")
_UNKNOWN_ID = re.compile(r"^'(?P<id>.*)' is not an observation of this run$")
_NOT_A_KIND = re.compile(r" is not a provenance \(")
_NOT_DEFAULT = "the schema's default did not fill it"


def provenance_again(call: Call, data: Mapping[str, Any]) -> str:
    """The provenance stage's verdict again, from the evidence the trace holds.

    The trace keeps the user's messages, which calls the run observed, the normalized arguments
    and each value's inferred provenance, but not what an observation contained nor the claims
    that held. So the replay checks again (1) every inferred provenance against the user's
    messages (a value the user typed is ``user``, any other is not) and the observed calls, and
    (2) every recorded false claim about the user's words, a default, an unknown call id or a
    kind outside the closed set. A false claim about what an observation contained stands as
    recorded. With a user message recorded cut short, only the call ids are checked.
    """
    arguments = data.get("arguments")
    if not isinstance(arguments, Mapping):
        raise ValueError("no recorded arguments")
    recorded = data.get("false_claims") or {}
    prov = data.get("provenance") or {}
    if not isinstance(recorded, Mapping) or not isinstance(prov, Mapping):
        raise ValueError("malformed provenance")
    cut = any(c for _, _, c in call.users)
    users = Evidence([(t, u) for t, u, _ in call.users], {})
    defaults = {
        a
        for a, items in prov.items()
        if isinstance(items, list) and items and all(_source(i) == "default" for i in items)
    }
    false = set()
    for arg, why in recorded.items():
        value = arguments.get(arg)
        if _still_false(str(why), value, users, call.observed, arg in defaults, cut):
            false.add(str(arg))
    verdict = f"false claims: {', '.join(sorted(false))}" if false else "claims hold"
    moved = _inference_moved(arguments, prov, users, call.observed, cut)
    return f"{verdict}; inferred differently: {', '.join(moved)}" if moved else verdict


def _still_false(
    why: str, value: Any, users: Evidence, observed: frozenset[str], default: bool, cut: bool
) -> bool:
    """Whether a claim recorded false for ``why`` is false again (True when it cannot be told)."""
    if why == _NOT_DEFAULT:
        return not default
    unknown = _UNKNOWN_ID.match(why)
    if unknown:
        return unknown["id"] not in observed
    if _NOT_A_KIND.search(why):
        return True  # the closed set of kinds is not the runtime's to change
    if _USER_CLAIM.search(why) and not cut:
        return any(not _in_user(users, leaf) for _, leaf, _ in leaves(value) if _checked(leaf))
    return True


def _checked(leaf: Any) -> bool:
    return not (leaf is None or leaf == "" or isinstance(leaf, bool))


def _in_user(users: Evidence, value: Any, *, trusted: bool = True) -> bool:
    found = users.sources(value, only="user")
    return any(s.kind == "user" or (not trusted and s.call_id == "user") for s in found)


def _inference_moved(
    arguments: Mapping[str, Any],
    prov: Mapping[str, Any],
    users: Evidence,
    observed: frozenset[str],
    cut: bool,
) -> list[str]:
    """``arg path`` of every recorded provenance the evidence no longer bears out."""
    moved: list[str] = []
    for arg, items in prov.items():
        if not isinstance(items, list):
            raise ValueError(f"provenance of {arg} is not a list")
        values = {(p, k): v for p, v, k in leaves(arguments.get(arg))}
        for item in items:
            if not isinstance(item, Mapping) or item.get("embedded"):
                continue
            path, key = str(item.get("path", "")), bool(item.get("key"))
            if (path, key) not in values:
                moved.append(f"{arg}{path} (no such value)")
                continue
            source = parse_source(str(item.get("source", "")))
            if not _bears_out(source, values[(path, key)], users, observed, cut):
                moved.append(f"{arg}{path}")
    return moved


def _bears_out(source: Any, value: Any, users: Evidence, seen: frozenset[str], cut: bool) -> bool:
    kind, call_id = source.kind, source.call_id
    if kind == "default":
        return True
    if call_id is not None and call_id != "user" and call_id not in seen:
        return False
    if cut:
        return True
    if kind == "user":
        return _in_user(users, value)
    if kind == "untrusted" and call_id == "user":
        return _in_user(users, value, trusted=False) and not _in_user(users, value)
    if kind == "model":  # found nowhere: not in any user message either
        return not _in_user(users, value, trusted=False)
    return not _in_user(users, value)  # a tool result is the strongest only where the user is not


def _source(item: Any) -> str:
    return str(item.get("source", "")) if isinstance(item, Mapping) else ""


def recorded_flow(decision: str) -> str:
    """The policy's answer behind a recorded flow decision (approvals are the person's)."""
    return {"approved": "ask", "declassified": "deny"}.get(decision, decision)


def flow_again(
    rt: Any,
    spec: ToolSpec,
    arguments: Mapping[str, Any],
    flowed: Mapping[str, Any],
    call: Call,
    run_id: str,
) -> str:
    policy = rt.flow_policy
    if policy is None:
        return "allow"
    recorded = flowed.get("arguments") or {}
    labels = {a: _label(v) for a, v in recorded.items() if isinstance(v, Mapping)}
    proposed = call.last("proposed")
    values = None if proposed is None else _values(proposed[1].get("provenance") or {})
    request = FlowRequest(
        spec=spec,
        arguments=arguments,
        arg_labels=labels,
        principal=rt.principal,
        run_id=run_id,
        provenance=values,
    )
    decision = policy.check(request)
    if isinstance(decision, Allow):
        return "allow"
    return "ask" if isinstance(decision, Ask) else "deny"


def _label(recorded: Mapping[str, Any]) -> Label:
    return Label.from_dict(recorded.get("label") or {})


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
