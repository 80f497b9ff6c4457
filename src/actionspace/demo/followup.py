"""The calendar scenario's follow-up: the model shares the new event with an outside agency, and waits.

After scenario 1 booked the design review, the model proposes one more call: post the event to
the partner agency's channel. The recipient address is the model's own guess (nothing the user
or a tool said), and ``recipient`` is a high-risk argument of ``share_with_partner``, so the call
is held for a person. The demo leaves it pending in its own run (``…-followup``), so that
``actionspace serve`` right after ``actionspace demo`` has a call for someone to approve in the
console; once approved, the serve process runs it and the post appears in the channel, once.

The channel is a real SQLite service that lives beside the demo's store (see
:func:`channel_path`), so the process that approves the call later finds the same channel.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Group, RenderableType
from rich.text import Text

from actionspace.demo._sqlite import SqliteService
from actionspace.errors import ConfigurationError
from actionspace.policy.principal import Principal
from actionspace.runtime import Runtime
from actionspace.trace.store import SUPPORTED_URLS, sqlite_path

__all__ = [
    "TOOL",
    "FollowUp",
    "PartnerChannel",
    "channel_path",
    "leave_pending",
    "register",
    "with_note",
]

TOOL = "share_with_partner"
RECIPIENT = "events@partner-agency.example"
"""The address the model guesses for the agency (it was never given one)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS posts (
    key TEXT PRIMARY KEY, recipient TEXT NOT NULL, event_id TEXT NOT NULL, message TEXT NOT NULL);
"""


class PartnerChannel(SqliteService):
    """The partner agency's inbound channel: one row per post, deduplicated by idempotency key."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        super().__init__(path, _SCHEMA)

    def post(self, *, key: str, recipient: str, event_id: str, message: str) -> dict[str, Any]:
        """Store a post; the same ``key`` again returns the first post and writes nothing."""
        with self._tx() as db:
            db.execute(
                "INSERT OR IGNORE INTO posts (key, recipient, event_id, message) VALUES (?, ?, ?, ?)",
                (key, recipient, event_id, message),
            )
            row = db.execute("SELECT * FROM posts WHERE key = ?", (key,)).fetchone()
        return dict(row)

    def posts(self) -> list[dict[str, Any]]:
        return [dict(r) for r in self._conn().execute("SELECT * FROM posts ORDER BY rowid").fetchall()]


def channel_path(store: str) -> Path:
    """Where the channel of the demo writing to ``store`` lives.

    Beside the SQLite file for a ``sqlite://`` store; ``~/.actionspace/demo/`` for any other store
    (a ``memory://`` store lives in one process only; PostgreSQL keeps no local folder).
    """
    scheme = store.partition("://")[0].lower()
    if scheme == "sqlite":
        db = sqlite_path(store)
        return db.parent / f"{db.stem}-partner-channel.db"
    if "://" not in store or scheme not in ("memory", "postgresql", "postgres"):
        raise ConfigurationError(f"unsupported store URL {store!r}; supported: {', '.join(SUPPORTED_URLS)}")
    return Path.home() / ".actionspace" / "demo" / "partner-channel.db"


def register(rt: Runtime, *, store: str) -> PartnerChannel:
    """Register ``share_with_partner`` on ``rt`` against the channel of ``store``; returns the channel.

    The caller closes the channel when it closes the runtime.
    """
    channel = PartnerChannel(channel_path(store))

    @rt.tool(
        effect="external",
        risk="high",
        high_risk_args=("recipient",),
        writes=["partner:{recipient}"],
        idempotency="native",
    )
    def share_with_partner(
        event_id: str, recipient: str, message: str, idempotency_key: str
    ) -> dict[str, Any]:
        """Post an event to an outside partner's channel (leaves the company).

        Args:
            event_id: The calendar event shared.
            recipient: The partner's address.
            message: What the post says.
        """
        return channel.post(key=idempotency_key, recipient=recipient, event_id=event_id, message=message)

    return channel


@dataclass(frozen=True, slots=True, kw_only=True)
class FollowUp:
    """The follow-up left for a person: its run and its approval request."""

    store: str
    """The store the run and the request are in."""
    run_id: str
    request_id: str | None
    """None when the call was not held (it then ran or failed: see ``category``)."""
    category: str | None


def leave_pending(
    store: str, *, after_run: str, event: Mapping[str, Any] | None, principal: Principal
) -> FollowUp | None:
    """Propose the share as the model would and leave it held for approval.

    None without an event, or on a ``memory://`` store.

    Runs in a run of its own, ``<after_run>-followup``, which stays open: the demo's process ends
    while the call waits for a person.
    """
    if event is None or store.startswith("memory:"):  # nobody could approve it after this process
        return None
    rt = Runtime(store, principal=principal, recover_on_start=False)
    channel = register(rt, store=store)
    try:
        run_id = rt.new_run(f"{after_run}-followup", principal=principal)
        arguments = {
            "event_id": event["id"],
            "recipient": RECIPIENT,
            "message": f"{event['title']} on {event['start_utc']} (UTC): please join.",
        }
        raw = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"call_{uuid.uuid4().hex[:8]}",
                    "type": "function",
                    "function": {"name": TOOL, "arguments": json.dumps(arguments)},
                }
            ],
        }
        provenance = {"event_id": f"tool_result:{after_run}:get_event", "message": "model_inferred"}
        scoped = Principal(id=principal.id, scopes=(*principal.scopes, f"external:{TOOL}"))
        obs = rt.call(raw, run_id=run_id, node_id="share", principal=scoped, provenance=provenance)
        category = obs.error.category if obs.error else None
        request_id = obs.error.details.get("request_id") if obs.error else None
        return FollowUp(
            store=store,
            run_id=run_id,
            request_id=str(request_id) if request_id else None,
            category=category,
        )
    finally:
        rt.close()
        channel.close()


def with_note(shown: RenderableType, followup: FollowUp | None) -> RenderableType:
    """``shown``, followed by where the held follow-up waits (unchanged when nothing is held)."""
    if followup is None or followup.request_id is None:
        return shown
    note = Text.assemble(
        ("held for approval: ", "bold yellow"),
        f"{TOOL} in run {followup.run_id} (request {followup.request_id}); "
        f"approve or deny it in the console: actionspace serve --store {followup.store}",
    )
    return Group(shown, note)
