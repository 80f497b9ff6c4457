"""What a server needs to continue a run another server started, and who may continue it.

When a run is started through the service, the runner records what it was given in a
``service_run_submitted`` event: the plan (Plan JSON) or the raw model outputs, with the sha256 of
their canonical JSON, the id of the server that drives the run and the end of its lease
(``until``, seconds since the epoch). A body whose JSON is longer than
:data:`MAX_SUBMISSION_CHARS` is recorded as not continuable (its length only).

A run is driven by one server at a time; ``service_run_driver`` events say who:

- ``service_run_submitted``: the starting server drives the run, its lease ending at ``until``;
- ``{"action": "renewed", "server": S, "until": t}``: S, driving the run, extends its lease to
  ``t`` (a live server renews every run it drives on a timer, never per call);
- ``{"action": "released", "server": S}``: S stopped while the run was unfinished (it cancelled
  what was still running), or let the run go while a call of it waits for a person (it claims it
  back when the wait ends); the run is no longer driven, if S drove it;
- ``{"action": "continued", "server": S, "at": n, "until": t}``: S took the run over. The event is
  written at seq ``n``, the number after the last event S read, and counts only where it was stored
  there: of two servers that read the same trace, the store keeps one event at ``n`` (SQLite and
  PostgreSQL refuse the other; a store that numbers it after is read as not taking it). It takes a
  run no server drives, or one whose driver's lease had ended when it was written (``from`` names
  that driver, ``expired`` the end of its lease): the driver died without releasing it.

A server that sends an approved call alone (``service/held_calls.py``) marks the send in
``service_call_sending`` events: ``{"action": "sending", "sender": token, "node": N, "request_id": R,
"until": t}`` before it, renewed while it lasts, and ``{"action": "sent", "sender": token}`` after
it. While such a mark is live (not sent, ``until`` not past), the run is not continued and node N's
in-flight ledger entries are not settled (``service/leases.py``): the send may yet commit, and it
is never made sendable twice.

A ``continued`` event says why it was written: ``request_id`` (an approval brought the run
here, :func:`take_over`), ``lapsed`` (a scan found its driver gone, :func:`adopt`) or ``waited``
(its own driver claiming it back, :func:`reclaim`).

:func:`take_over` continues a run only when the trace proves no live server drives it: its
submission is recorded and readable (same digest), it has no ``run_finished``, and the last server
that drove it released it or let its lease end. A driver recorded without a lease (an older
version) that died without releasing leaves its runs driven: they are not continued (their approved
calls are resumed alone). Leases are read against the reader's clock: servers sharing a store keep
their clocks within a small part of the lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from actionspace.approval.requests import ApprovalRequest
from actionspace.plan.control import CancelScope
from actionspace.runtime import Runtime
from actionspace.trace.events import TraceEvent

__all__ = [
    "DEFAULT_LEASE_S",
    "DRIVER_KIND",
    "MAX_SUBMISSION_CHARS",
    "SENDING_KIND",
    "SUBMITTED_KIND",
    "Lease",
    "Submission",
    "adopt",
    "continuable",
    "driver_of",
    "last_observations",
    "lease_of",
    "outlast",
    "reclaim",
    "release",
    "renew",
    "sending",
    "sending_alone",
    "submission_event",
    "take_over",
    "taken_from",
    "without",
]

_log = logging.getLogger("actionspace.service")

SUBMITTED_KIND = "service_run_submitted"
DRIVER_KIND = "service_run_driver"
SENDING_KIND = "service_call_sending"
MAX_SUBMISSION_CHARS = 512 * 1024
"""Characters of a submitted plan's or output list's JSON kept to continue its run (larger: the
run is not continued after a restart)."""

DEFAULT_LEASE_S = 60.0
"""Seconds a server's claim on a run it drives lasts unless renewed (renewed every third of it)."""

_PAST_S = 0.05
"""Seconds past the end of a lease a watcher reads the trace again (so that it has ended)."""
_CLAIM_ATTEMPTS = 5
"""Times a claim is tried again when another event took its number (an unrelated append)."""

Mode = Literal["plan", "calls"]
Admit = Callable[[Any], bool]
"""Asked with a run's submitted body before a server claims the run: False, it does not."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Submission:
    """A run's recorded submission, read back whole."""

    mode: Mode
    body: Any
    """The Plan JSON (``plan``) or the list of raw model outputs (``calls``)."""


def _digest(body: Any) -> str:
    text = json.dumps(body, sort_keys=True, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def submission_event(mode: Mode, body: Any, server: str, until: float | None = None) -> dict[str, Any]:
    """The ``service_run_submitted`` payload of ``body`` submitted to ``server``, whose lease on
    the run ends at ``until`` (seconds since the epoch; None: no lease, as an older version)."""
    event: dict[str, Any] = {"mode": mode, "server": server}
    if until is not None:
        event["until"] = until
    try:
        chars = len(json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False))
        digest = _digest(body)
    except (TypeError, ValueError, RecursionError):
        return {**event, "continuable": False, "reason": "not JSON"}
    if chars > MAX_SUBMISSION_CHARS:
        return {**event, "continuable": False, "chars": chars, "reason": "too large"}
    return {**event, "continuable": True, "sha256": digest, "body": body}


def _submission(event: TraceEvent) -> Submission | None:
    """The submission ``event`` recorded; None when it is not continuable or not read back whole."""
    data = event.data
    mode, body = data.get("mode"), data.get("body")
    if data.get("continuable") is not True or mode not in ("plan", "calls"):
        return None
    if (mode == "plan" and not isinstance(body, Mapping)) or (mode == "calls" and not isinstance(body, list)):
        return None
    try:
        if _digest(body) != data.get("sha256"):
            return None  # the store kept another value than the one submitted
    except (TypeError, ValueError, RecursionError):
        return None
    return Submission(mode="plan" if mode == "plan" else "calls", body=body)


@dataclass(frozen=True, slots=True, kw_only=True)
class Lease:
    """Who drives a run, and until when (None: the driver recorded no lease, it never ends)."""

    server: str
    until: float | None

    def ended(self, now: float) -> bool:
        return self.until is not None and now > self.until


def _until(data: Mapping[str, Any]) -> float | None:
    value = data.get("until")
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return None
    return float(value)


def lease_of(events: Sequence[TraceEvent]) -> Lease | None:
    """The lease of the server driving the run of ``events`` (None: none does, or none ever did)."""
    lease: Lease | None = None
    for e in events:
        data = e.data
        if e.kind == SUBMITTED_KIND and data.get("server"):
            lease = Lease(server=str(data["server"]), until=_until(data))
        elif e.kind != DRIVER_KIND or not data.get("server"):
            continue
        action, server = data.get("action"), str(data["server"])
        if action == "released" and lease is not None and server == lease.server:
            lease = None
        elif action == "renewed" and lease is not None and server == lease.server:
            until = _until(data)
            if lease.until is not None and until is not None and until > lease.until:
                lease = Lease(server=server, until=until)
        elif action == "continued" and data.get("at") == e.seq and _takes(lease, data, e.ts):
            lease = Lease(server=server, until=_until(data))
    return lease


def _takes(lease: Lease | None, data: Mapping[str, Any], ts: float) -> bool:
    """A ``continued`` event written at ``ts`` takes the run from ``lease``'s driver: none drove
    it, or it names that driver and was written after its lease ended."""
    return lease is None or (data.get("from") == lease.server and lease.ended(ts))


def driver_of(events: Sequence[TraceEvent]) -> str | None:
    """The id of the server driving the run of ``events`` (None: none does, or none ever did); a
    driver whose lease ended drives it until another server takes it over."""
    lease = lease_of(events)
    return None if lease is None else lease.server


def continuable(
    events: Sequence[TraceEvent], node_id: str | None, now: float
) -> tuple[Submission, Lease | None] | None:
    """The submission of a run no live server drives, and the lease that ended (None: released);
    ``node_id``: the held call a server resumes (of a ``calls`` run, it must name an output)."""
    submitted = [e for e in events if e.kind == SUBMITTED_KIND]
    if len(submitted) != 1 or any(e.kind == "run_finished" for e in events):
        return None
    if sending(events, now):
        return None  # a live server sends an approved call of it alone
    lease = lease_of(events)
    if lease is None:
        if not any(e.kind == DRIVER_KIND and e.data.get("action") == "released" for e in events):
            return None
    elif not lease.ended(now):
        return None
    found = _submission(submitted[0])
    if found is None or (found.mode == "calls" and node_id is not None and held_output(node_id) is None):
        return None
    return found, lease


def held_output(node_id: str) -> tuple[int, int | None] | None:
    """(output index from 1, call index from 1 or None) of a call node ``c3`` / ``c3.2``."""
    match = re.fullmatch(r"c([1-9][0-9]{0,5})(?:\.([1-9][0-9]{0,5}))?", node_id)
    if match is None:
        return None
    return int(match[1]), None if match[2] is None else int(match[2])


def last_observations(events: Sequence[TraceEvent], request_id: str) -> dict[str | None, Mapping[str, Any]]:
    """Call id → its last observation in ``events``, of every server; the held call's
    ``needs_approval`` under ``request_id`` is left out (its resumed send answered it)."""
    asked = {
        e.call_id for e in events if e.kind == "approval_requested" and e.data.get("request_id") == request_id
    }
    answered: dict[str | None, Mapping[str, Any]] = {}
    for e in events:
        if e.kind == "observation" and not (
            e.call_id in asked and e.data.get("category") == "needs_approval"
        ):
            answered[e.call_id] = e.data
    return answered


def take_over(
    rt: Runtime,
    request: ApprovalRequest,
    server: str,
    *,
    lease_s: float = DEFAULT_LEASE_S,
    clock: Callable[[], float] = time.time,
    admit: Admit | None = None,
) -> Submission | None:
    """Claim the run of ``request`` for ``server``, with a lease of ``lease_s`` seconds, and return
    its submission, when the trace proves no live server drives it (see the module docstring);
    None otherwise (nothing is claimed). ``admit`` is asked, with the submitted body, before the
    claim is written: False leaves the run as it is (``server`` has no room for it)."""
    mark = {"request_id": request.id}
    return _claim(
        rt, request.run_id, server, request.node_id, mark, lease_s=lease_s, clock=clock, admit=admit
    )


def adopt(
    rt: Runtime,
    run_id: str,
    server: str,
    *,
    lease_s: float,
    clock: Callable[[], float] = time.time,
    admit: Admit | None = None,
) -> Submission | None:
    """Claim ``run_id`` for ``server`` as :func:`take_over` does, for a run no approval brought
    here (its driver died, or stopped, while no call of it waited for a person)."""
    return _claim(rt, run_id, server, None, {"lapsed": True}, lease_s=lease_s, clock=clock, admit=admit)


def reclaim(
    rt: Runtime, run_id: str, server: str, *, lease_s: float, clock: Callable[[], float] = time.time
) -> bool:
    """Claim back ``run_id``, which ``server`` released while a call of it waited for a person
    (see ``service/runner.py``), as :func:`adopt` does; False when another server took it over
    meanwhile (or it cannot be continued): then ``server`` must leave it alone."""
    return _claim(rt, run_id, server, None, {"waited": True}, lease_s=lease_s, clock=clock) is not None


def _claim(
    rt: Runtime,
    run_id: str,
    server: str,
    node_id: str | None,
    mark: Mapping[str, Any],
    *,
    lease_s: float,
    clock: Callable[[], float],
    admit: Admit | None = None,
) -> Submission | None:
    store = rt.trace
    for _ in range(_CLAIM_ATTEMPTS):
        events = store.events(run_id)
        now = clock()
        found = continuable(events, node_id, now)
        if found is None or not events:
            return None
        submission, ended = found
        if admit is not None and not admit(submission.body):
            return None  # no room here for what the run holds: another server, or a later scan
        at = events[-1].seq + 1
        token = uuid.uuid4().hex
        data: dict[str, Any] = {"action": "continued", "server": server, "at": at, "until": now + lease_s}
        data.update(mark, token=token)
        if ended is not None:
            data.update({"from": ended.server, "expired": ended.until})
        try:
            store.append_many([TraceEvent(run_id=run_id, seq=at, kind=DRIVER_KIND, ts=now, data=data)])
        except ValueError:
            continue  # another event took that number: read again
        read = store.events(run_id)
        mine = [e for e in read if e.kind == DRIVER_KIND and e.data.get("token") == token]
        taken = len(mine) == 1 and mine[0].seq == at and driver_of(read[: read.index(mine[0]) + 1]) == server
        return submission if taken else None
    return None


async def outlast(
    rt: Runtime,
    request: ApprovalRequest,
    server: str,
    *,
    lease_s: float,
    poll_s: float,
    rounds: int,
    clock: Callable[[], float] = time.time,
    admit: Admit | None = None,
) -> Submission | None:
    """Wait for the lease of the server driving the run of ``request`` to end, then take the run
    over as :func:`take_over` does (``admit`` as there); None as soon as its driver renews it (it
    is alive: it goes on with its run), another server takes it, it finishes, it cannot be
    continued, or ``admit`` refuses it.

    Reads the whole trace at most ``rounds`` times: when the lease should have been renewed (a
    third of ``lease_s``) or has ended, or earlier when the trace grew (its next number is read
    every ``poll_s`` seconds)."""
    first: Lease | None = None
    for _ in range(rounds):
        events = await asyncio.to_thread(rt.trace.events, request.run_id)
        now = clock()
        if any(e.kind == "run_finished" for e in events):
            return None
        lease = lease_of(events)
        if lease is None or lease.ended(now):  # released or lapsed: take it now, or never
            return await asyncio.to_thread(
                take_over, rt, request, server, lease_s=lease_s, clock=clock, admit=admit
            )
        if lease.until is None or (first is not None and lease != first):
            return None
        first = lease
        wake = min(lease.until + _PAST_S, now + lease_s / 3)
        await _quiet(rt, request.run_id, events[-1].seq + 1 if events else 0, wake, poll_s, clock)
    return None


async def _quiet(
    rt: Runtime, run_id: str, next_seq: int, wake: float, poll_s: float, clock: Callable[[], float]
) -> None:
    """Return at ``wake`` (a ``clock`` time), or once the run's trace has an event at ``next_seq``."""
    while (left := wake - clock()) > 0:
        await asyncio.sleep(min(poll_s, left))
        if await asyncio.to_thread(rt.trace.next_seq, run_id) > next_seq:
            return


def taken_from(rt: Runtime, run_id: str, server: str) -> bool:
    """True when the trace shows another server than ``server`` driving ``run_id`` (it took the run
    over after ``server``'s lease ended); False too when the trace cannot be read."""
    try:
        driver = driver_of(rt.trace.events(run_id))
    except Exception:  # a store failing for a moment: the run is ended as it would have been
        _log.warning("actionspace: reading who drives run %s failed", run_id)
        return False
    return driver is not None and driver != server


def renew(rt: Runtime, run_ids: Sequence[str], server: str, until: float) -> None:
    """Extend ``server``'s lease on ``run_ids`` to ``until`` (seconds since the epoch)."""
    for run_id in run_ids:
        rt.record(run_id, DRIVER_KIND, {"action": "renewed", "server": server, "until": until})


def release(rt: Runtime, run_ids: Sequence[str], server: str) -> None:
    """Record that ``server`` stopped driving ``run_ids`` (they stay unfinished)."""
    for run_id in run_ids:
        rt.record(run_id, DRIVER_KIND, {"action": "released", "server": server})


def without(node: str | None) -> CancelScope | None:
    """A scope that cancels ``node`` before it starts (a scope's requests serve one plan run)."""
    if node is None:
        return None
    scope = CancelScope()
    scope.cancel([node], reason="it was resumed on its own after a restart")
    return scope


def sending(events: Sequence[TraceEvent], now: float) -> set[str]:
    """The nodes of the run of ``events`` an approved call of which a server marks as being sent
    alone at ``now`` (a mark whose end cannot be read is live: the send may still run)."""
    marks: dict[str, tuple[str, float | None]] = {}
    for e in events:
        action, token = e.data.get("action"), e.data.get("sender")
        if e.kind != SENDING_KIND or not isinstance(token, str):
            continue
        if action == "sending":
            marks[token] = (str(e.data.get("node")), _until(e.data))
        elif action == "sent":
            marks.pop(token, None)
    return {node for node, until in marks.values() if until is None or now <= until}


@contextlib.asynccontextmanager
async def sending_alone(
    rt: Runtime, request: ApprovalRequest, *, lease_s: float = DEFAULT_LEASE_S
) -> AsyncIterator[None]:
    """Mark the approved call of ``request`` as being sent alone while the block runs (written
    before it, renewed every third of ``lease_s`` seconds, ended after it; see the module doc)."""
    token = uuid.uuid4().hex
    mark = {"action": "sending", "sender": token, "node": request.node_id, "request_id": request.id}

    def write(data: Mapping[str, Any]) -> None:
        rt.record(request.run_id, SENDING_KIND, data)

    async def renewing() -> None:
        while True:
            await asyncio.sleep(lease_s / 3)
            with contextlib.suppress(Exception):  # a store failing for a moment: the next tick writes
                await asyncio.to_thread(write, {**mark, "until": time.time() + lease_s})

    await asyncio.to_thread(write, {**mark, "until": time.time() + lease_s})
    renewer = asyncio.create_task(renewing())
    try:
        yield
    finally:
        renewer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await renewer
        try:
            await asyncio.shield(asyncio.to_thread(write, {"action": "sent", "sender": token}))
        except Exception:  # the mark then ends at its ``until``
            _log.warning("actionspace: could not record the end of a send of run %s", request.run_id)
