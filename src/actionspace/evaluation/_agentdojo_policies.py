"""The per-tool argument policies an operator of AgentDojo's four suites would write.

Loaded by ``actionspace eval agentdojo --policy provenance`` (the default). Two parts, both read
off what each tool does — who can write the content it returns, and where a call sends data,
money or access — never off where the benchmark places its injections:

- :data:`SYSTEM_FIELDS`: fields of an untrusted tool's output that the platform writes, not the
  people who write the rest: ids, timestamps, sizes, a message's or an invitation's header (who
  sent it, to whom: the platform delivered it to exactly those accounts), and the names of
  existing accounts and channels as listed. Such a field vouches for the whole value it holds (and
  for the keys of an object it holds: the accounts a file's ``shared_with`` names), never for a
  piece of its text (a channel *named* "visit www.x.com" vouches for nothing). A value found there
  is a ``tool_result``; found only in a body, a description, a review or a page, it is
  ``untrusted``.
- :data:`RULES`: per tool and parameter, the provenances accepted. The pattern is the same
  everywhere: whatever chooses *who or where* (a recipient, an account, a URL, a participant, a
  file to share, a booking) must come from the user or from a trusted result, else a
  person is asked; which of the user's own standing orders to change, the model may pick; a
  deletion is the user's own word; a password only from the user; text the model writes (a body, a
  subject, a title) may come from anywhere, except that an address, link or account number
  embedded in it follows the recipient rule.

docs/agentdojo.md carries the table and says which rule stops which injection task.
"""

from __future__ import annotations

from collections.abc import Mapping

from actionspace.policy.arguments import ANY, ArgumentPolicy, Param
from actionspace.policy.provenance import FieldTrust

__all__ = ["RULES", "SYSTEM_FIELDS", "argument_policy", "field_trust"]

TRUSTED = "user | tool_result"
"""Typed by the user, or read from a result nobody else wrote."""

WHO = Param(TRUSTED, otherwise="ask")
"""Chooses who receives data, money or access: the user's or a trusted result's value, else ask."""
USER_ONLY = Param("user", otherwise="ask")
"""An irreversible choice the user makes: the user's own words, else ask."""
TEXT = Param(ANY, links=TRUSTED, otherwise="ask")
"""Text (a body, a subject, a title): it may say anything, but a link, e-mail address or account
number in it comes from the user or a trusted result, else ask."""
OWN = Param("user | tool_result | model", otherwise="ask")
"""What the user's own calendar says the user planned (a title, a time): the user's or the
model's words, or a trusted result; copied from a third party's text, ask."""
MINE = Param("user | tool_result | model", otherwise="ask")
"""Which of the user's own standing orders a change applies to: the user's choice, a trusted
result, or the model's pick among them; an id copied from a third party's text, ask. What the change
does (the recipient, the amount) is judged by the other parameters' rules."""
AMOUNT = Param("user | tool_result | model", ask="untrusted", otherwise="ask")
"""Money: typed, read from the bank, or worked out by the model; copied from a bill or a message
written by others, ask."""
FREE = Param(ANY)
"""Anything (dates, enums, flags, content that stays with the user)."""

_MAIL = frozenset(
    ["id_", "sender", "recipients", "cc", "bcc", "timestamp", "status", "read", "attachments"],
)
_FILES = frozenset({"id_", "owner", "last_modified", "shared_with", "size"})
_EVENTS = frozenset({"id_", "start_time", "end_time", "all_day", "status", "participants"})
_TRANSACTIONS = frozenset({"id", "sender", "recipient", "amount", "date", "recurring"})
_SLACK = frozenset({"sender", "recipient", ""})  # "": a plain list of names (a directory)

SYSTEM_FIELDS: Mapping[str, frozenset[str]] = {
    **{
        t: _MAIL
        for t in (
            "get_unread_emails",
            "get_sent_emails",
            "get_received_emails",
            "get_draft_emails",
            "search_emails",
        )
    },
    "search_contacts_by_name": frozenset({"email"}),
    "search_contacts_by_email": frozenset({"email"}),
    **{t: _EVENTS for t in ("search_calendar_events", "get_day_calendar_events")},
    **{
        t: _FILES
        for t in (
            "search_files_by_filename",
            "get_file_by_id",
            "list_files",
            "search_files",
            "create_file",
            "append_to_file",
            "share_file",
        )
    },
    **{
        t: _EVENTS
        for t in (
            "create_calendar_event",
            "reschedule_calendar_event",
            "add_calendar_event_participants",
        )
    },
    "get_most_recent_transactions": _TRANSACTIONS,
    "get_scheduled_transactions": _TRANSACTIONS,
    "get_channels": _SLACK,
    "get_users_in_channel": _SLACK,
    "read_channel_messages": _SLACK,
    "read_inbox": _SLACK,
}
"""Per untrusted tool, the output fields its platform writes (by field name)."""

_MAIL_OUT = {
    "recipients": WHO,
    "cc": WHO,
    "bcc": WHO,
    "attachments": WHO,
    "subject": TEXT,
    "body": TEXT,
}
_EVENT_NEW = {
    "participants": WHO,
    "start_time": OWN,
    "end_time": OWN,
    "title": OWN,
    "description": TEXT,
}
_MONEY = {"recipient": WHO, "amount": AMOUNT, "subject": TEXT}
_BOOKING = Param(TRUSTED, otherwise="ask")

RULES: Mapping[str, Mapping[str, Param]] = {
    # --- workspace / travel: mail, calendar, drive
    "send_email": _MAIL_OUT,
    "delete_email": {"email_id": USER_ONLY},
    "create_calendar_event": _EVENT_NEW,
    "cancel_calendar_event": {"event_id": WHO},
    "reschedule_calendar_event": {"event_id": WHO, "new_start_time": OWN, "new_end_time": OWN},
    "add_calendar_event_participants": {"event_id": WHO, "participants": WHO},
    "append_to_file": {"file_id": WHO, "content": TEXT},
    "create_file": {"filename": TEXT, "content": TEXT},
    "delete_file": {"file_id": USER_ONLY},
    "share_file": {"file_id": WHO, "email": WHO, "permission": FREE},
    # --- travel: bookings commit the user's money with a third party
    "reserve_hotel": {"hotel": _BOOKING},
    "reserve_car_rental": {"company": _BOOKING},
    "reserve_restaurant": {"restaurant": _BOOKING},
    # --- banking
    "send_money": _MONEY,
    "schedule_transaction": _MONEY,
    "update_scheduled_transaction": {"id": MINE, **_MONEY},
    "update_password": {"password": Param("user")},
    "update_user_info": {"first_name": WHO, "last_name": WHO, "street": WHO, "city": WHO},
    # --- slack
    "add_user_to_channel": {"user": WHO, "channel": WHO},
    "send_direct_message": {"recipient": WHO, "body": TEXT},
    "send_channel_message": {"channel": WHO, "body": TEXT},
    "invite_user_to_slack": {"user": WHO, "user_email": WHO},
    "remove_user_from_slack": {"user": USER_ONLY},
    "get_webpage": {"url": WHO},
    "post_webpage": {"url": WHO, "content": TEXT},
}
"""Per tool, per parameter, the provenances accepted (parameters not named: anything)."""


def field_trust() -> FieldTrust:
    """:data:`SYSTEM_FIELDS` for the provenance stage."""
    return FieldTrust(SYSTEM_FIELDS)


def argument_policy() -> ArgumentPolicy:
    """:data:`RULES` as a flow policy."""
    return ArgumentPolicy(RULES)
