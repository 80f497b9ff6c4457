"""Re-validate a plan before anything runs: ids, references, tools, permissions, acyclicity, conflicts.

The result is a :class:`CheckedPlan`: each node with its resolved spec(s), its effective read and
write sets, and the edges the scheduler must respect — declared, implied by references, and added
for every pair of nodes whose read/write sets do not commute (oriented by the declared order, then
by listing order). Anything wrong gives one ``ActionError`` naming every offending field.
"""

from __future__ import annotations

import gc
import itertools
import operator
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from actionspace._json_values import MAX_DEPTH, too_costly
from actionspace.catalog.spec import ToolSpec
from actionspace.errors import ActionError, ConfigurationError, FieldError
from actionspace.plan._checked import CheckedNode, CheckedPlan
from actionspace.plan._simple_plan import distinct_ids, keep, kept, plain_tool, simple_plan, simple_tools
from actionspace.plan.conflicts import call_sets, overlaps
from actionspace.plan.model import Plan, PlanNode
from actionspace.plan.order import conflict_edges, declared_edges, topological
from actionspace.plan.refs import Ref, RefError, find_refs, nested_past, parse_ref
from actionspace.plan.types import reference_mismatch, template_mismatch
from actionspace.policy.principal import Principal, authorize
from actionspace.validation.validator import compile_tool
from actionspace.validation.verdicts import Rejected

__all__ = ["CheckedNode", "CheckedPlan", "canonical_arguments", "check_plan"]

_REF_TOPS = frozenset(
    {
        "data",
        "content_hash",
        "provenance",
        "effects",
        "items",
        "artifact_ref",
        "cursor",
        "total",
        "diagnostics",
        "tool_version",
        "call_id",
    }
)
_SPECULATIVE_EFFECTS = frozenset({"none", "read"})
_SCALARS = (str, int, float, bool, type(None))
_SCALAR_TYPES = frozenset(_SCALARS)
_VERIFY = operator.attrgetter("verify")
_NODE_ID = operator.attrgetter("id")


Resolver = Callable[[str], "ToolSpec | ActionError"]


def check_plan(
    plan: Plan,
    resolve: Resolver,
    principal: Principal,
    environments: Mapping[str, Any] | None = None,
    kept_in: dict[int, object] | None = None,
) -> CheckedPlan | ActionError:
    """Check ``plan`` against the catalog (via ``resolve``) and ``principal``; see the module docstring.

    ``environments``: the runtime's environments, for atomic groups. ``kept_in``: the engine's
    kept checks (``PlanEngine.checked_plans``); None: nothing kept."""
    if kept_in is not None:
        again = kept(kept_in, plan, resolve, principal)  # the plan object checked before, still so
        if again is not None:
            return again
    # Checking builds many small objects and no reference cycles: the cyclic collector, which
    # would walk every live object of the process several times for a large plan, pauses.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _check(plan, resolve, principal, environments, kept_in)
    finally:
        if collecting:
            gc.enable()


def _check(
    plan: Plan,
    resolve: Resolver,
    principal: Principal,
    environments: Mapping[str, Any] | None,
    kept_in: dict[int, object] | None,
) -> CheckedPlan | ActionError:
    errors: list[FieldError] = []
    names = list(map(_NODE_ID, plan.nodes))
    ids = distinct_ids(names)
    if ids is None:  # a duplicate, or an id that is not ASCII: each checked by the general loop
        ids = {}
        folded: dict[str, str] = {}
        for i, node in enumerate(plan.nodes):
            if node.id in ids:
                errors.append(FieldError(path=f"/nodes/{i}/id", message=f"duplicate node id {node.id!r}"))
            elif folded or not node.id.isascii():
                _alike(node.id, i, ids, folded, errors)
            ids.setdefault(node.id, i)
    denied: list[ActionError] = []
    checked: dict[str, CheckedNode] = {}
    resolve = _memo(resolve)
    principal_ok: dict[str, ActionError | None] = {}
    plain: dict[str, tuple[tuple[ToolSpec], ActionError | None] | None] = {}
    # While every node so far is simple and depends only on nodes listed before it, its declared
    # edges are added here, in the order declared_edges adds them; from the first other node on
    # (``linked`` nodes in), declared_edges adds the rest.
    edges: list[tuple[str, str]] = []
    linked = -1
    tools = simple_tools(plain, resolve, principal, principal_ok)
    simple = None if errors else simple_plan(plan.nodes, ids, tools, CheckedNode)
    if simple is not None:  # every node simple, listed in dependency order: checked across the plan
        checked, edges = simple
    for i, node in enumerate(() if simple is not None else plan.nodes):
        c = _simple_node(node, i, ids, plain, resolve, principal, denied, principal_ok)
        if c is None:
            c = _check_node(node, i, ids, resolve, principal, errors, denied, principal_ok)
            if linked < 0:
                linked = len(checked)
        elif linked < 0 and node.depends_on:
            deps = node.depends_on
            if not all(map(checked.__contains__, deps)):  # an edge to a node listed later
                linked = len(checked)
            else:
                me, preds = node.id, c.preds  # (its needs are its preds: one set)
                preds.update(deps)
                if len(preds) == len(deps):  # each named once
                    edges.extend(zip(deps, itertools.repeat(me)))
                    for pred in deps:
                        checked[pred].succs.append(me)
                else:
                    preds.clear()
                    for pred in deps:
                        if pred not in preds:
                            preds.add(pred)
                            checked[pred].succs.append(me)
                            edges.append((pred, me))
        if c is not None and node.id not in checked:
            checked[node.id] = c
    if denied and not errors:
        return denied[0]
    if errors:
        return _error(errors)
    if linked < 0:  # simple nodes, listed in dependency order: no references, no read/write sets
        order = list(checked)
        added: list[dict[str, str]] = []
    else:
        edges += declared_edges(checked, linked)
        _check_reference_types(checked, errors)
        if errors:
            return _error(errors)
        ordered = topological(checked)
        if isinstance(ordered, ActionError):
            return ordered
        order = ordered
        added = conflict_edges(checked, order, errors)
        if errors:
            return _error(errors)
    result = CheckedPlan(
        checked,
        edges + [(a["from"], a["to"]) for a in added] if added else edges,
        added,
        names,
        plan.max_concurrency,
        order,
    )
    if simple is not None:  # (each tool of ``plain`` is simple and allowed)
        result.bare = not any(tool[0][0].requires_approval for tool in plain.values() if tool is not None)
        result.plain = list(map(_VERIFY, plan.nodes)).count(None) == len(plan.nodes)
        if not plan.groups and kept_in is not None:
            keep(kept_in, plan, result, plain)
    if plan.groups:
        from actionspace.plan.groups import collapse

        collapsed = collapse(result, plan.groups, order, environments or {})
        if isinstance(collapsed, ActionError):
            return collapsed
        units = topological(collapsed.nodes)
        if isinstance(units, ActionError):
            return ActionError.of(
                "invalid_arguments",
                "an atomic group cannot run as one step: a node outside it sits between its members "
                f"({units.details.get('cycle', [])[:10]})",
                field_errors=[FieldError(path="/groups", message="a group is split by an outside node")],
            )
        collapsed.topo = units
        return collapsed
    return result


def _alike(
    node_id: str, i: int, ids: Mapping[str, int], folded: dict[str, str], errors: list[FieldError]
) -> None:
    """A duplicate for an id that reads as an earlier one once NFKC-normalised (``café`` composed
    and decomposed, a fullwidth ``ｎ1`` and ``n1``): a reference or a reader of the trace could not
    tell which node it names. ``folded``: normal form → the first non-ASCII id that has it (an ASCII
    id is its own normal form, found in ``ids``)."""
    if node_id.isascii():
        first = folded.get(node_id)
    else:
        norm = unicodedata.normalize("NFKC", node_id)
        first = folded.get(norm) or (norm if norm in ids else None)
        folded.setdefault(norm, node_id)
    if first is not None:
        errors.append(
            FieldError(
                path=f"/nodes/{i}/id",
                message=f"duplicate node id {node_id!r}: the same as {first!r} once Unicode-normalised",
            )
        )


def _memo(resolve: Resolver) -> Resolver:
    seen: dict[str, ToolSpec | ActionError] = {}

    def cached(name: str) -> ToolSpec | ActionError:
        hit = seen.get(name)
        if hit is None:
            hit = seen[name] = resolve(name)
        return hit

    return cached


def _error(errors: Sequence[FieldError]) -> ActionError:
    first = errors[0]
    return ActionError.of(
        "invalid_arguments",
        f"the plan was rejected: {first.path}: {first.message}"
        + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""),
        field_errors=list(errors)[:50],
    )


def _check_node(
    node: PlanNode,
    i: int,
    ids: Mapping[str, int],
    resolve: Resolver,
    principal: Principal,
    errors: list[FieldError],
    denied: list[ActionError],
    principal_ok: dict[str, ActionError | None],
) -> CheckedNode | None:
    at = f"/nodes/{i}"
    before = len(errors)
    if node.depends_on or node.independent_of:
        for name, targets in (
            ("depends_on", node.depends_on),
            ("independent_of", node.independent_of),
        ):
            for j, target in enumerate(targets):
                if target not in ids:
                    errors.append(
                        FieldError(path=f"{at}/{name}/{j}", message=f"no node {target!r} in this plan")
                    )
                elif target == node.id:
                    errors.append(FieldError(path=f"{at}/{name}/{j}", message="a node cannot name itself"))
    if node.first_of:
        calls = [(a.tool, a.arguments, f"{at}/first_of/{j}") for j, a in enumerate(node.first_of)]
    else:
        calls = [(node.tool, node.arguments, at)]
    refs: list[Ref] = []
    specs: list[ToolSpec] = []
    for tool, arguments, where in calls:
        nested = any(type(v) not in _SCALARS for v in arguments.values())
        if nested and (costly := too_costly(arguments)) is not None:  # parts held in many places
            errors.append(FieldError(path=f"{where}/arguments", message=costly))
            continue
        if nested and (deep := nested_past(arguments, MAX_DEPTH)) is not None:
            # deeper than any call may hold (the validate stage's bound), and than a walk by recursion can go
            errors.append(
                FieldError(
                    path=f"{where}/arguments{deep}",
                    message=f"nests objects and arrays deeper than {MAX_DEPTH} levels",
                )
            )
            continue
        for pointer, raw in find_refs(arguments) if nested else ():
            try:
                ref = parse_ref(raw)
            except RefError as exc:
                errors.append(FieldError(path=f"{where}/arguments{pointer}", message=str(exc)))
                continue
            if ref.node not in ids:
                errors.append(
                    FieldError(
                        path=f"{where}/arguments{pointer}",
                        message=f"$ref to unknown node {ref.node!r}",
                    )
                )
            elif ref.node == node.id:
                errors.append(
                    FieldError(path=f"{where}/arguments{pointer}", message="$ref to the node itself")
                )
            elif ref.top not in _REF_TOPS:
                errors.append(
                    FieldError(
                        path=f"{where}/arguments{pointer}",
                        message=f"$ref must start at one of {sorted(_REF_TOPS)}, got {ref.path[0]!r}",
                    )
                )
            else:
                refs.append(ref)
        spec = resolve(tool)
        if isinstance(spec, ActionError):
            errors.append(FieldError(path=f"{where}/tool", message=spec.message))
            continue
        if node.first_of and spec.effect not in _SPECULATIVE_EFFECTS:
            errors.append(
                FieldError(
                    path=f"{where}/tool",
                    message=f"speculation runs only effect none/read tools; {spec.name} is {spec.effect}",
                )
            )
        if spec.key not in principal_ok:
            auth = authorize(spec, principal)
            principal_ok[spec.key] = auth.error if isinstance(auth, Rejected) else None
        refusal = principal_ok[spec.key]
        if refusal is not None:
            denied.append(refusal)
        specs.append(spec)
    if len(errors) > before:
        return None
    reads, writes = _sets(node, specs, errors, at)
    scalars = not node.first_of and all(type(v) in _SCALARS for v in node.arguments.values())
    checked = CheckedNode(node, i, tuple(specs), reads, writes, tuple(refs))
    checked.needs = checked.preds  # one set until a conflict edge orders it (order.py)
    checked.scalar_arguments = scalars
    return checked


def _simple_node(
    node: PlanNode,
    i: int,
    ids: Mapping[str, int],
    plain: dict[str, tuple[tuple[ToolSpec], ActionError | None] | None],
    resolve: Resolver,
    principal: Principal,
    denied: list[ActionError],
    principal_ok: dict[str, ActionError | None],
) -> CheckedNode | None:
    """:func:`_check_node` for the commonest node: one tool of effect ``none`` without declared
    read/write sets, scalar arguments (no references), edges to other nodes of the plan. None:
    the general path decides (and names what is wrong).

    ``plain`` keeps, per tool name, its spec and the principal's refusal (None: allowed), or
    None for a tool this path does not take.
    """
    name = node.tool
    if node.first_of or not name or node.reads is not None or node.writes is not None:
        return None
    me = node.id
    known = ids.__contains__
    targets = node.depends_on
    if targets and (me in targets or not all(map(known, targets))):
        return None
    targets = node.independent_of
    if targets and (me in targets or not all(map(known, targets))):
        return None
    if not all(map(_SCALAR_TYPES.__contains__, map(type, node.arguments.values()))):
        return None
    if name in plain:
        tool = plain[name]
    else:
        tool = plain[name] = plain_tool(name, resolve, principal, principal_ok)
    if tool is None:
        return None
    if tool[1] is not None:
        denied.append(tool[1])
    # CheckedNode(node, i, tool[0], (), (), (), scalar_arguments=True), without the generated
    # __init__'s keyword handling: a plan checks one per node
    checked: CheckedNode = _new(CheckedNode)
    checked.node, checked.index, checked.specs = node, i, tool[0]
    checked.reads = checked.writes = checked.refs = checked.members = ()
    checked.preds = checked.needs = set()  # one set until a conflict edge orders it (order.py)
    checked.succs = []
    checked.group, checked.scalar_arguments = None, True
    return checked


_new = object.__new__


def _sets(
    node: PlanNode, specs: Sequence[ToolSpec], errors: list[FieldError], at: str
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The node's effective read and write sets (undeclared sets of read/write tools mean everything)."""
    if node.reads is None and node.writes is None and all(s.effect == "none" for s in specs):
        return (), ()
    reads: list[str] = []
    writes: list[str] = []
    argument_sets = [a.arguments for a in node.first_of] or [node.arguments]
    for spec, given in zip(specs, argument_sets, strict=True):
        args = canonical_arguments(spec, given)
        unknown = [k for k, v in args.items() if any(True for _ in find_refs(v))]
        r, w = call_sets(spec, args, unknown)
        reads.extend(r)
        writes.extend(w)
    if node.reads is not None:
        reads = list(node.reads)
    if node.writes is not None:
        hidden = [w for w in writes if not any(overlaps(w, mine) for mine in node.writes)]
        if hidden:
            errors.append(
                FieldError(path=f"{at}/writes", message=f"hides writes the tool declares: {hidden[:5]}")
            )
        writes = list(node.writes)
    return tuple(dict.fromkeys(reads)), tuple(dict.fromkeys(writes))


def canonical_arguments(spec: ToolSpec, args: Mapping[str, Any]) -> Mapping[str, Any]:
    """``args`` with marked paths in canonical form, so ``./a.json`` and ``a.json`` are one resource."""
    try:
        checks = compile_tool(spec).checks
    except ConfigurationError:
        return args  # the call itself is refused at validation
    return checks.canonical(args) if not checks.empty else args


def _check_reference_types(nodes: dict[str, CheckedNode], errors: list[FieldError]) -> None:
    """Whole-argument references (and templates) whose source output type cannot match the argument's."""
    for c in nodes.values():
        if not c.refs or c.node.first_of:
            continue
        target = c.specs[0]
        for name, value in c.node.arguments.items():
            if isinstance(value, Mapping) and len(value) == 1 and isinstance(value.get("$template"), str):
                used = [r for r in c.refs if r.text in {raw for _p, raw in find_refs(value)}]
                sources = {r.node: nodes[r.node].specs[0] for r in used if not nodes[r.node].node.first_of}
                why = template_mismatch(used, sources, target, name)
                if why is not None:
                    errors.append(FieldError(path=f"/nodes/{c.index}/arguments/{name}", message=why))
                continue
            if isinstance(value, Mapping) and len(value) == 1 and isinstance(value.get("$ref"), str):
                ref = next((r for r in c.refs if r.text == value["$ref"]), None)
                if ref is None or nodes[ref.node].node.first_of:
                    continue
                why = reference_mismatch(ref, nodes[ref.node].specs[0], target, name)
                if why is not None:
                    errors.append(FieldError(path=f"/nodes/{c.index}/arguments/{name}", message=why))
