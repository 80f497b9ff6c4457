"""Atomic groups: writes that must become visible together, or not at all (DESIGN §7).

A plan lists groups (``{"groups": [{"id": "g", "nodes": ["a", "b"], "mode": "transaction"}]}``);
the plan says *how* the writes become visible together:

- ``transaction``: the environment's own transaction (one SQLite/PostgreSQL transaction);
- ``switch``: every write goes to a temporary, and commit switches them all in.

Either way the environment is an object registered on the runtime (``rt.environment(name, env)``)
that speaks :class:`Environment`; each member's tool declares that environment
(``ToolSpec.transaction``) and receives the open :class:`Transaction` as its ``transaction``
argument. Members run one after another in plan order; the runtime commits only when all of them
succeeded and rolls back otherwise (the failed member keeps its error, the others report
``cancelled`` with ``rolled_back``).

The group passes through the ledger as one action keyed by the run, the group id and its members'
calls, so a repeated plan never commits it twice. The environment records that key inside the
transaction it commits, which makes ``committed(key)`` the status query for a lost answer. The
group's ledger tool is timed by its members (:func:`group_timeout`), so neither the start-up
recovery of another process nor a proposal of the same group settles it while they may still run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from actionspace.catalog.spec import DEFAULT_TIMEOUT_S, ToolSpec
from actionspace.errors import ActionError, FieldError
from actionspace.execution.executor import Failed, Outcome, Succeeded
from actionspace.ledger.entries import LedgerEntry
from actionspace.ledger.status import Committed, NotCommitted, StatusAnswer, StillUnknown
from actionspace.plan.model import Group, GroupMode, PlanNode

if TYPE_CHECKING:
    from actionspace.plan.check import CheckedNode, CheckedPlan

__all__ = [
    "GROUP_TOOL_PREFIX",
    "Environment",
    "GroupRun",
    "SpecsWithGroups",
    "Transaction",
    "collapse",
    "environment_spec",
    "group_spec",
    "group_timeout",
]

GROUP_TOOL_PREFIX = "group."
"""Ledger entries of atomic groups name the tool ``group.<environment>@1``."""


@runtime_checkable
class Transaction(Protocol):
    """An open transaction of an environment; tools write through it."""

    def commit(self) -> None:
        """Make every write visible at once; raising means the outcome is unknown."""

    def rollback(self) -> None:
        """Discard every write."""


@runtime_checkable
class Environment(Protocol):
    """Something that can make several writes visible together."""

    mode: GroupMode
    """``transaction`` or ``switch``: what a plan group must ask for to use it."""

    def begin(self, key: str) -> Transaction:
        """Open a transaction; committing it must also record ``key`` durably."""

    def committed(self, key: str) -> bool | None:
        """Was the transaction for ``key`` committed? None when the environment cannot tell."""


@dataclass(frozen=True, slots=True)
class GroupRun:
    """What a group unit carries into the scheduler."""

    group: Group
    environment: Environment
    env_name: str


def collapse(
    checked: CheckedPlan, groups: Sequence[Group], order: Sequence[str], environments: Mapping[str, Any]
) -> CheckedPlan | ActionError:
    """Replace each group's members by one unit node (edges remapped); validate the group first."""
    from actionspace.plan.check import CheckedPlan

    errors: list[FieldError] = []
    owner: dict[str, str] = {}
    position = {k: i for i, k in enumerate(order)}
    units: dict[str, GroupRun] = {}
    for i, group in enumerate(groups):
        at = f"/groups/{i}"
        if group.id in checked.nodes or group.id in units:
            errors.append(FieldError(path=f"{at}/id", message=f"{group.id!r} is already a node or group id"))
            continue
        run = _check_group(checked, group, at, environments, owner, errors)
        if run is not None:
            units[group.id] = run
    if errors:
        return ActionError.of(
            "invalid_arguments",
            f"the plan was rejected: {errors[0].path}: {errors[0].message}",
            field_errors=errors[:50],
        )
    nodes: dict[str, CheckedNode] = {}
    for k, c in checked.nodes.items():
        gid = owner.get(k)
        if gid is None:
            nodes[k] = c
        elif gid not in nodes:
            members = sorted((checked.nodes[m] for m in units[gid].group.nodes), key=lambda m: position[m.id])
            nodes[gid] = _unit(gid, members, units[gid])
    for c in nodes.values():
        inside = {m.id for m in c.members} or {c.id}
        c.preds = {owner.get(p, p) for p in c.preds if p not in inside}
        c.needs = {owner.get(p, p) for p in c.needs if p not in inside}
        c.succs = list(dict.fromkeys(owner.get(s, s) for s in c.succs if s not in inside))
    grouped = [k for k, c in nodes.items() if c.members]
    return CheckedPlan(
        nodes, checked.edges, checked.added_edges, checked.order, checked.max_concurrency, units=grouped
    )


def _check_group(
    checked: CheckedPlan,
    group: Group,
    at: str,
    environments: Mapping[str, Any],
    owner: dict[str, str],
    errors: list[FieldError],
) -> GroupRun | None:
    before = len(errors)
    env_names: set[str] = set()
    for j, member in enumerate(group.nodes):
        c = checked.nodes.get(member)
        where = f"{at}/nodes/{j}"
        if c is None:
            errors.append(FieldError(path=where, message=f"no node {member!r} in this plan"))
            continue
        if member in owner:
            errors.append(FieldError(path=where, message=f"{member!r} is already in group {owner[member]!r}"))
            continue
        owner[member] = group.id
        spec = c.specs[0]
        if c.node.first_of:
            errors.append(FieldError(path=where, message="a speculative node cannot be part of a group"))
        elif spec.effect == "external":
            errors.append(
                FieldError(path=where, message=f"{spec.name} leaves the system; it cannot be rolled back")
            )
        elif spec.transaction is None:
            errors.append(
                FieldError(path=where, message=f"{spec.name} declares no transactional environment")
            )
        else:
            env_names.add(spec.transaction)
    if len(errors) > before:
        return None
    if len(env_names) != 1:
        errors.append(
            FieldError(path=f"{at}/nodes", message=f"members use different environments {sorted(env_names)}")
        )
        return None
    name = env_names.pop()
    env = environments.get(name)
    if env is None:
        errors.append(FieldError(path=f"{at}/nodes", message=f"no environment {name!r} is registered"))
        return None
    if getattr(env, "mode", None) != group.mode:
        errors.append(
            FieldError(
                path=f"{at}/mode", message=f"environment {name!r} offers {getattr(env, 'mode', None)!r}"
            )
        )
        return None
    return GroupRun(group, env, name)


def _unit(gid: str, members: list[CheckedNode], run: GroupRun) -> CheckedNode:
    from actionspace.plan.check import CheckedNode

    first = members[0]
    unit = CheckedNode(
        PlanNode(id=gid, tool=first.node.tool),
        first.index,
        tuple(s for m in members for s in m.specs),
        tuple(dict.fromkeys(r for m in members for r in m.reads)),
        tuple(dict.fromkeys(w for m in members for w in m.writes)),
        tuple(r for m in members for r in m.refs if r.node not in run.group.nodes),
    )
    unit.members = tuple(members)
    unit.group = run
    for m in members:
        unit.preds |= m.preds
        unit.needs |= m.needs
        unit.succs.extend(m.succs)
    return unit


def group_spec(run: GroupRun, members: Sequence[ToolSpec]) -> ToolSpec:
    """The ledger's view of a group: one write, whose status query asks the environment, timed by
    the tools of its ``members`` (:func:`group_timeout`)."""
    return environment_spec(run.env_name, run.environment, members)


def group_timeout(members: Sequence[ToolSpec]) -> float:
    """Seconds one send of a group whose members run ``members``' tools may take: the members run
    one after another, each retried within its own retries' ``deadline_s`` (its last attempt may
    start as late as that) and each attempt bounded by its ``timeout_s``; never below the default
    timeout. As the group's ``timeout_s``, it makes the group's ledger entry's
    :func:`~actionspace.ledger.commit.holder_window` cover its members, as a tool's covers its own
    attempts: a live holder's group is not settled under it (by a status query that truthfully
    answers "not yet" while a member still runs)."""
    span = 0.0
    for spec in members:
        last_start = spec.retry.deadline_s if spec.retry.max_attempts > 1 else 0.0
        span += last_start + spec.timeout_s
    return max(DEFAULT_TIMEOUT_S, span)


def environment_spec(name: str, env: Environment, members: Sequence[ToolSpec] = ()) -> ToolSpec:
    """The ledger tool every group over environment ``name`` is recorded as (``group.<name>@1``),
    its ``timeout_s`` that of a group running ``members``' tools (:func:`group_timeout`)."""

    def status(*, key: str, arguments: Mapping[str, Any]) -> StatusAnswer:
        answer = env.committed(key)
        if answer is True:
            return Committed(result={"committed": True, "found_by": "environment"})
        if answer is False:
            return NotCommitted()
        return StillUnknown(f"environment {name!r} cannot tell")

    return ToolSpec(
        name=f"{GROUP_TOOL_PREFIX}{name}",
        description=f"atomic group over environment {name}",
        effect="write",
        idempotency="query",
        status_query=status,
        timeout_s=group_timeout(members),
    )


class SpecsWithGroups:
    """A catalog view for ``recover()`` that also knows the ledger tools of atomic groups."""

    def __init__(self, catalog: Any, environments: Mapping[str, Environment]) -> None:
        self.catalog = catalog
        self.environments = environments

    def find(self, key: str) -> ToolSpec | None:
        spec: ToolSpec | None = self.catalog.find(key)
        if spec is None and key.startswith(GROUP_TOOL_PREFIX):
            name = key[len(GROUP_TOOL_PREFIX) :].rsplit("@", 1)[0]
            env = self.environments.get(name)
            if env is not None:
                return environment_spec(name, env)
        return spec

    def holding(self, entry: LedgerEntry) -> ToolSpec | None:
        """The spec whose :func:`~actionspace.ledger.commit.holder_window` a live process may hold
        ``entry`` for. A group's is timed by its members, read off the entry's calls (``[member,
        tool@version, arguments]``, as the group runs them); None (left to its holder, as an entry
        of a tool not registered here) when a member's tool is not registered here or the calls
        are not readable: how long such a group runs, only its process can tell."""
        spec: ToolSpec | None = self.catalog.find(entry.tool)
        if spec is not None or not entry.tool.startswith(GROUP_TOOL_PREFIX):
            return spec
        name = entry.tool[len(GROUP_TOOL_PREFIX) :].rsplit("@", 1)[0]
        env = self.environments.get(name)
        calls = entry.arguments.get("calls") if isinstance(entry.arguments, Mapping) else None
        if env is None or not isinstance(calls, list | tuple):
            return None
        members: list[ToolSpec] = []
        for call in calls:
            tool = call[1] if isinstance(call, list | tuple) and len(call) == 3 else None
            member = self.catalog.find(tool) if isinstance(tool, str) else None
            if member is None:
                return None
            members.append(member)
        return environment_spec(name, env, members)


def outcome_of(members: Mapping[str, Any], failure: ActionError | None) -> Outcome:
    """The group's outcome for the ledger: member observations (as dicts) or the first failure."""
    if failure is not None:
        return Failed(failure, 1)
    return Succeeded(dict(members), 1)
