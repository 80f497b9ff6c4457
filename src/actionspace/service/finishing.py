"""Ending a run the service drives: one ``run_finished`` per run, whichever servers finish it.

Two servers may both believe they drive a run for a moment (one stalled past its lease while
another took the run over): both then reach its end. The end is written as a claim is
(``service/continuation.py``): the trace is read, and ``run_finished`` is written at the number
after the last event read, only when no ``run_finished`` is among those events and no other server
drives the run. The store keeps one event per number (SQLite and PostgreSQL refuse a second one,
the memory store too): of two servers that read the same trace, one writes its end and the other,
refused, reads again and finds the run ended, or taken over; it writes nothing. The event is the
one ``Runtime.finish`` writes (``status`` and the given fields, the run's context label where it
restricts its readers), plus ``server``, the id of the server that ended it.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from actionspace.runtime import Runtime
from actionspace.service.continuation import driver_of
from actionspace.trace.events import TraceEvent

__all__ = ["FINISHED_KIND", "finish_once"]

_log = logging.getLogger("actionspace.service")

FINISHED_KIND = "run_finished"
_ATTEMPTS = 8
"""Times the end is tried again when another event took its number (an unrelated append)."""


def finish_once(rt: Runtime, run_id: str, server: str, data: dict[str, Any]) -> bool:
    """Write ``run_id``'s ``run_finished`` (``data``: its payload, ``status`` first) for ``server``,
    unless the run already ended or another server drives it; True when this call wrote it.

    A store that cannot be read or written leaves the run unfinished (logged): its lease is no
    longer renewed, so a live server's scan continues it (what committed is replayed, never sent
    again).
    """
    store = rt.trace
    try:
        for _ in range(_ATTEMPTS):
            events = store.events(run_id)
            if any(e.kind == FINISHED_KIND for e in events):
                return False
            driver = driver_of(events)
            if driver is not None and driver != server:
                return False  # taken over: the server that drives it now ends it
            at = events[-1].seq + 1 if events else 0
            payload = {**data, "server": server}
            context = rt.run_state(run_id).flow.context
            if context.secret or context.readers is not None:  # as the run's other events are marked
                payload["label"] = context.to_dict()
            event = TraceEvent(run_id=run_id, seq=at, kind=FINISHED_KIND, ts=time.time(), data=payload)
            try:
                store.append_many([event])
            except ValueError:
                continue  # another event took that number: read again
            rt.engine.forget(run_id)
            return True
    except Exception:
        _log.warning("actionspace: could not record the end of run %s; a scan continues it", run_id)
        return False
    _log.warning("actionspace: the end of run %s kept losing its number to other events", run_id)
    return False
