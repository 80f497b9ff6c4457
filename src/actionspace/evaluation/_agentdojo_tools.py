"""AgentDojo's tools as actionspace tools: effect, risk and information-flow labels per tool.

The labels follow what each tool does and who can write the content it returns, never where the
benchmark happens to hide its injections. ``docs/agentdojo.md`` carries the same table with the
reasoning per tool; a test checks that every tool of the four suites has an entry here.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from actionspace.catalog.spec import Labels, ToolSpec
from actionspace.errors import ToolError

__all__ = ["TOOL_LABELS", "EnvironmentSlot", "ToolLabel", "jsonable", "labels_for", "register_suite_tools"]

Effect = Literal["none", "read", "write", "external"]
Integrity = Literal["trusted", "untrusted"]
Confidentiality = Literal["public", "internal", "secret"]

OBSERVATION_BYTES = 4_000_000
"""Observations of these tools are never trimmed: the model sees in full what AgentDojo shows it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolLabel:
    """How one AgentDojo tool is declared to the runtime."""

    effect: Effect
    """``read`` (no change), ``write`` (changes the user's own data), ``external`` (reaches others)."""
    integrity: Integrity = "trusted"
    """Of the output: ``untrusted`` when people other than the user can write any of it."""
    confidentiality: Confidentiality = "internal"
    """Of the output. Default ``internal``."""
    sink: bool = False
    """True when the call carries data to someone other than the user."""
    high_risk_args: tuple[str, ...] = ()
    """Arguments that choose who receives data, money or access (or where it goes)."""
    why: str = ""
    """One line of justification (also in docs/agentdojo.md)."""


_EMAIL_LIST = ToolLabel(
    effect="read",
    integrity="untrusted",
    why="anyone can email the user; threads quote third parties",
)
_CALENDAR_READ = ToolLabel(
    effect="read",
    integrity="untrusted",
    why="any organiser who invites the user writes title, description and participants",
)
_FILES_READ = ToolLabel(
    effect="read",
    integrity="untrusted",
    why="files are shared with the user and edited by collaborators",
)
_LISTING = ToolLabel(
    effect="read",
    integrity="untrusted",
    why="written by the businesses listed and by the platform's users",
)

TOOL_LABELS: Mapping[str, ToolLabel] = {
    # --- email (workspace, travel)
    "send_email": ToolLabel(
        effect="external",
        sink=True,
        high_risk_args=("recipients", "cc", "bcc", "attachments"),
        why="sends data to any address",
    ),
    "delete_email": ToolLabel(effect="write", why="changes the user's own mailbox"),
    "get_unread_emails": _EMAIL_LIST,
    "get_sent_emails": _EMAIL_LIST,
    "get_received_emails": _EMAIL_LIST,
    "get_draft_emails": _EMAIL_LIST,
    "search_emails": _EMAIL_LIST,
    "search_contacts_by_name": ToolLabel(
        effect="read", integrity="untrusted", why="contacts come from mail headers their senders chose"
    ),
    "search_contacts_by_email": ToolLabel(
        effect="read", integrity="untrusted", why="contacts come from mail headers their senders chose"
    ),
    "get_current_day": ToolLabel(
        effect="read", confidentiality="public", why="the system clock; nobody else writes it"
    ),
    # --- calendar (workspace, travel)
    "search_calendar_events": _CALENDAR_READ,
    "get_day_calendar_events": _CALENDAR_READ,
    "create_calendar_event": ToolLabel(
        effect="external",
        sink=True,
        high_risk_args=("participants",),
        why="invites the participants: title and description reach them",
    ),
    "cancel_calendar_event": ToolLabel(
        effect="external", sink=True, why="notifies every participant of the event"
    ),
    "reschedule_calendar_event": ToolLabel(
        effect="external", sink=True, why="notifies every participant of the new time"
    ),
    "add_calendar_event_participants": ToolLabel(
        effect="external",
        sink=True,
        high_risk_args=("participants",),
        why="gives new people the event and its description",
    ),
    # --- cloud drive (workspace)
    "append_to_file": ToolLabel(effect="write", why="changes the user's own file"),
    "search_files_by_filename": _FILES_READ,
    "create_file": ToolLabel(effect="write", why="creates a file in the user's own drive"),
    "delete_file": ToolLabel(effect="write", why="deletes from the user's own drive (irreversible)"),
    "get_file_by_id": _FILES_READ,
    "list_files": _FILES_READ,
    "share_file": ToolLabel(
        effect="external",
        sink=True,
        high_risk_args=("email", "permission"),
        why="gives another account access to a file",
    ),
    "search_files": _FILES_READ,
    # --- travel
    "get_user_information": ToolLabel(
        effect="read",
        confidentiality="secret",
        why="the user's own profile: ID, passport, bank account and card numbers",
    ),
    "get_all_hotels_in_city": _LISTING,
    "get_hotels_prices": _LISTING,
    "get_rating_reviews_for_hotels": ToolLabel(
        effect="read", integrity="untrusted", why="reviews are written by anyone"
    ),
    "get_hotels_address": _LISTING,
    "get_all_restaurants_in_city": _LISTING,
    "get_cuisine_type_for_restaurants": _LISTING,
    "get_restaurants_address": _LISTING,
    "get_rating_reviews_for_restaurants": ToolLabel(
        effect="read", integrity="untrusted", why="reviews are written by anyone"
    ),
    "get_dietary_restrictions_for_all_restaurants": _LISTING,
    "get_contact_information_for_restaurants": _LISTING,
    "get_price_for_restaurants": _LISTING,
    "check_restaurant_opening_hours": _LISTING,
    "get_all_car_rental_companies_in_city": _LISTING,
    "get_car_types_available": _LISTING,
    "get_rating_reviews_for_car_rental": ToolLabel(
        effect="read", integrity="untrusted", why="reviews are written by anyone"
    ),
    "get_car_fuel_options": _LISTING,
    "get_car_rental_address": _LISTING,
    "get_car_price_per_day": _LISTING,
    "get_flight_information": _LISTING,
    "reserve_hotel": ToolLabel(
        effect="external",
        sink=True,
        high_risk_args=("hotel",),
        why="books (and commits the user's money) with a third party",
    ),
    "reserve_car_rental": ToolLabel(
        effect="external",
        sink=True,
        high_risk_args=("company",),
        why="books (and commits the user's money) with a third party",
    ),
    "reserve_restaurant": ToolLabel(
        effect="external",
        sink=True,
        high_risk_args=("restaurant",),
        why="books a table with a third party",
    ),
    # --- banking
    "get_iban": ToolLabel(effect="read", why="the user's own account number, set by the bank"),
    "send_money": ToolLabel(
        effect="external",
        sink=True,
        high_risk_args=("recipient", "amount"),
        why="moves money to any account; the subject reaches the recipient",
    ),
    "schedule_transaction": ToolLabel(
        effect="external",
        sink=True,
        high_risk_args=("recipient", "amount"),
        why="moves money to any account, repeatedly",
    ),
    "update_scheduled_transaction": ToolLabel(
        effect="external",
        sink=True,
        high_risk_args=("recipient", "amount"),
        why="redirects or changes future payments",
    ),
    "get_balance": ToolLabel(effect="read", why="computed by the bank"),
    "get_most_recent_transactions": ToolLabel(
        effect="read", integrity="untrusted", why="senders choose the subject of what they send"
    ),
    "get_scheduled_transactions": ToolLabel(
        effect="read", integrity="untrusted", why="subjects and recipients may come from bills and senders"
    ),
    "read_file": ToolLabel(
        effect="read", integrity="untrusted", why="bills and notices written by landlords and vendors"
    ),
    "get_user_info": ToolLabel(effect="read", why="the user's own profile"),
    "update_password": ToolLabel(effect="write", high_risk_args=("password",), why="changes who can log in"),
    "update_user_info": ToolLabel(effect="write", why="changes the user's own profile"),
    # --- slack
    "get_channels": ToolLabel(effect="read", integrity="untrusted", why="any member may name a channel"),
    "add_user_to_channel": ToolLabel(
        effect="external",
        sink=True,
        high_risk_args=("user", "channel"),
        why="gives a person access to a channel's history",
    ),
    "read_channel_messages": ToolLabel(effect="read", integrity="untrusted", why="written by every member"),
    "read_inbox": ToolLabel(effect="read", integrity="untrusted", why="written by whoever messages the user"),
    "send_direct_message": ToolLabel(
        effect="external", sink=True, high_risk_args=("recipient",), why="sends data to a person"
    ),
    "send_channel_message": ToolLabel(
        effect="external", sink=True, high_risk_args=("channel",), why="sends data to every member"
    ),
    "get_users_in_channel": ToolLabel(
        effect="read", integrity="untrusted", why="members choose their own names"
    ),
    "invite_user_to_slack": ToolLabel(
        effect="external",
        sink=True,
        high_risk_args=("user", "user_email"),
        why="emails an invitation and grants access to the workspace",
    ),
    "remove_user_from_slack": ToolLabel(
        effect="write", high_risk_args=("user",), why="takes access away from a person"
    ),
    "get_webpage": ToolLabel(
        effect="external",
        integrity="untrusted",
        sink=True,
        high_risk_args=("url",),
        why="the request leaves the system (the URL itself carries data); anyone writes web pages",
    ),
    "post_webpage": ToolLabel(
        effect="external", sink=True, high_risk_args=("url",), why="publishes data on the web"
    ),
}


def labels_for(label: ToolLabel) -> Labels:
    """The catalog ``Labels`` of one tool (sinks may receive at most ``internal`` data)."""
    return Labels(
        confidentiality=label.confidentiality,
        integrity=label.integrity,
        sink_max="internal" if label.sink else None,
        sink=label.sink,
        high_risk_args=label.high_risk_args,
    )


class EnvironmentSlot:
    """The AgentDojo environment the tools act on; swapped between tasks (runs are sequential)."""

    def __init__(self) -> None:
        self.env: Any = None
        self.executed: list[Any] = []
        """``agentdojo FunctionCall``s that reached the environment, in order (for trace-based checks)."""


def jsonable(value: Any) -> Any:
    """A tool result as JSON data (pydantic models dumped, datetimes as ISO strings)."""
    from pydantic import BaseModel

    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return json.loads(json.dumps(value, default=str))


def _runner(functions: Any, slot: EnvironmentSlot, name: str) -> Callable[..., Any]:
    from agentdojo.functions_runtime import FunctionCall
    from pydantic import ValidationError

    def run(**arguments: Any) -> Any:
        try:
            result, _ = functions.run_function(slot.env, name, arguments, raise_on_error=True)
        except ValidationError as exc:
            raise ToolError("invalid_arguments", f"{name}: {exc}") from exc
        except (ValueError, KeyError, IndexError) as exc:
            # AgentDojo's tools raise these for ids, names and files that do not exist.
            raise ToolError("invalid_arguments", f"{name}: {type(exc).__name__}: {exc}") from exc
        slot.executed.append(FunctionCall(function=name, args=dict(arguments)))
        return jsonable(result)

    return run


def register_suite_tools(runtime: Any, suite: Any, slot: EnvironmentSlot) -> list[ToolSpec]:
    """Register every tool of an AgentDojo ``TaskSuite`` on ``runtime``; returns the specs.

    Raises ``KeyError`` for a tool with no entry in :data:`TOOL_LABELS` (a new AgentDojo version).
    """
    from agentdojo.functions_runtime import FunctionsRuntime

    functions = FunctionsRuntime(suite.tools)
    specs = []
    for function in suite.tools:
        label = TOOL_LABELS[function.name]
        schema = function.parameters.model_json_schema()
        specs.append(
            runtime.add_tool(
                name=function.name,
                description=function.description,
                input_schema=schema,
                fn=_runner(functions, slot, function.name),
                effect=label.effect,
                labels=labels_for(label),
                blocking=False,
                max_observation_bytes=OBSERVATION_BYTES,
            )
        )
    return specs
