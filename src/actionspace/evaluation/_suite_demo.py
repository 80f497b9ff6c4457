"""The demo's calendar scenario (``actionspace.demo.scenario``) as suite tasks.

The tools are the demo runtime's own definitions (read back with ``Runtime.describe``), the state is
the demo's seeded calendar on a fixed day (so the expected slot is the same on every run), and the
expected call is computed against that calendar: the design review goes to the first free slot
after the requested one, with the Shanghai design team invited.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any, Final
from zoneinfo import ZoneInfo

from actionspace.demo.calendar import CalendarService
from actionspace.demo.scenario import PRINCIPAL, REQUEST, USER, build_runtime, next_tuesday, seed_calendar
from actionspace.evaluation._runner_env import Environment, EnvironmentInput
from actionspace.evaluation.suite import ExpectedCall, Suite, Task, register_predicate

__all__ = ["TODAY", "demo_environment", "load_demo_suite"]

TODAY: Final = date(2026, 1, 5)
"""The fixed "today" of the demo tasks; "next Tuesday" is then 2026-01-13."""
TEAM: Final = "t-design-sh"
TIMEZONE: Final = "Asia/Shanghai"
TOOLS: Final = ("get_user_profile", "list_team_members", "create_event", "notify_attendees", "get_event")
TITLES: Final = ("Design review", "Review", "Design team review", "Review with the design team")


def load_demo_suite() -> Suite:
    """The calendar task and two negatives on the same calendar (information missing, no tool)."""
    with tempfile.TemporaryDirectory(prefix="actionspace-suite-") as folder:
        service = CalendarService(Path(folder) / "calendar.db")
        try:
            day = next_tuesday(TODAY)
            seed_calendar(service, day)
            members = [m["id"] for m in service.members(TEAM)]
            tz = ZoneInfo(TIMEZONE)
            wanted = datetime(day.year, day.month, day.day, 15, tzinfo=tz)
            slot = service.free_slots([USER, *members], wanted, timedelta(hours=1), count=1)[0]
            rt = build_runtime(service, "memory://")
            try:
                tools = tuple(_tool(rt.describe(name)) for name in TOOLS)
            finally:
                rt.close()
        finally:
            service.close()
    start, end = slot.start.astimezone(tz), slot.end.astimezone(tz)
    state = {"calendar": {"today": TODAY.isoformat(), "day": day.isoformat(), "seed": "seed_calendar"}}
    create = ExpectedCall(
        name="create_event",
        arguments={
            "title": TITLES,
            "start": (start.isoformat(), _utc(start)),
            "end": (end.isoformat(), _utc(end)),
            "timezone": (TIMEZONE,),
            "attendees": (members, [USER, *members]),
        },
    )
    common: dict[str, Any] = {"tools": tools, "initial_state": state, "scopes": PRINCIPAL.scopes}
    return Suite(
        name="demo",
        tasks=(
            Task(
                id="demo_calendar_review",
                origin="demo:calendar",
                request=REQUEST,
                expected=((create,),),
                predicate="demo.calendar.review_booked",
                **common,
            ),
            Task(
                id="demo_calendar_no_time",
                category="info_missing",
                origin="demo:calendar",
                request="set up a review with the design team",
                no_call=True,
                expected=((),),
                **common,
            ),
            Task(
                id="demo_calendar_no_tool",
                category="no_tool",
                origin="demo:calendar",
                request="how many minutes are in one and a half hours?",
                no_call=True,
                expected=((),),
                **common,
            ),
        ),
        source="actionspace.demo",
        version="1",
    )


def demo_environment(inp: EnvironmentInput) -> Environment:
    """The reset hook of the demo's tasks: a freshly seeded calendar and the demo's own runtime on
    the evaluation's store (``evaluate(demo_suite(), policy, runtime_factory=demo_environment)``)."""
    folder = Path(tempfile.mkdtemp(prefix="actionspace-demo-"))
    service = CalendarService(folder / "calendar.db")
    seed_calendar(service, next_tuesday(TODAY))
    rt = build_runtime(service, inp.store)

    def close() -> None:
        service.close()
        shutil.rmtree(folder, ignore_errors=True)

    return Environment(runtime=rt, state=service, close=close)


def _tool(description: Mapping[str, Any]) -> dict[str, Any]:
    tool = {
        "name": description["name"],
        "description": description["description"],
        "parameters": dict(description["input_schema"]),
    }
    if "effect" in description:
        tool["effect"] = description["effect"]  # for risk-dependent thresholds; the model never sees it
    return tool


def _utc(ts: datetime) -> str:
    return ts.astimezone(ZoneInfo("UTC")).strftime("%Y-%m-%dT%H:%M:%SZ")


@register_predicate("demo.calendar.review_booked")
def review_booked(task: Task, final_state: Any) -> bool:
    """One new event holds the expected slot, the design team is invited and the VP is not.

    ``final_state`` is the task's :class:`~actionspace.demo.calendar.CalendarService`.
    """
    if not isinstance(final_state, CalendarService):
        return False
    create = next(c for c in task.expected[0] if c.name == "create_event")
    start = CalendarService.parse_ts(str(create.arguments["start"][0]))
    end = CalendarService.parse_ts(str(create.arguments["end"][0]))
    members = [m["id"] for m in final_state.members(TEAM)]
    booked = {e["id"] for e in final_state.busy(members, start, end)}
    if len(booked) != 1:
        return False
    event = final_state.event(booked.pop())
    return bool(
        event
        and CalendarService.parse_ts(event["start_utc"]) == start
        and CalendarService.parse_ts(event["end_utc"]) == end
        and set(members) <= set(event["attendees"])
        and "u-vp" not in event["attendees"]
    )
