"""Named crash points for fault-injection tests: zero cost unless armed.

Armed by the environment variable ``ACTIONSPACE_CRASH_AT=<point>[:<n>]``: the process kills
itself with SIGKILL the n-th time (default 1st) it reaches that point. Points are placed at every
ledger boundary; the crash sweep (``actionspace sweep``) arms them one at a time.
"""

from __future__ import annotations

import os
import signal

__all__ = ["POINTS", "arm", "point"]

POINTS: tuple[str, ...] = (
    "before_intent",
    "after_intent",
    "after_dispatch_durable",
    "tool_received",
    "tool_committed",
    "after_response",
    "after_ledger_commit",
    "during_observation_write",
    "during_purge",
    "during_approval_decision",
)
"""``tool_received`` and ``tool_committed`` are reached inside a tool that calls :func:`point`."""

_spec = os.environ.get("ACTIONSPACE_CRASH_AT")
_target: str | None = None
_remaining = 0
if _spec:
    name, _, count = _spec.partition(":")
    _target, _remaining = name, int(count or "1")


def arm(name: str | None, count: int = 1) -> None:
    """Arm ``name`` (or disarm with None) in this process; a forked test child calls this."""
    global _target, _remaining
    _target, _remaining = name, count


def point(name: str) -> None:
    """SIGKILL this process if the armed point is ``name`` and its count is reached."""
    global _remaining
    if _target is None or name != _target:
        return
    _remaining -= 1
    if _remaining <= 0:
        os.kill(os.getpid(), signal.SIGKILL)
