"""Meters kept in a store follow ``os.fork``: in a child forked after a meter was created, the
meter takes an owner identity of the child's (its pid and start time), so its reservations are
never taken for its parent's, nor its parent's for its own. Meters are held by weak references."""

from __future__ import annotations

import os
import weakref
from typing import Protocol

__all__ = ["Forking", "follow_forks"]


class Forking(Protocol):
    def after_fork(self) -> None:
        """Called in the forked child, before anything else runs there."""


_LIVE: weakref.WeakSet[Forking] = weakref.WeakSet()


def follow_forks(meter: Forking) -> None:
    """Call ``meter.after_fork()`` in every child forked while ``meter`` is alive."""
    _LIVE.add(meter)


def _after_fork_in_child() -> None:
    for meter in list(_LIVE):
        meter.after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
