"""Running an atomic group: members in order inside one transaction, the group through the ledger once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from actionspace.errors import ActionError, said
from actionspace.execution.executor import Outcome, Succeeded
from actionspace.execution.ready import Ready
from actionspace.ledger.commit import new_entry, protocol
from actionspace.ledger.keys import idempotency_key
from actionspace.plan.groups import GroupRun, Transaction, group_spec
from actionspace.plan.refs import MISSING, TemplateTooLarge, parse_ref, substitute
from actionspace.policy.flow import bindings, label_of
from actionspace.policy.labels import Label
from actionspace.trace.recorder import Recorder
from actionspace.types import Observation, ToolCall

if TYPE_CHECKING:
    from actionspace.plan.check import CheckedNode
    from actionspace.plan.scheduler import Scheduler

__all__ = ["member_of", "run_group"]


async def run_group(sched: Scheduler, unit: CheckedNode) -> Observation:
    """Run ``unit``'s members atomically; returns the group's observation (members in ``items``)."""
    run: GroupRun = unit.group
    spec = group_spec(run)
    members = {m.id for m in unit.members}
    engine, state = sched.engine, sched.run_state
    call_id = f"{state.run_id}:{unit.id}"

    def outside(text: str) -> Any:
        ref = parse_ref(text)
        if ref.node in members:
            return {"$ref": text}
        found = sched._ref_value(ref)
        return None if found is MISSING else found

    try:
        planned = [[m.id, m.specs[0].key, substitute(m.node.arguments, outside)] for m in unit.members]
    except TemplateTooLarge as exc:
        error = ActionError.of("invalid_arguments", f"group {unit.id}: {exc}")
        return Observation.failure(error, call_id=f"{state.run_id}:{unit.id}", tool=spec.name)
    key = idempotency_key(state.run_id, f"group:{unit.id}", spec.key, planned)
    rec = Recorder(state, call_id)
    done: dict[str, Observation] = {}

    def observe_group(outcome: Outcome) -> Observation:
        items = tuple(done[m.id] for m in unit.members if m.id in done)  # empty when found by status query
        obs = Observation(
            call_id=call_id,
            tool=spec.name,
            data={"group": unit.id, "mode": run.group.mode, "members": [m.id for m in unit.members]},
            items=items,
        )
        rec.add("observation", {"status": "ok", "tool": spec.name, "group": unit.id})
        return obs

    def fail(error: ActionError) -> Observation:
        rec.add("observation", {"status": "error", "category": error.category, "group": unit.id})
        return Observation.failure(error, call_id=call_id, tool=spec.name)

    entry = new_entry(
        key=key, run_id=state.run_id, node_id=f"group:{unit.id}", spec=spec, arguments={"calls": planned}
    )
    steps = protocol(
        spec=spec, entry=entry, store=engine.ledger, observe=observe_group, fail=fail, record=rec.add
    )

    async def dispatch() -> AsyncIterator[Observation | Outcome]:
        rec.add("dispatched", {"tool": spec.name, "group": unit.id, "key": key})
        yield await _dispatch(sched, unit, key, done)

    result: Observation | None = None
    try:
        async for obs in engine.drive(steps, dispatch):
            result = obs
    finally:
        sched._buffer(rec)
    assert result is not None
    for m in unit.members:
        if m.id in done and result.status != "ok" and done[m.id].status == "ok":
            # the transaction was rolled back: what this member did is gone
            done[m.id] = _rolled_back(done[m.id], unit.id, result.error)
    sched.member_results.update(done)
    return result


async def _dispatch(sched: Scheduler, unit: CheckedNode, key: str, done: dict[str, Observation]) -> Outcome:
    """Begin, run every member with the transaction, then commit (or roll back on the first failure)."""
    from actionspace.execution.executor import Failed

    run: GroupRun = unit.group
    done.clear()
    try:
        tx = run.environment.begin(key)
    except Exception as exc:
        why = f"environment {run.env_name!r} could not begin: {said(exc)}"
        return Failed(ActionError.of("transient", why), 1)
    failure = await _members(sched, unit, tx, done)
    if failure is not None:
        try:
            tx.rollback()
        except Exception as exc:  # nothing became visible either way: the writes were never committed
            failure = ActionError.of(
                failure.category, f"{failure.message} (and the rollback raised {type(exc).__name__})"
            )
        return Failed(failure, 1)
    try:
        tx.commit()
    except Exception as exc:
        why = f"commit of group {unit.id} raised {type(exc).__name__}: {said(exc)}"
        return Failed(ActionError.of("unknown_commit", why), 1)
    return Succeeded({m: o.to_dict() for m, o in done.items()}, 1)


async def _members(
    sched: Scheduler, unit: CheckedNode, tx: Transaction, done: dict[str, Observation]
) -> ActionError | None:
    engine, state = sched.engine, sched.run_state
    for m in unit.members:
        missing: list[str] = []
        try:
            arguments = substitute(
                m.node.arguments, lambda text, gaps=missing: _value(sched, done, text, gaps)
            )
        except TemplateTooLarge as exc:
            arguments, missing = {}, [f"{exc}"]
        else:
            missing = [f"{gap} does not exist" for gap in missing]
        if missing:
            spec = m.specs[0]
            error = ActionError.of("invalid_arguments", f"node {m.id}: {missing[0]}")
            done[m.id] = Observation.failure(
                error, call_id=f"{state.run_id}:{m.id}", tool=spec.name, tool_version=spec.version
            )
            return error
        if m.refs and m.node.writes is not None:  # a narrowing the check could not verify
            undeclared = sched._undeclared_writes(m, arguments)
            if undeclared is not None:
                done[m.id] = undeclared
                return undeclared.error
        call = ToolCall(
            name=m.node.tool,
            arguments=arguments,
            id=f"{state.run_id}:{m.id}",
            provenance=sched._provenance(m, m.node.arguments),
        )
        rec = Recorder(state, call.id)

        def label(text: str, done: dict[str, Observation] = done) -> tuple[str, Label] | None:
            """(call id, output label) of what a reference points at: a member or a plan node."""
            node = parse_ref(text).node
            source = done.get(node) or sched.results.get(node)
            return None if source is None else (source.call_id, label_of(source))

        bound = bindings(m.node.arguments, label) if m.refs else None  # $ref arguments carry their labels
        try:
            ready = await engine.aprepare(
                state, call, principal=sched.principal, rec=rec, node_id=m.id, bound=bound
            )
            if isinstance(ready, Ready):
                spec = ready.compiled.spec
                rec.add("dispatched", {"tool": spec.name, "version": spec.version, "group": unit.id})
                outcome = await engine.executor.arun(spec, {**ready.kwargs, "transaction": tx}, rec.retry)
                obs = engine.observe(ready, outcome, rec)
            else:
                obs = ready
        except Exception as exc:
            obs = engine.internal(exc, rec)
        finally:
            sched._buffer(rec)
        done[m.id] = obs
        if obs.error is not None:
            return obs.error
    return None


def _value(sched: Scheduler, done: dict[str, Observation], text: str, missing: list[str]) -> Any:
    ref = parse_ref(text)
    found = sched._ref_value(ref, done.get(ref.node))
    if found is MISSING:
        missing.append(text)
        return None
    return found


def _rolled_back(obs: Observation, group: str, cause: ActionError | None) -> Observation:
    error = ActionError.of(
        "cancelled",
        f"rolled back with group {group}" + (f": {cause.message}" if cause is not None else ""),
        details={"rolled_back": True, "group": group},
    )
    return Observation.failure(error, call_id=obs.call_id, tool=obs.tool, tool_version=obs.tool_version)


def member_of(group: Observation, member: CheckedNode, group_id: str) -> Observation:
    """A member's observation taken from its group's (ledger-replayed) observation."""
    for item in group.items:
        if item.call_id.endswith(f":{member.id}"):
            return item
    spec = member.specs[0]
    if group.status == "ok":  # committed, found by the environment's status query: no member details
        return Observation(
            call_id=group.call_id.rsplit(":", 1)[0] + f":{member.id}",
            tool=spec.name,
            tool_version=spec.version,
            diagnostics={"group_committed": True, "resolved_by": group.diagnostics.get("resolved_by")},
        )
    cause = group.error.message if group.error is not None else "the group failed"
    error = ActionError.of(
        "cancelled",
        f"node {member.id} did not run: its atomic group failed ({cause})",
        details={
            "phase": "not_dispatched",
            "group": group_id,
        },
    )
    return Observation.failure(
        error,
        call_id=group.call_id.rsplit(":", 1)[0] + f":{member.id}",
        tool=spec.name,
        tool_version=spec.version,
    )
