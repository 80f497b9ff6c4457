"""Running an atomic group: members in order inside one transaction, the group through the ledger once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
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
    attempt = _Attempt()
    done = attempt.done

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
        yield await _dispatch(sched, unit, key, attempt)

    result: Observation | None = None
    try:
        async for obs in engine.drive(steps, dispatch):
            result = obs
    except asyncio.CancelledError:
        if attempt.rolled_back is not None:  # stopped while members ran: their writes were undone
            why = f"group {unit.id} was cancelled while its members ran; its transaction was rolled back"
            stopped = Observation.failure(ActionError.of("cancelled", why), call_id=call_id, tool=spec.name)
            sched.member_results.update(_account(sched, unit, stopped, attempt))
        raise
    finally:
        sched._buffer(rec)
    assert result is not None
    sched.member_results.update(_account(sched, unit, result, attempt))
    return result


@dataclass(slots=True)
class _Attempt:
    """What the latest dispatch of a group did: its members' observations and its rollback."""

    done: dict[str, Observation] = field(default_factory=dict)
    rolled_back: bool | None = None
    """None: no rollback was needed; False: the rollback raised (``rollback_error`` says what)."""
    rollback_error: str | None = None
    running: str | None = None
    """The member whose call is under way (its writes, if any, are in the transaction)."""

    def rollback(self, tx: Transaction) -> None:
        """Roll ``tx`` back, noting whether that succeeded (nothing was committed either way)."""
        try:
            tx.rollback()
            self.rolled_back = True
        except Exception as exc:
            self.rolled_back = False
            self.rollback_error = f"{type(exc).__name__}: {said(exc)}"


async def _dispatch(sched: Scheduler, unit: CheckedNode, key: str, attempt: _Attempt) -> Outcome:
    """Begin, run every member with the transaction, then commit (or roll back on the first failure)."""
    from actionspace.execution.executor import Failed

    run: GroupRun = unit.group
    attempt.done.clear()
    attempt.rolled_back = attempt.rollback_error = attempt.running = None
    try:
        tx = run.environment.begin(key)
    except Exception as exc:
        why = f"environment {run.env_name!r} could not begin: {said(exc)}"
        return Failed(ActionError.of("transient", why), 1)
    try:
        failure = await _members(sched, unit, tx, attempt)
    except BaseException:  # cancelled under the group: nothing of it may stay open or become visible
        attempt.rollback(tx)
        raise
    if failure is not None:
        attempt.rollback(tx)
        if attempt.rollback_error is not None:  # never committed all the same
            failure = ActionError.of(
                failure.category, f"{failure.message} (and the rollback raised {attempt.rollback_error})"
            )
        return Failed(failure, 1)
    try:
        tx.commit()
    except Exception as exc:
        why = f"commit of group {unit.id} raised {type(exc).__name__}: {said(exc)}"
        return Failed(ActionError.of("unknown_commit", why), 1)
    return Succeeded({m: o.to_dict() for m, o in attempt.done.items()}, 1)


def _account(
    sched: Scheduler, unit: CheckedNode, group: Observation, attempt: _Attempt
) -> dict[str, Observation]:
    """Each member's final observation, the trace told of every member whose outcome the group's
    end changed: an ok member undone by the rollback, one whose commit is unknown, one never run."""
    out: dict[str, Observation] = {}
    unknown = group.error is not None and group.error.category == "unknown_commit"
    for m in unit.members:
        obs = attempt.done.get(m.id)
        if group.status == "ok" or (obs is not None and obs.status != "ok"):
            out[m.id] = obs if obs is not None else member_of(group, m, unit.id)
            continue
        if unknown:
            out[m.id] = _unsettled(m, group, unit.id)
            event = {**_event_of(out[m.id]), "group": unit.id}
            sched._record(out[m.id].call_id, "observation", event)
        elif obs is None and m.id == attempt.running:  # cut off inside the transaction
            spec = m.specs[0]
            obs = Observation(
                call_id=f"{sched.run_state.run_id}:{m.id}", tool=spec.name, tool_version=spec.version
            )
            out[m.id] = _undone(sched, m.id, obs, unit.id, group.error, attempt)
        elif obs is None:
            out[m.id] = member_of(group, m, unit.id)
            note = {"node": m.id, "phase": "not_dispatched", "group": unit.id}
            sched._record(None, "plan_node_cancelled", note)
        else:
            out[m.id] = _undone(sched, m.id, obs, unit.id, group.error, attempt)
    return out


def _undone(
    sched: Scheduler, node: str, obs: Observation, group: str, cause: ActionError | None, attempt: _Attempt
) -> Observation:
    """A member's observation once the rollback undid it, the trace told (and whether the undo held)."""
    undone = _rolled_back(obs, group, cause, attempt)
    event = {**_event_of(undone), "group": group, "rolled_back": bool(attempt.rolled_back)}
    sched._record(obs.call_id, "observation", event)
    note = {"node": node, "phase": "rolled_back", "group": group, "compensated": attempt.rolled_back}
    if attempt.rollback_error is not None:
        note["rollback_error"] = attempt.rollback_error
    sched._record(obs.call_id, "plan_node_cancelled", note)
    return undone


def _event_of(obs: Observation) -> dict[str, Any]:
    assert obs.error is not None
    return {"status": "error", "tool": obs.tool, "version": obs.tool_version, "category": obs.error.category}


async def _members(
    sched: Scheduler, unit: CheckedNode, tx: Transaction, attempt: _Attempt
) -> ActionError | None:
    engine, state, done = sched.engine, sched.run_state, attempt.done
    for m in unit.members:
        attempt.running = m.id
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
        attempt.running = None
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


def _rolled_back(obs: Observation, group: str, cause: ActionError | None, attempt: _Attempt) -> Observation:
    why = f": {cause.message}" if cause is not None else ""
    details: dict[str, Any] = {"rolled_back": True, "group": group}
    if not attempt.rolled_back:  # never committed all the same, but the undo did not report success
        details = {"rolled_back": False, "committed": False, "group": group}
        why += f"; the rollback raised {attempt.rollback_error}"
    error = ActionError.of("cancelled", f"rolled back with group {group}{why}", details=details)
    return Observation.failure(error, call_id=obs.call_id, tool=obs.tool, tool_version=obs.tool_version)


def _unsettled(member: CheckedNode, group: Observation, group_id: str) -> Observation:
    """A member of a group whose commit is not established: it may stand, it was never undone."""
    spec = member.specs[0]
    cause = group.error.message if group.error is not None else "the group's commit is not established"
    error = ActionError.of(
        "unknown_commit",
        f"node {member.id} ran inside group {group_id}, whose commit is not established ({cause}); "
        "query the group's status before acting on it again",
        details={"group": group_id, "phase": "commit"},
    )
    call_id = group.call_id.rsplit(":", 1)[0] + f":{member.id}"
    return Observation.failure(error, call_id=call_id, tool=spec.name, tool_version=spec.version)


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
    if group.error is not None and group.error.category == "unknown_commit":
        return _unsettled(member, group, group_id)
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
