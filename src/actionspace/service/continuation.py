"""What a server needs to continue a run another server started, and who may continue it.

When a run is started through the service, the runner records what it was given in a
``service_run_submitted`` event: the plan (Plan JSON) or the raw model outputs, with the sha256 of
their canonical JSON and the id of the server that drives the run. A body whose JSON is longer
than :data:`MAX_SUBMISSION_CHARS` is recorded as not continuable (its length only).

A run is driven by one server at a time; ``service_run_driver`` events say who:

- ``service_run_submitted``: the starting server drives the run;
- ``{"action": "released", "server": S}``: S stopped while the run was unfinished (it cancelled
  what was still running); the run is no longer driven, if S drove it;
- ``{"action": "continued", "server": S, "at": n}``: S took the run over. The event is written at
  seq ``n``, the number after the last event S read, and counts only where it was stored there: of
  two servers that read the same trace, the store keeps one event at ``n`` (SQLite and PostgreSQL
  refuse the other; a store that numbers it after is read as not taking it).

:func:`take_over` continues a run only when the trace proves no server drives it: its submission
is recorded and readable (same digest), it has no ``run_finished``, and the last server that drove
it released it. A server that died without releasing (killed, power lost) leaves its runs driven:
they are not continued (their approved calls are resumed alone, as before).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from actionspace.approval.requests import ApprovalRequest
from actionspace.runtime import Runtime
from actionspace.trace.events import TraceEvent

__all__ = [
    "DRIVER_KIND",
    "MAX_SUBMISSION_CHARS",
    "SUBMITTED_KIND",
    "Submission",
    "driver_of",
    "release",
    "submission_event",
    "take_over",
]

SUBMITTED_KIND = "service_run_submitted"
DRIVER_KIND = "service_run_driver"
MAX_SUBMISSION_CHARS = 512 * 1024
"""Characters of a submitted plan's or output list's JSON kept to continue its run (larger: the
run is not continued after a restart)."""

_CLAIM_ATTEMPTS = 5
"""Times a claim is tried again when another event took its number (an unrelated append)."""

Mode = Literal["plan", "calls"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Submission:
    """A run's recorded submission, read back whole."""

    mode: Mode
    body: Any
    """The Plan JSON (``plan``) or the list of raw model outputs (``calls``)."""


def _digest(body: Any) -> str:
    text = json.dumps(body, sort_keys=True, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def submission_event(mode: Mode, body: Any, server: str) -> dict[str, Any]:
    """The ``service_run_submitted`` payload of ``body`` submitted to ``server``."""
    event: dict[str, Any] = {"mode": mode, "server": server}
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


def driver_of(events: Sequence[TraceEvent]) -> str | None:
    """The id of the server driving the run of ``events`` (None: none does, or none ever did)."""
    driver: str | None = None
    for e in events:
        if e.kind == SUBMITTED_KIND and e.data.get("server"):
            driver = str(e.data["server"])
        elif e.kind == DRIVER_KIND:
            server, action = e.data.get("server"), e.data.get("action")
            if action == "released" and driver is not None and server == driver:
                driver = None
            elif action == "continued" and driver is None and server and e.data.get("at") == e.seq:
                driver = str(server)
    return driver


def _continuable(events: Sequence[TraceEvent], request: ApprovalRequest) -> Submission | None:
    submitted = [e for e in events if e.kind == SUBMITTED_KIND]
    if len(submitted) != 1 or any(e.kind == "run_finished" for e in events):
        return None
    if not any(e.kind == DRIVER_KIND and e.data.get("action") == "released" for e in events):
        return None
    if driver_of(events) is not None:
        return None
    found = _submission(submitted[0])
    if found is None or (found.mode == "calls" and held_output(request.node_id) is None):
        return None
    return found


def held_output(node_id: str) -> tuple[int, int | None] | None:
    """(output index from 1, call index from 1 or None) of a call node ``c3`` / ``c3.2``."""
    match = re.fullmatch(r"c([1-9][0-9]{0,5})(?:\.([1-9][0-9]{0,5}))?", node_id)
    if match is None:
        return None
    return int(match[1]), None if match[2] is None else int(match[2])


def take_over(rt: Runtime, request: ApprovalRequest, server: str) -> Submission | None:
    """Claim the run of ``request`` for ``server`` and return its submission, when the trace proves
    no server drives it (see the module docstring); None otherwise (nothing is claimed)."""
    store, run_id = rt.trace, request.run_id
    for _ in range(_CLAIM_ATTEMPTS):
        events = store.events(run_id)
        found = _continuable(events, request)
        if found is None or not events:
            return None
        at = events[-1].seq + 1
        token = uuid.uuid4().hex
        data = {"action": "continued", "server": server, "at": at, "request_id": request.id, "token": token}
        try:
            store.append_many(
                [TraceEvent(run_id=run_id, seq=at, kind=DRIVER_KIND, ts=time.time(), data=data)]
            )
        except ValueError:
            continue  # another event took that number: read again
        mine = [e for e in store.events(run_id) if e.kind == DRIVER_KIND and e.data.get("token") == token]
        return found if len(mine) == 1 and mine[0].seq == at else None
    return None


def release(rt: Runtime, run_ids: Sequence[str], server: str) -> None:
    """Record that ``server`` stopped driving ``run_ids`` (they stay unfinished)."""
    for run_id in run_ids:
        rt.record(run_id, DRIVER_KIND, {"action": "released", "server": server})
