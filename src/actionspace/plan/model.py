"""Plans: a DAG of tool calls, from code or as JSON from a model.

JSON form (what a model is asked for; ``actionspace plan schema`` prints its JSON Schema)::

    {"nodes": [
       {"id": "n1", "tool": "read_file", "arguments": {"path": "a.json"}},
       {"id": "n2", "tool": "patch", "arguments": {"path": "a.json", "base": {"$ref": "n1.data.hash"}}}
    ]}

``depends_on`` is optional (references imply edges; read/write conflicts add edges in listing order).
``reads`` / ``writes`` narrow or widen the tool's templates, never hide a declared write.
``independent_of`` is a claim that the node commutes with the named nodes: a claim the runtime
finds false rejects the plan. ``first_of`` makes a speculative node (read-only alternatives, the
first sufficient result wins).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from actionspace._unicode import unfit_text
from actionspace.errors import ActionError, FieldError, InvalidPlan
from actionspace.types import Observation

__all__ = ["Alternative", "Group", "GroupMode", "InvalidPlan", "Plan", "PlanNode", "PlanResult", "PlanStatus"]

PlanStatus = Literal["ok", "partial", "error"]
GroupMode = Literal["transaction", "switch"]
_GROUP_MODES = ("transaction", "switch")
Verifier = Callable[[Observation], Any]
"""``verify(observation) -> Accepted | Rejected``: a rejected observation fails its node."""

_NODE_KEYS = frozenset(
    {
        "id",
        "tool",
        "arguments",
        "depends_on",
        "reads",
        "writes",
        "independent_of",
        "first_of",
        "cost_cap",
        "provenance",
        "description",
    }
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Alternative:
    """One candidate call of a speculative node."""

    tool: str
    arguments: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanNode:
    """One action of a plan. ``id`` is also the ledger node id (stable idempotency keys)."""

    id: str
    tool: str = ""
    arguments: Mapping[str, Any] = field(default_factory=dict)
    depends_on: tuple[str, ...] = ()
    reads: tuple[str, ...] | None = None
    """Resource patterns this node reads; None = the tool's templates."""
    writes: tuple[str, ...] | None = None
    """Resource patterns this node writes; None = the tool's templates. Must cover the declared ones."""
    independent_of: tuple[str, ...] = ()
    verify: Verifier | None = None
    """Checked on the node's successful observation; a rejection fails the node (its effects stand)."""
    first_of: tuple[Alternative, ...] = ()
    """Speculative alternatives (effect none/read only); the first sufficient ok result wins."""
    cost_cap: float | None = None
    """Speculation: the most estimated cost (ToolSpec.cost.per_call) the alternatives may spend."""
    provenance: Mapping[str, str] = field(default_factory=dict)
    """Per top-level literal argument, where it came from (default ``model_inferred``)."""

    def __post_init__(self) -> None:
        for name in ("depends_on", "independent_of", "first_of"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        for name in ("reads", "writes"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, tuple(value))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id}
        if self.first_of:
            out["first_of"] = [{"tool": a.tool, "arguments": dict(a.arguments)} for a in self.first_of]
            if self.cost_cap is not None:
                out["cost_cap"] = self.cost_cap
        else:
            out["tool"] = self.tool
            out["arguments"] = dict(self.arguments)
        for name in ("depends_on", "independent_of"):
            if getattr(self, name):
                out[name] = list(getattr(self, name))
        for name in ("reads", "writes"):
            if getattr(self, name) is not None:
                out[name] = list(getattr(self, name))
        if self.provenance:
            out["provenance"] = dict(self.provenance)
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Group:
    """Nodes whose writes must become visible together, or not at all.

    ``mode`` says how: ``transaction`` (the environment's own transaction, e.g. one SQLite
    transaction) or ``switch`` (write temporaries, then switch them in at once). Every member's
    tool must declare the same environment (``ToolSpec.transaction``), registered on the runtime
    with that mode. Members run one after another, in plan order, inside one transaction that
    is committed only if all of them succeed; the group goes through the ledger as one action.
    """

    id: str
    nodes: tuple[str, ...]
    mode: GroupMode = "transaction"

    def __post_init__(self) -> None:
        object.__setattr__(self, "nodes", tuple(self.nodes))

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "nodes": list(self.nodes), "mode": self.mode}


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """A DAG of nodes; see the module docstring for the JSON form."""

    nodes: Sequence[PlanNode]
    """Stored as a tuple."""
    max_concurrency: int | None = None
    """Most nodes running at once; None = the runtime's argument (default 16)."""
    groups: Sequence[Group] = ()
    """Atomic groups of nodes (see :class:`Group`); stored as a tuple."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "nodes", tuple(self.nodes))
        object.__setattr__(self, "groups", tuple(self.groups))

    def __getitem__(self, node_id: str) -> PlanNode:
        for node in self.nodes:
            if node.id == node_id:
                return node
        raise KeyError(node_id)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"nodes": [n.to_dict() for n in self.nodes]}
        if self.max_concurrency is not None:
            out["max_concurrency"] = self.max_concurrency
        if self.groups:
            out["groups"] = [g.to_dict() for g in self.groups]
        return out

    @classmethod
    def from_dict(cls, data: Any, *, verify: Mapping[str, Verifier] | None = None) -> Plan:
        """Read a plan from JSON data; raises :class:`InvalidPlan` (with a typed error) when malformed.

        ``verify`` attaches verifier callables to node ids (JSON cannot carry them).
        """
        errors: list[FieldError] = []
        if not isinstance(data, Mapping):
            raise _invalid([FieldError(path="/", message="a plan must be an object with 'nodes'")])
        raw_nodes = data.get("nodes")
        if not isinstance(raw_nodes, list) or not raw_nodes:
            raise _invalid([FieldError(path="/nodes", message="'nodes' must be a non-empty array")])
        unknown_top = _unexpected(data, {"nodes", "max_concurrency", "groups"})
        if unknown_top:
            errors.append(FieldError(path="/", message=f"unexpected keys {unknown_top}"))
        nodes = []
        for i, raw in enumerate(raw_nodes):
            node = _node(raw, f"/nodes/{i}", errors, verify or {})
            if node is not None:
                nodes.append(node)
        concurrency = data.get("max_concurrency")
        if concurrency is not None and (type(concurrency) is not int or concurrency < 1):
            errors.append(FieldError(path="/max_concurrency", message="must be a positive integer"))
            concurrency = None
        groups = _groups(data.get("groups", []), errors)
        if errors:
            raise _invalid(errors)
        return cls(nodes=tuple(nodes), max_concurrency=concurrency, groups=groups)


def _invalid(errors: Sequence[FieldError]) -> InvalidPlan:
    first = errors[0]
    return InvalidPlan(
        ActionError.of(
            "invalid_arguments",
            f"the plan is malformed: {first.path}: {first.message}"
            + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""),
            field_errors=list(errors)[:50],
        )
    )


def _groups(raw: Any, errors: list[FieldError]) -> tuple[Group, ...]:
    if not isinstance(raw, list):
        errors.append(FieldError(path="/groups", message="must be an array"))
        return ()
    out = []
    for i, g in enumerate(raw):
        at = f"/groups/{i}"
        if not isinstance(g, Mapping) or not isinstance(g.get("id"), str) or not g.get("id"):
            errors.append(FieldError(path=at, message="a group needs an id, nodes and a mode"))
            continue
        nodes = _strings(g.get("nodes"), f"{at}/nodes", errors)
        mode = g.get("mode", "transaction")
        if mode not in _GROUP_MODES:
            errors.append(FieldError(path=f"{at}/mode", message=f"must be one of {list(_GROUP_MODES)}"))
            continue
        if not nodes:
            errors.append(FieldError(path=f"{at}/nodes", message="must name at least one node"))
            continue
        extra = _unexpected(g, {"id", "nodes", "mode"})
        if extra:
            errors.append(FieldError(path=at, message=f"unexpected keys {extra}"))
            continue
        out.append(Group(id=g["id"], nodes=nodes, mode=mode))
    return tuple(out)


def _unexpected(raw: Mapping[Any, Any], allowed: set[str] | frozenset[str]) -> list[str]:
    """The keys of ``raw`` not in ``allowed``, sorted as text (a key JSON cannot hold is one too)."""
    return sorted(repr(k) if not isinstance(k, str) else k for k in raw if k not in allowed)


def _cost_cap(raw: Any) -> float | None:
    """The cap as a float; None when absent. Raises ValueError unless it is a finite number >= 0."""
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise ValueError(raw)
    try:
        cap = float(raw)
    except OverflowError as exc:  # an integer JSON allows and a float cannot hold
        raise ValueError(raw) from exc
    if not (math.isfinite(cap) and cap >= 0):
        raise ValueError(raw)
    return cap


def _strings(raw: Any, path: str, errors: list[FieldError]) -> tuple[str, ...] | None:
    if raw is None:
        return None
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        errors.append(FieldError(path=path, message="must be an array of strings"))
        return None
    return tuple(raw)


def _node(raw: Any, at: str, errors: list[FieldError], verify: Mapping[str, Verifier]) -> PlanNode | None:
    if not isinstance(raw, Mapping):
        errors.append(FieldError(path=at, message="a node must be an object"))
        return None
    before = len(errors)
    node_id = raw.get("id")
    if not isinstance(node_id, str) or not node_id or len(node_id) > 128:
        node_id = ""
        errors.append(
            FieldError(path=f"{at}/id", message="required: a non-empty string of at most 128 chars")
        )
    elif (unfit := unfit_text(node_id)) is not None:  # it names a ledger row and a trace's calls
        node_id = ""
        errors.append(FieldError(path=f"{at}/id", message=f"the id {unfit[1]}"))
    extra = _unexpected(raw, _NODE_KEYS)
    if extra:
        errors.append(FieldError(path=at, message=f"unexpected keys {extra}"))
    first_of: list[Alternative] = []
    if "first_of" in raw and "tool" in raw:  # which would run? (the schema's oneOf)
        errors.append(FieldError(path=f"{at}/tool", message="a node has a tool or first_of, not both"))
    elif "first_of" in raw:
        alts = raw["first_of"]
        if not isinstance(alts, list) or not alts:
            errors.append(FieldError(path=f"{at}/first_of", message="must be a non-empty array"))
        else:
            for j, alt in enumerate(alts):
                if (
                    not isinstance(alt, Mapping)
                    or not isinstance(alt.get("tool"), str)
                    or not isinstance(alt.get("arguments", {}), Mapping)
                ):
                    errors.append(
                        FieldError(
                            path=f"{at}/first_of/{j}", message="must be {tool: string, arguments: object}"
                        )
                    )
                else:
                    first_of.append(Alternative(tool=alt["tool"], arguments=dict(alt.get("arguments", {}))))
    elif not isinstance(raw.get("tool"), str) or not raw.get("tool"):
        errors.append(FieldError(path=f"{at}/tool", message="required: the tool name"))
    arguments = raw.get("arguments", {})
    if not isinstance(arguments, Mapping) or not all(isinstance(k, str) for k in arguments):
        errors.append(FieldError(path=f"{at}/arguments", message="must be an object"))
    depends_on = _strings(raw.get("depends_on", []), f"{at}/depends_on", errors)
    independent = _strings(raw.get("independent_of", []), f"{at}/independent_of", errors)
    reads = _strings(raw.get("reads"), f"{at}/reads", errors)
    writes = _strings(raw.get("writes"), f"{at}/writes", errors)
    try:
        cost_cap = _cost_cap(raw.get("cost_cap"))
    except ValueError:
        cost_cap = None
        errors.append(FieldError(path=f"{at}/cost_cap", message="must be a finite number, at least 0"))
    provenance = raw.get("provenance", {})
    if not isinstance(provenance, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in provenance.items()
    ):
        errors.append(FieldError(path=f"{at}/provenance", message="must map argument names to strings"))
    if len(errors) > before:
        return None
    return PlanNode(
        id=node_id,
        tool=raw.get("tool", ""),
        arguments=dict(arguments),
        depends_on=depends_on or (),
        independent_of=independent or (),
        reads=reads,
        writes=writes,
        first_of=tuple(first_of),
        cost_cap=cost_cap,
        provenance=dict(provenance),
        verify=verify.get(node_id),
    )


@dataclass(slots=True, kw_only=True)
class PlanResult:
    """The outcome of a plan: one observation per node, keyed by node id (never completion order)."""

    run_id: str
    status: PlanStatus
    nodes: dict[str, Observation] = field(default_factory=dict)
    error: ActionError | None = None
    """Set when the plan itself was rejected (nothing ran)."""
    edges: list[tuple[str, str]] = field(default_factory=list)
    """Every ordering edge the scheduler respected (declared, by reference, and from conflicts)."""
    added_edges: list[dict[str, str]] = field(default_factory=list)
    """Edges added from read/write conflicts: {"from", "to", "resource"}."""
    stats: dict[str, Any] = field(default_factory=dict)
    """max_parallel, wall_s, extra_calls (speculation), reused (retry), cancelled."""
    speculative: dict[str, list[Observation]] = field(default_factory=dict)
    """Per speculative node, the alternatives that finished but lost: ``diagnostics["authoritative"]``
    is False and ``bound_to`` names the run, principal and tool version they are valid for."""
    planned: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """Node id → what the node was asked (its checked form), so that a retry (``retry_of``) reuses
    only nodes asked the same again; not part of :meth:`to_dict`."""

    @property
    def failed(self) -> dict[str, ActionError]:
        """Node id → error, for every node that did not end ok."""
        return {k: o.error for k, o in self.nodes.items() if o.error is not None}

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "status": self.status,
            "error": self.error.to_dict() if self.error is not None else None,
            "nodes": {k: o.to_dict() for k, o in self.nodes.items()},
            "edges": [list(e) for e in self.edges],
            "added_edges": self.added_edges,
            "stats": self.stats,
            "speculative": {k: [o.to_dict() for o in v] for k, v in self.speculative.items()},
        }
