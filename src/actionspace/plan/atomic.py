"""Running an atomic group: members in order inside one transaction, the group through the ledger once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from actionspace.errors import ActionError, said
from actionspace.execution.executor import Outcome, Succeeded, running_attempt
from actionspace.execution.guarded import Admission
from actionspace.execution.ready import Ready
from actionspace.ledger.commit import AdmitSend, new_entry, protocol
from actionspace.ledger.entries import LedgerStore
from actionspace.ledger.keys import idempotency_key
from actionspace.ledger.memory import MemoryLedgerStore
from actionspace.ledger.recover import running_here
from actionspace.plan._group_members import member_of, rolled_back, unsettled
from actionspace.plan._group_rollback import (
    Settle,
    not_committed,
    not_committed_after,
    not_committed_later,
    not_sent_again,
    released_after,
    reopened,
    roll_back_after,
)
from actionspace.plan.group_budget import (
    group_estimate,
    group_if_sent,
    over_budget,
    rearm_hold,
    release_group,
    reserve_group,
    settle_members,
    undo_members,
)
from actionspace.plan.groups import GroupRun, Transaction, group_spec
from actionspace.plan.refs import MISSING, TemplateTooLarge, parse_ref, substitute
from actionspace.policy.budget import Meter, Reservation, Usage, drawing_from
from actionspace.policy.flow import bindings, label_of
from actionspace.policy.labels import Label
from actionspace.trace.recorder import Recorder
from actionspace.types import Observation, ToolCall

if TYPE_CHECKING:
    from actionspace.plan.check import CheckedNode
    from actionspace.plan.scheduler import Scheduler

__all__ = ["GroupAttempt", "member_of", "run_group"]


async def run_group(sched: Scheduler, unit: CheckedNode) -> Observation:
    """Run ``unit``'s members atomically; returns the group's observation (members in ``items``)."""
    run: GroupRun = unit.group
    spec = group_spec(run, [m.specs[0] for m in unit.members])
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
    attempt = GroupAttempt()
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

    refused, admit_send, attempt.hold = await _over_budget(sched, unit, planned, key, rec)
    attempt.if_sent = None if attempt.hold is None else attempt.hold.if_sent
    if refused is not None:  # refused whole, before its intent: none of its members runs
        denied = fail(refused)
        sched._buffer(rec)
        sched.member_results.update(_account(sched, unit, denied, attempt))
        return denied
    entry = new_entry(
        key=key, run_id=state.run_id, node_id=f"group:{unit.id}", spec=spec, arguments={"calls": planned}
    )
    steps = protocol(
        spec=spec,
        entry=entry,
        store=engine.ledger,
        observe=observe_group,
        fail=fail,
        record=rec.add,
        admit_send=admit_send,
    )

    async def dispatch() -> AsyncIterator[Observation | Outcome]:
        rec.add("dispatched", {"tool": spec.name, "group": unit.id, "key": key})
        yield await _dispatch(sched, unit, key, attempt)

    result: Observation | None = None
    sched.group_attempts[unit.id] = attempt
    engine.writing[key] = None  # noted ``unknown`` should the runtime close once its send began
    try:
        async for obs in engine.drive(steps, dispatch, key=key):
            result = obs
        if result is not None and result.error is not None and result.error.category == "needs_approval":
            await reopened(engine.ledger, key, rec)
    except asyncio.CancelledError:
        if attempt.rolled_back is not None:  # stopped while members ran: their writes were undone
            why = f"group {unit.id} was cancelled while its members ran; its transaction was rolled back"
            if attempt.rollback_pending:
                why += " once its member's worker thread returned (its entry is settled then, or by recovery)"
            details = {"phase": "running", "rolled_back": bool(attempt.rolled_back), "group": unit.id}
            error = ActionError.of("cancelled", why, details=details)
            stopped = Observation.failure(error, call_id=call_id, tool=spec.name)
            sched.member_results.update(_account(sched, unit, stopped, attempt))
            if attempt.cut and attempt.rolled_back and not_committed(engine.ledger, key, error, rec):
                sched.stopped_groups[unit.id] = stopped  # the group's observation, once its task ends
        raise
    finally:
        del sched.group_attempts[unit.id]
        engine.writing.pop(key, None)
        release_group(_meter(sched), attempt.hold)
        sched._buffer(rec)
    assert result is not None
    sched.member_results.update(_account(sched, unit, result, attempt))
    return result


async def _over_budget(
    sched: Scheduler, unit: CheckedNode, planned: list[list[Any]], key: str, rec: Recorder
) -> tuple[ActionError | None, AdmitSend | None, Reservation | None]:
    """(``budget_exceeded`` when the members' estimates together do not fit, recorded as the
    budget gate records a refused call, else None; the same check for the commit protocol to run
    before it sends, for a group let through here, else None; the hold reserving the estimates
    that the members' admissions draw on, else None). A group the ledger answers without
    sending (``key`` settled: its replay) spends nothing, so it is let through here; should the
    ledger find its entry sendable after all (purged meanwhile), it is checked before it is sent."""
    guard = sched.engine.stages.guard
    if guard is None or guard.meter is None:
        return None, None, None
    meter, run_id, principal = guard.meter, sched.run_state.run_id, sched.principal
    members = {m.id for m in unit.members}
    calls = [(m.specs[0], args) for m, (_k, _s, args) in zip(unit.members, planned, strict=True)]
    need = group_estimate(calls, members)

    def recorded(refused: ActionError | None) -> ActionError | None:
        if refused is not None:
            details = refused.details
            event = {"verdict": "denied", "category": refused.category, "unit": details["unit"]}
            rec.add(
                "budget",
                {**event, "estimate": need.to_dict(), "remaining": details["remaining"], "group": unit.id},
            )
        return refused

    if await _replayed(sched.engine.ledger, key):
        return None, lambda: recorded(over_budget(meter, run_id, principal, need, unit.id)), None
    sent = group_if_sent(calls, members)
    held = await reserve_group(meter, run_id, principal, need, unit.id, key=key, if_sent=sent)
    if isinstance(held, ActionError):
        return recorded(held), None, None
    return None, None, held


_SENT_AGAIN = ("transient", "rate_limited")
"""Categories of a ``failed`` group the ledger sends again (it did not commit); any other replays."""


async def _replayed(store: LedgerStore, key: str) -> bool:
    """Whether the ledger answers the group of ``key`` from its record, sending nothing: it is
    ``committed``, ``unknown_commit``, or ``failed`` for good. Read off the event loop unless the
    store is in memory; a store that does not answer is no replay (the budget is checked)."""
    try:
        if isinstance(store, MemoryLedgerStore):
            entry = store.get(key)
        else:
            entry = await asyncio.to_thread(store.get, key)
    except Exception:
        return False
    if entry is None:
        return False
    if entry.state == "failed":
        return (entry.error or {}).get("category") not in _SENT_AGAIN
    return entry.state in ("committed", "unknown_commit")


@dataclass(slots=True)
class GroupAttempt:
    """What the latest dispatch of a group did: its members' observations and its rollback."""

    done: dict[str, Observation] = field(default_factory=dict)
    rolled_back: bool | None = None
    """None: no rollback was needed; False: the rollback raised (``rollback_error`` says what)."""
    rollback_error: str | None = None
    running: str | None = None
    """The member whose call is under way (its writes, if any, are in the transaction)."""
    members: bool = False
    """Its members are running: the transaction is open and its commit not begun."""
    blocking: bool = False
    """The member under way runs a blocking tool on a worker thread (a cancel would not stop it)."""
    cut: bool = False
    """The members were stopped (cancelled) and the transaction rolled back; commit never began."""
    admitted: dict[str, Admission] = field(default_factory=dict)
    """The budget admissions of this dispatch's members, settled when the dispatch ends."""
    hold: Reservation | None = None
    """The group's reservation of its members' estimates, drawn on by their admissions."""
    if_sent: Usage | None = None
    """What the hold is charged should the process die once the group was sent, as reserved."""
    undone: bool = False
    """A dispatch rolled back: the hold is charged nothing if sent until the group is sent again."""
    late: Future[Outcome] | None = None
    """The attempt of the member under way when it ended without waiting for its worker thread
    (timed out): that thread still uses the transaction's connection."""
    rollback_pending: bool = False
    """The rollback waits for a member still running on its worker thread (``rolled_back`` False)."""

    def stoppable(self) -> bool:
        """Cancelling the group's task now stops it before its commit, its writes rolled back."""
        return self.members and not self.blocking

    def rollback(self, tx: Transaction, member: Future[Outcome] | None = None, settle: Settle = None) -> None:
        """Roll ``tx`` back, noting whether that succeeded (nothing was committed either way).

        ``member``: the attempt of a member still running on its worker thread (a cut or a
        timeout does not stop it), which still uses ``tx``'s connection. Rolling back (and closing)
        a connection another thread is using can crash the interpreter, so the rollback is then
        left to that attempt's end, on its thread (``rollback_pending``), followed by ``settle``."""
        if member is not None:
            self.rolled_back, self.rollback_pending = False, True
            roll_back_after(member, tx, settle)
            return
        try:
            tx.rollback()
            self.rolled_back = True
        except Exception as exc:
            self.rolled_back = False
            self.rollback_error = f"{type(exc).__name__}: {said(exc)}"


async def _dispatch(sched: Scheduler, unit: CheckedNode, key: str, attempt: GroupAttempt) -> Outcome:
    """Begin, run every member with the transaction, then commit (or roll back on the first failure)."""
    from actionspace.execution.executor import Failed

    run: GroupRun = unit.group
    if attempt.undone:  # sent again after a rollback: the hold is charged again should it die
        unarmed = rearm_hold(_meter(sched), attempt.hold, attempt.if_sent)
        if unarmed is not None:  # never sent without its hold
            return _not_rearmed(sched, unit, unarmed)
        attempt.undone = False
    attempt.done.clear()
    attempt.rolled_back = attempt.rollback_error = attempt.running = None
    attempt.cut = attempt.blocking = attempt.rollback_pending = False
    attempt.late = None
    try:
        tx = run.environment.begin(key)
    except Exception as exc:
        _settle_budgets(sched, unit, attempt, kept=False)  # nothing of it ran: nothing charged
        why = f"environment {run.env_name!r} could not begin: {said(exc)}"
        return Failed(ActionError.of("transient", why), 1)
    attempt.members = True
    try:
        failure = await _members(sched, unit, tx, attempt)
    except BaseException as exc:  # cancelled under the group: nothing of it may stay open or become visible
        attempt.members = False
        member = running_attempt(exc) if isinstance(exc, asyncio.CancelledError) else None
        member = None if member is None or member.done() else member
        why = f"group {unit.id} was cancelled while its members ran; its transaction was rolled back"
        error = ActionError.of("cancelled", why, details={"phase": "running", "group": unit.id})
        settle = not_committed_later(sched.engine.ledger, key, error)
        if member is not None:  # recovery here leaves the entry alone until the member's rollback ran
            settle = released_after(settle, running_here(key))
        attempt.rollback(tx, member, settle)
        _settle_budgets(sched, unit, attempt, kept=False)
        if not isinstance(exc, asyncio.CancelledError):
            raise
        attempt.cut = True
        # a new cancel, without the blocking member's attempt it may carry: that attempt's late
        # outcome is the member's, never the group's, whose transaction is gone
        raise asyncio.CancelledError(*exc.args) from None
    attempt.members = False
    if failure is not None:  # a member that timed out may still run, using the transaction
        late = attempt.late if attempt.late is not None and not attempt.late.done() else None
        ended: Future[Outcome] | None = None if late is None else Future()
        attempt.rollback(tx, late, None if ended is None else not_sent_again(ended, unit.id, failure))
        if attempt.late is not None and late is None:  # it returned meanwhile: known not committed
            _settle_budgets(sched, unit, attempt, kept=False)
            return not_committed_after(unit.id, failure, bool(attempt.rolled_back))
        _settle_budgets(sched, unit, attempt, kept=False)
        if attempt.rollback_error is not None:  # never committed all the same
            failure = ActionError.of(
                failure.category, f"{failure.message} (and the rollback raised {attempt.rollback_error})"
            )
        return Failed(failure, 1, running=ended)  # the ledger waits for it, and sends nothing meanwhile
    try:
        tx.commit()
    except Exception as exc:
        _settle_budgets(sched, unit, attempt, kept=True)  # it may stand: its members stay charged
        why = f"commit of group {unit.id} raised {type(exc).__name__}: {said(exc)}"
        return Failed(ActionError.of("unknown_commit", why), 1)
    _settle_budgets(sched, unit, attempt, kept=True)
    return Succeeded({m: o.to_dict() for m, o in attempt.done.items()}, 1)


def _not_rearmed(sched: Scheduler, unit: CheckedNode, why: str) -> Outcome:
    """The group's end when its hold could not be charged again for a new send: ``transient``,
    nothing sent (asking again is safe), the trace told why on the group's call."""
    from actionspace.execution.executor import Failed

    event = {"group": unit.id, "recorded": False, "budget_unsettled": why, "sent": False}
    sched._record(f"{sched.run_state.run_id}:{unit.id}", "metered", event)
    message = (
        f"group {unit.id} was not sent again: the budget store did not take its hold's charge "
        f"should the process die ({why}); nothing was sent"
    )
    details = {"sent": False, "group": unit.id, "budget_unsettled": why}
    return Failed(ActionError.of("transient", message, details=details), 1)


def _settle_budgets(sched: Scheduler, unit: CheckedNode, attempt: GroupAttempt, *, kept: bool) -> None:
    """Settle the members' budget reservations with the group's end (``kept``: it committed, or may
    have), each member's trace told what it was charged (nothing, when the rollback undid it: the
    hold is then charged nothing too, should the process die before releasing it)."""
    admitted, attempt.admitted = attempt.admitted, {}
    if kept:
        settled = settle_members(admitted, attempt.done, kept=True)
    else:
        settled = undo_members(_meter(sched), admitted, attempt.hold)
        attempt.undone = attempt.hold is not None
    for member, charged, why in settled:
        event: dict[str, Any] = {"charged": charged.to_dict(), "group": unit.id}
        if why is not None:
            event.update(recorded=False, budget_unsettled=why)
        sched._record(f"{sched.run_state.run_id}:{member}", "metered", event)


def _meter(sched: Scheduler) -> Meter | None:
    guard = sched.engine.stages.guard
    return guard.meter if guard is not None else None


def _account(
    sched: Scheduler, unit: CheckedNode, group: Observation, attempt: GroupAttempt
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
            out[m.id] = unsettled(m, group, unit.id)
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
    sched: Scheduler,
    node: str,
    obs: Observation,
    group: str,
    cause: ActionError | None,
    attempt: GroupAttempt,
) -> Observation:
    """A member's observation once the rollback undid it, the trace told (and whether the undo held)."""
    undone = rolled_back(obs, group, cause, attempt)
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
    sched: Scheduler, unit: CheckedNode, tx: Transaction, attempt: GroupAttempt
) -> ActionError | None:
    from actionspace.execution.executor import Failed

    engine, state, done = sched.engine, sched.run_state, attempt.done
    for m in unit.members:
        if unit.id in sched.abort_requested:  # asked to stop: the members so far are rolled back
            raise asyncio.CancelledError(f"group {unit.id}: abort requested")
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
            with drawing_from(attempt.hold):  # its admission draws on the group's hold
                ready = await engine.aprepare(
                    state, call, principal=sched.principal, rec=rec, node_id=m.id, bound=bound
                )
            if isinstance(ready, Ready):
                if ready.admission is not None:  # its reservation is settled with the group
                    attempt.admitted[m.id], ready.admission = ready.admission, None
                spec = ready.compiled.spec
                rec.add("dispatched", {"tool": spec.name, "version": spec.version, "group": unit.id})
                attempt.blocking = not spec.is_async
                outcome = await engine.executor.arun(spec, {**ready.kwargs, "transaction": tx}, rec.retry)
                attempt.blocking = False
                attempt.late = outcome.running if isinstance(outcome, Failed) else None
                obs = engine.observe(ready, outcome, rec)
            else:
                obs = ready
        except Exception as exc:
            obs = engine.internal(exc, rec)
        finally:
            sched._buffer(rec)
        done[m.id] = obs = sched._verify(m, obs)  # a rejected result fails the group, as any failure
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
