"""Scenario 1 of the design: "next Tuesday 3 pm, one hour review with the design team".

A scripted policy plays the model, including its realistic mistakes, against a real SQLite
calendar. Each model turn is raw output in some provider's format; it goes through the whole
pipeline, and the policy chooses its next move from the error category and recovery it gets.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from actionspace.demo.calendar import CalendarService
from actionspace.demo.policy import PREVIEWED, script
from actionspace.errors import ActionError, FieldError
from actionspace.execution.result import ToolResult
from actionspace.ledger.status import Committed, NotCommitted, StatusAnswer
from actionspace.policy.principal import Principal
from actionspace.runtime import Runtime
from actionspace.types import Effect, Observation
from actionspace.validation.semantic import Timestamp
from actionspace.validation.validator import ValidationContext, after
from actionspace.validation.verdicts import Rejected
from actionspace.verify import read_back

__all__ = ["DemoReport", "StepReport", "build_runtime", "run_demo", "seed_calendar"]

USER = "u-lin"
REQUEST = "next Tuesday 3 pm, one hour review with the design team"
PRINCIPAL = Principal(
    id=USER, scopes=("read:*", "write:create_event", "external:notify_attendees", "calendar:invite:staff")
)


def next_tuesday(today: date) -> date:
    """The first Tuesday at least two days after ``today`` (tomorrow would be "tomorrow")."""
    ahead = (1 - today.weekday()) % 7
    return today + timedelta(days=ahead if ahead >= 2 else ahead + 7)


def seed_calendar(service: CalendarService, day: date) -> None:
    """Teams, people and one existing meeting that collides with 15:00 on ``day``."""
    sh = ZoneInfo("Asia/Shanghai")
    busy_from = datetime(day.year, day.month, day.day, 14, 30, tzinfo=sh)
    service.seed(
        teams=[
            ("t-design-sh", "Design", "Shanghai"),
            ("t-design-ber", "Design", "Berlin"),
            ("t-platform", "Platform", "Shanghai"),
        ],
        users=[
            (USER, "Lin Wei", "Asia/Shanghai", "t-platform", "calendar:invite:staff"),
            ("u-chen", "Chen Jing", "Asia/Shanghai", "t-design-sh", "calendar:invite:staff"),
            ("u-wang", "Wang Fang", "Asia/Shanghai", "t-design-sh", "calendar:invite:staff"),
            ("u-zhao", "Zhao Lei", "Asia/Shanghai", "t-design-sh", "calendar:invite:staff"),
            ("u-klein", "Anna Klein", "Europe/Berlin", "t-design-ber", "calendar:invite:staff"),
            ("u-vp", "Sun Hao (VP Design)", "Asia/Shanghai", None, "calendar:invite:exec"),
        ],
        events=[
            (
                "evt-planning",
                "u-wang",
                "Quarterly planning",
                busy_from,
                busy_from + timedelta(hours=1),
                ["u-wang"],
            )
        ],
    )


def _valid_timezone(args: Mapping[str, Any]) -> Iterable[FieldError]:
    tz = args.get("timezone")
    try:
        ZoneInfo(str(tz))
    except (ZoneInfoNotFoundError, ValueError):
        return (FieldError(path="/timezone", message=f"{tz!r} is not an IANA time zone"),)
    return ()


LOST_RESPONSE_TIMEOUT_S = 0.25
"""The demo's write tools answer within this; an injected lost response waits longer."""


class Faults:
    """Deterministic fault injection: lose the response of the first successful call of some tools."""

    def __init__(self, tools: Iterable[str]) -> None:
        self.pending = set(tools)
        self.lock = threading.Lock()

    def lose_response(self, tool: str) -> None:
        """After the effect: the first time for ``tool``, hang past its timeout, then drop the
        connection, so the answer never arrives (raises ConnectionResetError)."""
        with self.lock:
            lose = tool in self.pending
            self.pending.discard(tool)
        if lose:
            # a late success would tell the runtime the effect committed, which a lost answer never does
            time.sleep(LOST_RESPONSE_TIMEOUT_S * 3)
            raise ConnectionResetError(f"{tool}: the connection dropped after the request was sent")


def build_runtime(service: CalendarService, store: str, faults: Faults | None = None) -> Runtime:
    """The runtime with the calendar's tools, validators and bindings."""
    faults = faults or Faults(())
    rt = Runtime(store, principal=PRINCIPAL, state={"calendar": service})

    def invitable(ctx: ValidationContext, args: Mapping[str, Any]) -> Rejected | None:
        known = {u["id"]: u for u in service.users(args["attendees"])}
        unknown = [a for a in args["attendees"] if a not in known]
        if unknown:
            fields = [
                FieldError(path=f"/attendees/{args['attendees'].index(a)}", message=f"no user {a!r}")
                for a in unknown
            ]
            return Rejected(ActionError.of("invalid_arguments", "unknown attendee ids", field_errors=fields))
        denied = [a for a, u in known.items() if not ctx.allows(u["invite_scope"])]
        if denied:
            scope = known[denied[0]]["invite_scope"]
            return Rejected(
                ActionError.of(
                    "permission_denied",
                    f"{ctx.principal_id} may not invite {', '.join(denied)} (needs scope {scope})",
                    resource_ids=denied,
                    details={"missing_scopes": [scope], "attendees": denied},
                )
            )
        return None

    def no_overlap(ctx: ValidationContext, args: Mapping[str, Any]) -> Rejected | None:
        start, end = CalendarService.parse_ts(args["start"]), CalendarService.parse_ts(args["end"])
        clashes = service.busy([USER, *args["attendees"]], start, end)
        if not clashes:
            return None
        tz = ZoneInfo(args["timezone"])
        slots = service.free_slots([USER, *args["attendees"]], start, end - start)
        return Rejected(
            ActionError.of(
                "conflict",
                f"{clashes[0]['user_id']} is busy with {clashes[0]['title']!r} at that time",
                resource_ids=[f"event:{c['id']}" for c in clashes],
                alternatives=[s.to_dict(tz) for s in slots],
                details={"busy": [{"user": c["user_id"], "event": c["id"]} for c in clashes]},
            )
        )

    @rt.tool(effect="read")
    def get_user_profile() -> dict[str, Any]:
        """The signed-in user's profile: id, name, time zone and team."""
        user = service.user(USER)
        assert user is not None
        return {
            "user_id": user["id"],
            "name": user["name"],
            "timezone": user["timezone"],
            "team": user["team_id"],
        }

    def find_team(ctx: ValidationContext, value: Any) -> list[dict[str, Any]]:
        return [
            {"id": t["id"], "label": f"{t['name']} ({t['location']})"} for t in service.find_teams(str(value))
        ]

    @rt.tool(effect="read", bindings={"team": find_team})
    def list_team_members(team: str) -> dict[str, Any]:
        """Members of a team, by team id or name.

        Args:
            team: Team id (preferred) or team name.
        """
        return {"team": team, "members": [{"id": m["id"], "name": m["name"]} for m in service.members(team)]}

    def event_result(event: Mapping[str, Any]) -> ToolResult:
        effect = Effect(
            resource_id=f"event:{event['id']}", kind="created", version_after=str(event["version"])
        )
        return ToolResult(
            data=_public_event(event), effects=(effect,), resource_version=str(event["version"])
        )

    def event_status(*, key: str, arguments: Mapping[str, Any]) -> StatusAnswer:
        event = service.find_by_request_key(key)
        return Committed(event_result(event), remote_id=event["id"]) if event else NotCommitted()

    def preview_event(
        title: str, start: datetime, end: datetime, timezone: str, attendees: list[str]
    ) -> dict[str, Any]:
        """What create_event would store, and who would be busy then; nothing is written."""
        busy = service.busy([USER, *attendees], start, end)
        return {
            "would_create": {
                "title": title,
                "start_utc": start.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "end_utc": end.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "timezone": timezone,
                "attendees": sorted(attendees),
            },
            "busy": [{"user": c["user_id"], "event": c["id"]} for c in busy],
        }

    def stored_event(arguments: Mapping[str, Any], data: Any) -> dict[str, Any] | None:
        """The event as the calendar now holds it (the read-back that proves delivery)."""
        return service.event(str(data.get("id"))) if isinstance(data, Mapping) else None

    @rt.tool(
        effect="write",
        writes=["calendar:{timezone}"],
        refinements=(after("end", "start"), _valid_timezone),
        validators=(invitable, no_overlap),
        idempotency="query",
        status_query=event_status,
        timeout_s=LOST_RESPONSE_TIMEOUT_S,
        preview=preview_event,
        verify=[
            read_back(fields=("title", "timezone", "start_utc", "end_utc", "attendees"), read=stored_event)
        ],
        completion="delivered",
    )
    def create_event(
        title: str,
        start: Timestamp,
        end: Timestamp,
        timezone: str,
        attendees: list[str],
        idempotency_key: str,
    ) -> ToolResult:
        """Create a calendar event for the signed-in user and invite attendees.

        Args:
            title: Event title.
            start: Start, ISO 8601 with UTC offset.
            end: End, ISO 8601 with UTC offset; after start.
            timezone: IANA time zone of the organizer, e.g. Asia/Shanghai.
            attendees: User ids (not names) of the people to invite.
        """
        event = service.create_event(
            owner=USER,
            title=title,
            start=start,
            end=end,
            timezone=timezone,
            attendees=attendees,
            request_key=idempotency_key,
        )
        faults.lose_response("create_event")  # the calendar commits, then its answer is lost
        return event_result(event)

    @rt.tool(effect="external", idempotency="none", timeout_s=LOST_RESPONSE_TIMEOUT_S)
    def notify_attendees(event_id: str, message: str) -> dict[str, Any]:
        """Email every attendee of an event. The mail relay can neither dedupe nor be asked later.

        Args:
            event_id: The event whose attendees are notified.
            message: The text of the email.
        """
        sent = service.send_mail(event_id, message)
        faults.lose_response("notify_attendees")  # the relay sends, then the connection drops
        return sent

    @rt.tool(effect="read")
    def get_event(event_id: str) -> ToolResult:
        """Read an event back by id."""
        event = service.event(event_id)
        if event is None:
            from actionspace.errors import ToolError

            raise ToolError("permanent", f"no event {event_id}")
        return ToolResult(data=_public_event(event), resource_version=str(event["version"]))

    return rt


def _public_event(event: Mapping[str, Any]) -> dict[str, Any]:
    return {k: event[k] for k in ("id", "title", "start_utc", "end_utc", "timezone", "attendees", "version")}


@dataclass
class StepReport:
    index: int
    intent: str
    format: str
    tool: str
    status: str
    category: str | None
    recovery: list[str]
    next_move: str
    observation: dict[str, Any] = field(repr=False, default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.index,
            "intent": self.intent,
            "format": self.format,
            "tool": self.tool,
            "status": self.status,
            "category": self.category,
            "recovery": self.recovery,
            "next_move": self.next_move,
            "observation": self.observation,
        }


@dataclass
class DemoReport:
    run_id: str
    store: str
    folder: str
    request: str
    steps: list[StepReport]
    verified: bool
    event: dict[str, Any] | None
    events_in_calendar: int
    unknown_commits: list[str] = field(default_factory=list)
    """Ledger keys left for a person to reconcile."""
    mails_sent: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "store": self.store,
            "folder": self.folder,
            "request": self.request,
            "steps": [s.to_dict() for s in self.steps],
            "verified": self.verified,
            "event": self.event,
            "events_in_calendar": self.events_in_calendar,
            "unknown_commits": self.unknown_commits,
            "mails_sent": self.mails_sent,
        }


_NEXT_MOVE = {
    "invalid_arguments": "change arguments: read the missing facts first",
    "ambiguous_reference": "ask the user to choose among the candidates",
    "conflict": "move to the first free slot offered in alternatives",
    "permission_denied": "narrow the invitation to people it may invite",
    "unknown_commit": "never resend blindly: a person checks the outbox and resolves it",
}


def _call_id(raw: Any) -> str | None:
    """The id of the first call in an OpenAI-shaped message (JSON text or dict), if it has one."""
    try:
        message = json.loads(raw) if isinstance(raw, str) else raw
        return str(message["tool_calls"][0]["id"])
    except (ValueError, KeyError, IndexError, TypeError):
        return None


def _step(index: int, intent: str, fmt: str, obs: Observation, *, late: bool) -> StepReport:
    category = obs.error.category if obs.error else None
    if category == "invalid_arguments" and late:
        next_move = "fix the field named in field_errors"
    elif obs.diagnostics.get("dry_run"):
        busy = obs.data.get("busy") if isinstance(obs.data, dict) else None
        next_move = "nobody is busy then: book it for real" if not busy else "pick another slot"
    elif obs.diagnostics.get("completion", {}).get("reached") == "delivered":
        next_move = "delivered: the calendar, read back, holds the event"
    else:
        next_move = _NEXT_MOVE.get(category or "", "continue")
    recovery = list(obs.error.recovery) if obs.error else []
    return StepReport(index, intent, fmt, obs.tool, obs.status, category, recovery, next_move, obs.to_dict())


def run_demo(folder: Path, *, store: str, today: date | None = None) -> DemoReport:
    """Run the scenario against a calendar in ``folder``; the trace goes to ``store``."""
    folder.mkdir(parents=True, exist_ok=True)
    day = next_tuesday(today or date.today())
    service = CalendarService(folder / "calendar.db")
    seed_calendar(service, day)
    rt = build_runtime(service, store, Faults(("create_event", "notify_attendees")))
    run_id = rt.new_run(principal=PRINCIPAL)
    rt.offer(run_id=run_id)
    policy = script(day)
    history: list[Observation] = []
    steps: list[StepReport] = []
    try:
        while (move := policy(history)) is not None:
            intent, fmt, raw, prov = move
            if _call_id(raw) in PREVIEWED:  # first the preview: checked, nothing reaches the calendar
                preview = rt.call(raw, run_id=run_id, provenance=prov, dry_run=True)
                steps.append(_step(len(steps) + 1, f"{intent}: preview (dry run)", fmt, preview, late=True))
            obs = rt.call(raw, run_id=run_id, provenance=prov)
            history.append(obs)
            steps.append(_step(len(steps) + 1, intent, fmt, obs, late=len(history) > 2))
        read_back = next((o for o in history if o.tool == "get_event" and o.ok), None)
        event = read_back.data if read_back is not None else None
        created = next(
            (o for o in history if o.tool == "create_event" and o.ok and not o.diagnostics.get("dry_run")),
            None,
        )
        delivered = (
            created is not None and created.diagnostics.get("completion", {}).get("reached") == "delivered"
        )
        verified = bool(event and created and event == created.data and delivered)
        rt.record(
            run_id,
            "verified",
            {
                "predicate": "event read back equals the created event",
                "ok": verified,
                "event_id": event["id"] if event else None,
            },
        )
        unknown = [e.key for e in rt.ledger.list(state="unknown_commit") if e.run_id == run_id]
        if steps:
            steps[-1].next_move = "a person reconciles it: actionspace ledger resolve" if unknown else "done"
        rt.finish(run_id, status="ok" if verified else "failed", unknown_commits=unknown)
        mails = service.mails(event["id"]) if event else 0
        return DemoReport(
            run_id,
            store,
            str(folder),
            REQUEST,
            steps,
            verified,
            event,
            service.count_events(),
            unknown,
            mails,
        )
    finally:
        rt.close()
        service.close()
