"""The commit protocol for side-effecting calls (DESIGN §6), written once for sync and async callers.

:func:`protocol` is a generator: it yields a :class:`Dispatch` when the tool must be sent (the
caller runs it, sync or async, and sends back the ``Outcome``) or a :class:`Sleep` while another
caller holds the action, and returns the final ``Observation``. The ledger entry is durable in
``dispatched`` before every send; an outcome that cannot be established is never sent again
blindly: ``native`` tools are asked again with the same key (they dedupe), ``query`` tools are
asked for the status, ``none`` tools end in ``unknown_commit`` for a person to reconcile.

A new action is accepted and dispatched in one write (the trace still records both steps): the
one durable write before the send is the intent. An entry found ``accepted`` (a recovery proved it
was not committed) moves to ``dispatched`` first; one gone from the store (purged) is not sent.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Generator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from actionspace._crash import point
from actionspace.catalog.spec import DEFAULT_TIMEOUT_S, RetryPolicy, ToolSpec
from actionspace.errors import Abandoned, ActionError, said
from actionspace.ledger._intent import intent, new_entry
from actionspace.ledger._shown import noted as _noted
from actionspace.ledger._shown import observed as _observed
from actionspace.ledger._shown import replay as _replay
from actionspace.ledger.entries import Begun, LedgerEntry, LedgerState, LedgerStore, resendable
from actionspace.ledger.keys import args_digest
from actionspace.ledger.late import LeftRunning, settle_when_it_ends, still_running
from actionspace.ledger.liveness import alone
from actionspace.ledger.status import (
    Committed,
    NotCommitted,
    StillUnknown,
    query_status,
    unknown_commit_error,
    within_window,
)
from actionspace.outcomes import Outcome, Succeeded
from actionspace.types import Observation

__all__ = [
    "RECOVERY_AGE_S",
    "AdmitSend",
    "AwaitAttempt",
    "Dispatch",
    "LeftRunning",
    "Settle",
    "Sleep",
    "args_digest",
    "first_send",
    "holder_window",
    "intent",
    "new_entry",
    "proceed",
    "protocol",
    "settled_at_once",
    "settling",
    "still_running",
]

MAX_WAIT_S = 30.0
"""How long a caller waits for another caller that holds the same action before answering ``transient``."""
RECOVERY_AGE_S = 30.0
"""An entry left ``dispatched`` or ``unknown`` this long is a crashed process's: recovery settles it."""


@dataclass(frozen=True, slots=True)
class Dispatch:
    """Send the tool once (same arguments, same key) and send back the Outcome."""


@dataclass(frozen=True, slots=True)
class Sleep:
    seconds: float


@dataclass(frozen=True, slots=True)
class AwaitAttempt:
    """Wait up to ``seconds`` for an attempt still running past its timeout; send back its Outcome
    (None if it still runs)."""

    running: Future[Outcome]
    seconds: float


@dataclass(frozen=True, slots=True)
class Settle:
    """The holder of ``key`` is gone: settle its entry as recovery does (nothing is sent), then
    send back None; the protocol reads the entry again."""

    key: str


Command = Dispatch | Sleep | AwaitAttempt | Settle

_STILL_RUNS = "an attempt that timed out still runs and may yet commit"
_PAST_WINDOW = "past the tool's dedupe window: the same key again could be a second request"
Protocol = Generator[Command, "Outcome | None", Observation]
Observe = Callable[[Outcome], Observation]
Fail = Callable[[ActionError], Observation]
AdmitSend = Callable[[], "ActionError | None"]
"""Admits a call the budget let through as a replay, now that it would send; an error refuses it."""
Record = Callable[[str, Mapping[str, Any]], None]


class _Ledger:
    """Ledger transitions of one action, each recorded in the trace."""

    def __init__(self, store: LedgerStore, entry: LedgerEntry, record: Record) -> None:
        self.store, self.entry, self.record = store, entry, record
        self.gone = False  # the entry was no longer in the store at a move: nothing more is sent

    def move(self, expected: tuple[str, ...], state: LedgerState, **fields: Any) -> bool:
        new = self.entry.evolve(state=state, **fields)
        try:
            stored = self.store.transition(self.entry.key, expected, new)
        except Exception as exc:
            if state not in _SETTLED:
                raise
            # The outcome is known and the store did not take it: this process keeps it (a new
            # proposal replays it and writes it again); the store's entry stays as it was, and
            # after a crash recovery settles it as any entry a send left behind.
            _hold_unrecorded(self.store, new)
            why = f"{type(exc).__name__}: {said(exc)[:200]}"
            moved = {"key": new.key, "from": self.entry.state, "to": state, "attempts": new.attempts}
            self.record("ledger", {**moved, "recorded": False, "error": why})
            self.entry = new
            return True
        if stored is None:
            current = self.store.get(self.entry.key)
            if current is not None:
                self.entry = current
            self.gone = current is None
            return False
        self.record(
            "ledger",
            {"key": self.entry.key, "from": self.entry.state, "to": state, "attempts": stored.attempts},
        )
        self.entry = stored
        return True


_ABANDONED: dict[tuple[int, str], None] = {}
"""(store, key) of entries whose send this process abandoned: no caller of this process holds
them, so a new proposal settles them (resend, status query or ``unknown_commit``) at once. Past
:data:`_MAX_ABANDONED` the oldest is forgotten (a proposal of it then reads ``transient``, another
caller executing it, as one of a crashed process's does until ``recover()`` settles it)."""
_MAX_ABANDONED = 10_000


_SETTLED: tuple[LedgerState, ...] = ("committed", "failed", "unknown_commit")
_COMMITTABLE: tuple[str, ...] = ("dispatched", "unknown", "unknown_commit")
_UNRECORDED: dict[tuple[int, str], LedgerEntry] = {}
"""(store, key) → a settled entry this process could not write to that store."""
_UNRECORDED_LOCK = threading.Lock()
_MAX_UNRECORDED = 10_000


def _hold_unrecorded(store: LedgerStore, entry: LedgerEntry) -> None:
    with _UNRECORDED_LOCK:
        if len(_UNRECORDED) >= _MAX_UNRECORDED:
            del _UNRECORDED[next(iter(_UNRECORDED))]
        _UNRECORDED[(id(store), entry.key)] = entry


def _unrecorded(led: _Ledger) -> LedgerEntry | None:
    """The settled entry of ``led``'s key that this process could not write to its store: written
    now if the store takes it (then None, and ``led`` holds the store's entry), else returned."""
    if not _UNRECORDED:
        return None
    slot = (id(led.store), led.entry.key)
    with _UNRECORDED_LOCK:
        held = _UNRECORDED.get(slot)
    if held is None:
        return None
    try:
        stored = led.store.transition(held.key, ("dispatched", "unknown", "unknown_commit"), held)
    except Exception:
        return held
    with _UNRECORDED_LOCK:
        _UNRECORDED.pop(slot, None)
    current = stored or led.store.get(held.key)
    if current is not None:
        led.entry = current
    return None


def _note_abandoned(store: LedgerStore, key: str) -> None:
    with _UNRECORDED_LOCK:
        if len(_ABANDONED) >= _MAX_ABANDONED:
            del _ABANDONED[next(iter(_ABANDONED))]
        _ABANDONED[(id(store), key)] = None


def _was_abandoned(store: LedgerStore, key: str) -> bool:
    """True (once) when this process abandoned the send of ``key`` on ``store``."""
    if not _ABANDONED:
        return False
    with _UNRECORDED_LOCK:
        slot = (id(store), key)
        if slot not in _ABANDONED:
            return False
        del _ABANDONED[slot]
        return True


def protocol(
    *,
    spec: ToolSpec,
    entry: LedgerEntry,
    store: LedgerStore,
    observe: Observe,
    fail: Fail,
    record: Record,
    still_pending: Callable[[LedgerEntry], Observation] | None = None,
    admit_send: AdmitSend | None = None,
) -> Protocol:
    """Drive one side-effecting action to a settled observation (see the module docstring).

    With ``still_pending``, ``store`` must be :class:`BeginsUnlessPending`: an unsettled identical
    action of the run under another key, found in the insert's own transaction, is answered by
    ``still_pending(that_entry)`` and nothing is written.

    ``admit_send`` (a call the budget let through as a replay) is called once, before the first
    write that would make it send (the entry purged, ``failed`` retryable, ``accepted``, abandoned
    ``unknown``); an ActionError it returns ends the call, nothing written or sent.
    """
    point("before_intent")
    sent = entry.evolve(state="dispatched", attempts=1)
    admit = None if admit_send is None else [admit_send]  # popped when called: admitted once
    if admit and (refused := _refused_afresh(store, entry.key, admit)) is not None:
        return fail(refused)
    begun = intent(store, sent, still_pending, fail)
    if isinstance(begun, Observation):
        return begun
    return (
        yield from proceed(spec, store, begun, entry, observe=observe, fail=fail, record=record, admit=admit)
    )


def proceed(
    spec: ToolSpec,
    store: LedgerStore,
    begun: Begun,
    entry: LedgerEntry,
    *,
    observe: Observe,
    fail: Fail,
    record: Record,
    admit: list[AdmitSend] | None = None,
) -> Protocol:
    """:func:`protocol` once its intent was written (:func:`intent` gave ``begun``): the rest of it."""
    led = _Ledger(store, begun.entry, record)
    if begun.created:
        record("ledger", {"key": entry.key, "from": None, "to": "accepted"})
        dispatched = {"key": entry.key, "from": "accepted", "to": "dispatched", "attempts": 1}
        record("ledger", dispatched)
        if admit and (refused := admit.pop()()) is not None:  # purged after it was read: unsent
            led.move(("dispatched",), "accepted", error=refused.to_dict())
            return fail(refused)
        point("after_dispatch_durable")
        return (yield from _settle(spec, led, observe, fail))
    if led.entry.args_digest != entry.args_digest or led.entry.tool != entry.tool:
        return fail(
            ActionError.of(
                "conflict",
                f"node {entry.node_id} of run {entry.run_id} was already accepted with other arguments",
                resource_ids=(led.entry.key,),
                details={"idempotency_key": led.entry.key, "accepted_tool": led.entry.tool},
            )
        )
    held = _unrecorded(led)
    if held is not None:  # settled here, not yet in the store: never sent again
        if held.state == "failed" and resendable(held):
            why = "its last outcome is not recorded in the ledger yet; it is not sent again until it is"
            return fail(ActionError.of("transient", f"{spec.name}: {why}", details={"sent": False}))
        return _replay(held, fail)
    deadline, delay, settled = time.monotonic() + MAX_WAIT_S, 0.002, False
    while True:
        if led.gone:
            why = f"{spec.name}: its ledger entry was removed while it was being sent; nothing was sent"
            return fail(ActionError.of("transient", why, details={"sent": False}))
        state = led.entry.state
        if state == "accepted" or (state == "failed" and resendable(led.entry)):  # it did not commit
            if admit and (refused := admit.pop()()) is not None:
                return fail(refused)
            if led.move((state,), "dispatched", attempts=led.entry.attempts + 1):
                point("after_dispatch_durable")
                break
            continue
        if state in ("committed", "failed", "unknown_commit"):
            return _replay(led.entry, fail)
        if state == "unknown" and _was_abandoned(store, led.entry.key):
            native = spec.idempotency == "native" and within_window(spec, led.entry)  # dedupes its key
            answer = None if native or still_running(led.entry.key) else query_status(spec, led.entry)
            if isinstance(answer, Committed):
                shown = _observed(observe, Succeeded(answer.result, 1))
                return _commit(led, _noted(shown, resolved_by="status_query"), remote_id=answer.remote_id)
            if native or (isinstance(answer, NotCommitted) and spec.is_async):  # it ended with its caller
                if admit and (refused := admit.pop()()) is not None:
                    _note_abandoned(store, led.entry.key)  # still for the next proposal to settle
                    return fail(refused)
                if led.move(("unknown",), "dispatched", attempts=led.entry.attempts + 1):
                    break
                continue
            why = answer.reason if isinstance(answer, StillUnknown) else _STILL_RUNS
            if isinstance(answer, NotCommitted):  # a thread Python cannot stop may still commit
                why = "not committed yet, and a blocking tool's thread may still run"
            final = unknown_commit_error(spec, led.entry.key, f"its caller was cancelled while it ran; {why}")
            led.move(("unknown",), "unknown_commit", error=final.to_dict())
            return fail(final)
        # dispatched or unknown: another caller holds it, or a crashed one; settled as recovery would
        if not settled and (_holder_gone(spec, led.entry) or alone(store, led.entry.key)):
            settled = True
            yield Settle(led.entry.key)
            current = store.get(led.entry.key)
            if current is not None:
                led.entry = current
            continue
        if time.monotonic() > deadline:  # its holder may live on or be gone: sent or not is not known
            why = f"another caller is executing this action ({state}); its outcome is not known yet"
            details = {"idempotency_key": led.entry.key, "state": state}
            return fail(ActionError.of("unknown_commit", why + "; ask again later", details=details))
        yield Sleep(delay)
        delay = min(delay * 2, 0.1)
        current = store.get(led.entry.key)
        if current is not None:
            led.entry = current
    return (yield from _settle(spec, led, observe, fail))


def _refused_afresh(store: LedgerStore, key: str, admit: list[AdmitSend]) -> ActionError | None:
    """``admit``'s refusal when the entry of ``key`` is gone (purged): the protocol would send afresh."""
    try:
        found = store.get(key)
    except Exception as exc:
        return ActionError.unsent("the ledger could not read the action's entry", exc)
    return admit.pop()() if found is None else None


def holder_window(spec: ToolSpec | None) -> float:
    """Seconds a live process may leave an entry of ``spec``'s tool ``dispatched`` untouched: the
    retries' ``deadline_s`` (one send retries ``transient`` failures without touching the entry,
    its last attempt starting as late as that), an attempt's ``timeout_s``, the wait for its late
    answer, and at least the recovery age. ``None``: a tool not registered here, with defaults."""
    timeout_s, retry = (DEFAULT_TIMEOUT_S, RetryPolicy()) if spec is None else (spec.timeout_s, spec.retry)
    last_start_s = retry.deadline_s if retry.max_attempts > 1 else 0.0
    return max(RECOVERY_AGE_S, last_start_s + 2 * timeout_s + MAX_WAIT_S)


def _holder_gone(spec: ToolSpec, entry: LedgerEntry) -> bool:
    """No caller can still hold ``entry`` (``dispatched`` or ``unknown``): untouched for longer than
    its tool's :func:`holder_window` and no attempt of it still runs in this process. A process
    that crashed and restarted within the recovery age left it too young for the recovery at its
    start; a proposal that finds it later settles it, instead of waiting at every proposal."""
    quiet = time.time() - entry.updated_at
    return quiet >= holder_window(spec) and not still_running(entry.key)


def _settle(spec: ToolSpec, led: _Ledger, observe: Observe, fail: Fail) -> Protocol:
    sends = 1
    busy = False
    """An attempt that timed out still runs: only a ``Committed`` answer is acted on, nothing is
    sent again except to a ``native`` tool (which dedupes its key, concurrent sends included)."""
    while True:
        try:
            outcome = yield Dispatch()
        except Abandoned as abandoned:
            cut = ActionError.of("unknown_commit", "the caller was cancelled while the tool ran")
            if led.move(("dispatched",), "unknown", error=cut.to_dict()):
                _note_abandoned(led.store, led.entry.key)
            if isinstance(abandoned, LeftRunning):
                _when_it_ends(led, abandoned.running, observe, sends)
            raise
        assert outcome is not None
        point("after_response")
        if isinstance(outcome, Succeeded):
            obs = _observed(observe, outcome)
            return _commit(led, _noted(obs, resolved_by="same_key_resend", sends=sends) if sends > 1 else obs)
        error = outcome.error
        if error.category == "unknown_commit" and outcome.running is not None:
            # The attempt still runs on its thread: it may yet commit. Wait (one more timeout) for
            # its answer rather than act on a status that truthfully says "not yet".
            late = yield AwaitAttempt(outcome.running, min(spec.timeout_s, MAX_WAIT_S))
            if late is None:
                _when_it_ends(led, outcome.running, observe, sends)
                busy = True
            else:
                outcome = late
                if isinstance(outcome, Succeeded):
                    return _commit(
                        led, _noted(_observed(observe, outcome), resolved_by="late_answer", sends=sends)
                    )
                error = outcome.error
        if error.category != "unknown_commit":
            led.move(("dispatched",), "failed", error=error.to_dict())
            return fail(error)
        led.move(("dispatched",), "unknown", error=error.to_dict())
        # A native tool dedupes by key (within its window): asking again is the status query.
        if (
            spec.idempotency == "native"
            and sends < spec.retry.max_attempts
            and within_window(spec, led.entry)
            and led.move(("unknown",), "dispatched", attempts=led.entry.attempts + 1)
        ):
            sends += 1
            continue
        if spec.idempotency == "query":
            answer = query_status(spec, led.entry)
            if isinstance(answer, Committed):
                shown = _observed(observe, Succeeded(answer.result, 1))
                found = _noted(shown, resolved_by="status_query", sends=sends)
                return _commit(led, found, remote_id=answer.remote_id)
            if busy:
                why = _STILL_RUNS
            elif (
                isinstance(answer, NotCommitted)
                and sends < spec.retry.max_attempts
                and led.move(("unknown",), "dispatched", attempts=led.entry.attempts + 1)
            ):
                sends += 1
                continue
            else:
                why = (
                    answer.reason if isinstance(answer, StillUnknown) else "still not committed after retries"
                )
        else:
            why = _STILL_RUNS if busy else "the tool has no status query and does not dedupe"
        if spec.idempotency == "native":
            why = "no answer" if within_window(spec, led.entry) else _PAST_WINDOW
        final = unknown_commit_error(spec, led.entry.key, why)
        led.move(("unknown",), "unknown_commit", error=final.to_dict())
        return fail(final)


def _when_it_ends(led: _Ledger, running: Future[Outcome], observe: Observe, sends: int) -> None:
    """Write the outcome of the attempt still ``running`` when it ends (ledger/late.py)."""

    def shape(outcome: Succeeded) -> Observation:
        return _noted(_observed(observe, outcome), resolved_by="late_answer", sends=sends)

    store = led.store
    settle_when_it_ends(
        store,
        led.entry,
        running,
        shape=shape,
        record=led.record,
        keep=lambda settled: _hold_unrecorded(store, settled),
    )


def _commit(led: _Ledger, obs: Observation, remote_id: str | None = None) -> Observation:
    remote = remote_id or obs.diagnostics.get("remote_id")
    moved = led.move(
        _COMMITTABLE,
        "committed",
        observation=obs.to_dict(),
        remote_id=remote,
        error=None,
    )
    # If someone settled it meanwhile (a recover elsewhere), the stored outcome is the truth.
    if not moved and led.entry.state == "committed" and led.entry.observation is not None:
        return Observation.from_dict(led.entry.observation)
    point("after_ledger_commit")
    return obs


def first_send(store: LedgerStore, begun: Begun, record: Record) -> _Ledger:
    """The moves of an action whose intent :func:`intent` just created (``begun.created``), its
    ``accepted`` and ``dispatched`` recorded as :func:`proceed` records them (no ``admit_send``)."""
    key = begun.entry.key
    record("ledger", {"key": key, "from": None, "to": "accepted"})
    record("ledger", {"key": key, "from": "accepted", "to": "dispatched", "attempts": 1})
    point("after_dispatch_durable")
    return _Ledger(store, begun.entry, record)


def settled_at_once(led: _Ledger, outcome: Outcome, observe: Observe) -> Observation | None:
    """The observation of :func:`first_send`'s send when it succeeded, committed as the protocol
    commits it; None for any other outcome (:func:`settling` takes it)."""
    if not isinstance(outcome, Succeeded):
        return None
    point("after_response")
    return _commit(led, _observed(observe, outcome))


def settling(spec: ToolSpec, led: _Ledger, observe: Observe, fail: Fail) -> Protocol:
    """The protocol of :func:`first_send`'s action at its first send (nothing is written before
    it): the send's outcome is the next value sent to it, or ``Abandoned`` thrown into it."""
    steps = _settle(spec, led, observe, fail)
    next(steps)
    return steps
