"""In-memory trace store: for tests and benchmarks; lost with the process."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from actionspace.trace.events import RunSummary, TraceEvent, summarize

__all__ = ["MemoryTraceStore"]


class MemoryTraceStore:
    """Keeps events in per-run lists; thread-safe appends."""

    def __init__(self) -> None:
        self._runs: dict[str, list[TraceEvent]] = {}
        self._lock = threading.Lock()

    def append_many(self, events: Sequence[TraceEvent]) -> None:
        if not events:
            return
        with self._lock:
            for event in events:
                run = self._runs.get(event.run_id)
                if run is None:
                    run = self._runs[event.run_id] = []
                run.append(event)

    def events(self, run_id: str) -> list[TraceEvent]:
        with self._lock:
            return sorted(self._runs.get(run_id, ()), key=lambda e: e.seq)

    def runs(self, *, limit: int = 50) -> list[RunSummary]:
        with self._lock:
            items = [(rid, list(evs)) for rid, evs in self._runs.items()]
        out = [s for rid, evs in items if (s := summarize(rid, evs)) is not None]
        out.sort(key=lambda s: s.last_at, reverse=True)
        return out[:limit]

    def next_seq(self, run_id: str) -> int:
        with self._lock:
            run = self._runs.get(run_id)
            return (run[-1].seq + 1) if run else 0

    def run_ids(self, prefix: str = "", *, limit: int | None = None) -> list[str]:
        """Run ids starting with ``prefix``, sorted; at most ``limit`` of them (None: all)."""
        with self._lock:
            found = sorted(rid for rid in self._runs if rid.startswith(prefix))
        return found if limit is None else found[:limit]

    def close(self) -> None:
        pass
