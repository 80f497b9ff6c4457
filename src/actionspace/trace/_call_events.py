"""The trace stores' read of some calls' events of a run, without the rest of the run."""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol, runtime_checkable

from actionspace.trace.events import TraceEvent

__all__ = ["ReadsCallEvents"]


@runtime_checkable
class ReadsCallEvents(Protocol):
    """A trace store that reads some calls' events of a run and leaves the others unread (the
    SQLite, PostgreSQL and memory stores do): a reader that needs a few calls of a long run (the
    framework adapters' marks rebuilt from the trace, ``adapters/_marks.py``) costs what it reads."""

    def call_events(self, run_id: str, call_ids: Collection[str], kinds: Collection[str]) -> list[TraceEvent]:
        """The events of run ``run_id`` whose call id is one of ``call_ids`` and whose kind is one
        of ``kinds``, ordered by ``seq``: exactly those of ``events(run_id)``."""
        ...
