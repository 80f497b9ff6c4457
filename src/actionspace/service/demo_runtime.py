"""The runtime ``actionspace serve`` builds by default: the demo's store and the demo's tools.

After ``actionspace demo`` the store holds the demo's runs, and its calendar follow-up left one
call (``share_with_partner``) held for approval. Serving the same store with the same tools lets a
person approve that call in the console; the server then runs it against the same partner channel
(it lives beside the store) and the post appears once.

The calendar tools are registered too, against a calendar of the server's own beside the store
(the demo's calendar lives in the demo's temporary folder), seeded like the demo's.
"""

from __future__ import annotations

from contextlib import ExitStack
from datetime import date
from pathlib import Path

from actionspace.demo.calendar import CalendarService
from actionspace.demo.followup import TOOL, channel_path
from actionspace.demo.followup import register as register_followup
from actionspace.demo.scenario import PRINCIPAL, build_runtime, next_tuesday, seed_calendar
from actionspace.policy.principal import Principal
from actionspace.runtime import Runtime

__all__ = ["DEMO_PRINCIPAL", "demo_runtime"]

DEMO_PRINCIPAL = Principal(id=PRINCIPAL.id, scopes=(*PRINCIPAL.scopes, f"external:{TOOL}"))
"""The demo user, allowed the follow-up share as well: resumed demo calls run as this principal."""


def demo_runtime(store: str, stack: ExitStack, *, today: date | None = None) -> Runtime:
    """A runtime on ``store`` with the demo's calendar and follow-up tools; ``stack`` closes it all."""
    calendar = CalendarService(_calendar_path(store))
    stack.callback(calendar.close)
    seed_calendar(calendar, next_tuesday(today or date.today()))
    rt = build_runtime(calendar, store)
    stack.callback(rt.close)
    rt.principal = DEMO_PRINCIPAL
    channel = register_followup(rt, store=store)
    stack.callback(channel.close)
    return rt


def _calendar_path(store: str) -> Path:
    channel = channel_path(store)
    return channel.with_name(channel.name.replace("partner-channel", "serve-calendar"))
