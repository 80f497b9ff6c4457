"""The scripted model of the demo: realistic mistakes, emitted in several providers' formats."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime
from typing import Any
from zoneinfo import ZoneInfo

from actionspace.types import Observation

__all__ = ["PREVIEWED", "Move", "script"]


def _openai(name: str, args: Mapping[str, Any], call_id: str) -> str:
    return json.dumps(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
            ],
        }
    )


def _anthropic(name: str, args: Mapping[str, Any], call_id: str, text: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [
            {"type": "text", "text": text},
            {"type": "tool_use", "id": call_id, "name": name, "input": dict(args)},
        ],
    }


def _hermes(name: str, args: Mapping[str, Any], thought: str) -> str:
    body = json.dumps({"name": name, "arguments": dict(args)})
    return f"<think>{thought}</think>\n<tool_call>\n{body}\n</tool_call>"


Move = tuple[str, str, Any, Mapping[str, str] | None]

PREVIEWED: frozenset[str] = frozenset({"call_8"})
"""Call ids of the moves the model previews first (a dry run: checked, previewed, nothing booked)."""
"""(intent, format name, raw model output, provenance of the arguments)."""


def script(day: date) -> Callable[[Sequence[Observation]], Move | None]:
    """The model's turns; each may read the observations so far (as a real policy would)."""
    start_local = f"{day.isoformat()}T15:00:00"
    end_local = f"{day.isoformat()}T16:00:00"
    title = "Design review"

    def turn(history: Sequence[Observation]) -> Move | None:
        k = len(history)
        if k == 0:
            first = _openai(
                "create_event", {"title": title, "start": start_local, "end": end_local}, "call_1"
            )
            return ("create the event straight away", "openai", first, None)
        if k == 1:
            return (
                "read the user's time zone",
                "anthropic",
                _anthropic("get_user_profile", {}, "toolu_2", "I need the user's time zone first."),
                None,
            )
        if k == 2:
            return (
                "look up the design team",
                "hermes",
                _hermes("list_team_members", {"team": "Design"}, "Find who is in the design team."),
                None,
            )
        if k == 3:
            team = "t-design-sh"  # the user answered: "the Shanghai one"
            return (
                "list the team the user chose",
                "openai",
                _openai("list_team_members", {"team": team}, "call_4"),
                {"team": "user"},
            )
        tz = history[1].data["timezone"]
        members = [m["id"] for m in history[3].data["members"]]
        offset = datetime.fromisoformat(start_local).replace(tzinfo=ZoneInfo(tz)).isoformat()[-6:]
        args: dict[str, Any] = {"title": title, "timezone": tz, "attendees": members}
        prov: dict[str, str] = {
            "title": "user",
            "timezone": f"tool_result:{history[1].call_id}",
            "attendees": f"tool_result:{history[3].call_id}",
            "start": "model_inferred",
            "end": "model_inferred",
        }
        if k == 4:
            args |= {"start": end_local + offset, "end": start_local + offset}
            return (
                "propose the event (start and end swapped)",
                "openai",
                _openai("create_event", args, "call_5"),
                prov,
            )
        if k == 5:
            args |= {"start": start_local + offset, "end": end_local + offset}
            return (
                "propose 15:00-16:00 with the team",
                "openai",
                _openai("create_event", args, "call_6"),
                prov,
            )
        slot = history[5].error.alternatives[0] if history[5].error else None
        if k == 6 and slot is not None:
            args |= {"start": slot["start"], "end": slot["end"], "attendees": [*members, "u-vp"]}
            prov = {
                **prov,
                "start": f"tool_result:{history[5].call_id}",
                "end": f"tool_result:{history[5].call_id}",
                "attendees": "model_inferred",
            }
            return (
                "take the first free slot, also invite the VP",
                "openai",
                _openai("create_event", args, "call_7"),
                prov,
            )
        if k == 7 and slot is not None:
            args |= {"start": slot["start"], "end": slot["end"]}
            prov = {
                **prov,
                "start": f"tool_result:{history[5].call_id}",
                "end": f"tool_result:{history[5].call_id}",
            }
            return (
                "create the event in the free slot with the team",
                "openai",
                _openai("create_event", args, "call_8"),
                prov,
            )
        if k == 8 and history[7].ok:
            return (
                "read the event back to verify",
                "openai",
                _openai("get_event", {"event_id": history[7].data["id"]}, "call_9"),
                None,
            )
        if k == 9 and history[7].ok:
            message = f"Design review on {history[7].data['start_utc']} (UTC)"
            return (
                "email the attendees",
                "openai",
                _openai(
                    "notify_attendees", {"event_id": history[7].data["id"], "message": message}, "call_10"
                ),
                {"event_id": f"tool_result:{history[7].call_id}", "message": "model_inferred"},
            )
        return None

    return turn
