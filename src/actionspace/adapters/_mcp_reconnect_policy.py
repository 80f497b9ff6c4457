"""How a session with an MCP server that ended on its own is opened again: the policy, its checks, and the
waits between rounds of attempts.

Kept free of the MCP SDK so that the gateway's configuration can check a ``reconnect`` table without it
(``_gateway_config``); ``_mcp_reconnect`` drives the attempts.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from dataclasses import dataclass
from typing import Final

from actionspace.errors import ConfigurationError

__all__ = ["DEFAULT_RECONNECT", "Reconnect", "Waking", "either"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Reconnect:
    """How a session with an MCP server that ended on its own is opened again (``reconnect=None``: never)."""

    attempts: int = 5
    """Most attempts in a row that may fail before the connection rests (see ``cooldown_s``). Default 5."""
    initial_backoff_s: float = 0.5
    """Wait before the second attempt, in seconds (the first is made at once). Default 0.5."""
    backoff_multiplier: float = 2.0
    """Growth of the wait per failed attempt. Default 2."""
    max_backoff_s: float = 30.0
    """Longest wait between two attempts, in seconds. Default 30."""
    cooldown_s: float = 60.0
    """Once ``attempts`` failed in a row, the first call made at least this long after (seconds) starts a
    new round of attempts; calls before it are refused unsent. Default 60; ``math.inf``: never (the
    server is back only once it is added again)."""
    unanswered: int = 3
    """Requests in a row that ended unanswered (timed out or cancelled) while nothing at all was heard
    from the server, after which it is asked for its tools: unanswered too, the session is taken for
    ended and opened again (a stdio server's process is stopped and started again). Default 3."""
    idle_probe_s: float | None = None
    """When set, the server is asked for its tools after this many seconds (> 0) in which nothing was
    heard from it, so that a server that went away while idle is noticed before the next call. Default
    None: never (its notification stream ending is still noticed)."""

    def __post_init__(self) -> None:
        for name in ("attempts", "unanswered"):
            value = getattr(self, name)
            if value.__class__ is not int or value < 1:
                raise ConfigurationError(f"Reconnect.{name} must be an int >= 1, got {value!r:.100}")
        for name in ("initial_backoff_s", "backoff_multiplier", "max_backoff_s"):
            value = getattr(self, name)
            least = 1 if name == "backoff_multiplier" else 0
            if not _number(value) or not math.isfinite(value) or value < least:
                raise ConfigurationError(f"Reconnect.{name} must be a finite number >= 0 (a multiplier >= 1)")
        if not _number(self.cooldown_s) or not self.cooldown_s >= 0:  # NaN too; inf: never
            raise ConfigurationError(
                f"Reconnect.cooldown_s must be a number >= 0 (inf: never), got {self.cooldown_s!r:.100}"
            )
        idle = self.idle_probe_s
        if idle is not None and (not _number(idle) or not math.isfinite(idle) or idle <= 0):
            raise ConfigurationError(
                f"Reconnect.idle_probe_s must be None or a finite number > 0, got {idle!r:.100}"
            )

    def delay(self, failed: int) -> float:
        """Seconds to wait before the next attempt, after ``failed`` attempts that failed in a row."""
        if failed <= 0:
            return 0.0
        try:
            grown = self.initial_backoff_s * self.backoff_multiplier ** (failed - 1)
        except OverflowError:  # thousands of attempts: the wait is long since at its cap
            return self.max_backoff_s
        return min(self.max_backoff_s, grown)


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


DEFAULT_RECONNECT: Final = Reconnect()
"""What a server reconnects under unless configured otherwise."""


class Waking:
    """Where a connection whose attempts are spent rests until a call made after the cool-down wakes it.

    Used on the connection's loop only."""

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self.open = False
        """True while a call would start a new round (the cool-down is over)."""

    def call(self) -> bool:
        """A call found no session: whether it starts a new round of attempts."""
        if not self.open:
            return False
        self.open = False
        self._event.set()
        return True

    async def rest(self, cooldown_s: float, stop: asyncio.Event) -> None:
        """Wait out ``cooldown_s``, then until a call comes (:meth:`call`), or until ``stop`` is set."""
        if math.isinf(cooldown_s):
            await stop.wait()
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), cooldown_s)
        self._event.clear()
        self.open = True
        try:
            await either(self._event, stop)
        finally:
            self.open = False


async def either(*events: asyncio.Event) -> None:
    """Wait until one of ``events`` is set."""
    waits = {asyncio.ensure_future(event.wait()) for event in events}
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()
