"""Reads of part of a run in the SQLite trace, for the store and the read-only reader alike.

* A run's head events (``run_started``, ``run_finished``: its tenant, whether it finished) come
  through the partial index on them (``_sqlite_runs.HEADS``): a tenant check or a listing's row
  reads those rows, not the run, however long it is. A file whose writer has not added the index
  yet (an earlier version's, opened read-only) gives the same answer from the run's rows.
* Some calls' events of some kinds (``_call_events.ReadsCallEvents``): only those rows are turned
  into events, the rest of the run stays in the file: SQLite seeks each call in the partial index
  ``trace_events_calls`` (its ``call_id IS NOT NULL`` implied by the query's ``call_id IN``).
* Many runs' events (``_runs_events.ReadsManyRuns``) in one statement: the ids bound as one JSON
  array, which SQLite walks in order (``CROSS JOIN``: the array is the outer loop), seeking each
  run in its ``(run_id, seq)`` index, so the rows come a run at a time and in order, with no sort;
  they are fetched a page at a time (``_pages``).

A run id or call id no text column holds (an unpaired surrogate) matches no stored row, as the
whole run read back would show.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator, Sequence
from typing import Any, Final

from actionspace._unicode import text_for_utf8
from actionspace.trace._runs_events import PAGE_ROWS, RunEvents, checked_page, grouped_runs
from actionspace.trace._sqlite_runs import HEADS
from actionspace.trace._stored_rows import stored_event
from actionspace.trace.events import TraceEvent

__all__ = ["PartsOfRuns"]

_CHUNK: Final = 500
"""Ids bound a query, well under SQLite's bound on a statement's parameters."""
_COLUMNS: Final = "SELECT run_id, seq, kind, ts, call_id, data FROM trace_events"
_HEADS: Final = f"{_COLUMNS} WHERE run_id IN ({{marks}}) AND {HEADS} ORDER BY run_id, seq"
# ``+seq``: an order the ``(run_id, seq)`` index cannot give, so SQLite does not pick it to save the
# sort of the few rows found (and step over the whole run to do so) over the calls' index
_CALLS: Final = (
    f"{_COLUMNS} WHERE run_id = ? AND kind IN ({{kinds}}) AND call_id IN ({{marks}}) ORDER BY +seq"
)

_MANY: Final = (
    "SELECT e.run_id, e.seq, e.kind, e.ts, e.call_id, e.data FROM json_each(?) AS j"
    " CROSS JOIN trace_events AS e INDEXED BY trace_events_run_seq ON e.run_id = j.value"
)


class PartsOfRuns:
    """``heads``, ``heads_many`` and ``call_events`` of a SQLite trace, through ``_read``."""

    def _read(self, sql: str, params: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def _pages(self, sql: str, params: tuple[object, ...], size: int) -> Iterator[list[tuple[Any, ...]]]:
        """The rows of ``sql``, ``size`` at a time (the whole answer as one page, here)."""
        yield self._read(sql, params)

    def events(self, run_id: str) -> list[TraceEvent]:
        raise NotImplementedError

    def _settle_runs(self, run_ids: Sequence[str]) -> None:
        """Make what this process appended to ``run_ids`` readable (nothing, for a reader)."""

    def heads(self, run_id: str) -> list[TraceEvent]:
        """The run's ``run_started`` and ``run_finished`` events, in order (for run listings)."""
        return self.heads_many((run_id,))[run_id]

    def heads_many(self, run_ids: Sequence[str]) -> dict[str, list[TraceEvent]]:
        """:meth:`heads` of several runs in one query (a page of a run listing)."""
        self._settle_runs(run_ids)
        out: dict[str, list[TraceEvent]] = {run_id: [] for run_id in run_ids}
        stored = [run_id for run_id in out if text_for_utf8(run_id) == run_id]
        for start in range(0, len(stored), _CHUNK):
            chunk = tuple(stored[start : start + _CHUNK])
            for row in self._read(_HEADS.format(marks=", ".join("?" * len(chunk))), chunk):
                out[row[0]].append(stored_event(*row))
        return out

    def call_events(self, run_id: str, call_ids: Collection[str], kinds: Collection[str]) -> list[TraceEvent]:
        """See ``_call_events.ReadsCallEvents``."""
        ids = sorted({c for c in call_ids if text_for_utf8(c) == c})
        wanted = tuple(sorted({k for k in kinds if text_for_utf8(k) == k}))
        if not ids or not wanted or text_for_utf8(run_id) != run_id:
            return []
        self._settle_runs((run_id,))
        rows: list[tuple[Any, ...]] = []
        for start in range(0, len(ids), _CHUNK):
            chunk = tuple(ids[start : start + _CHUNK])
            sql = _CALLS.format(kinds=", ".join("?" * len(wanted)), marks=", ".join("?" * len(chunk)))
            rows += self._read(sql, (run_id, *wanted, *chunk))
        if len(ids) > _CHUNK:
            rows.sort(key=lambda row: row[1])
        return [stored_event(*row) for row in rows]

    def events_of_runs(self, run_ids: Sequence[str], *, page: int = PAGE_ROWS) -> Iterator[RunEvents]:
        """See ``_runs_events.ReadsManyRuns``: one statement, its rows read ``page`` at a time."""
        ids = list(dict.fromkeys(run_ids))
        checked_page(page)
        stored = [run_id for run_id in ids if text_for_utf8(run_id) == run_id]
        if any("\x00" in run_id for run_id in stored):  # SQLite's JSON text ends at U+0000
            return ((r, self.events(r) if r in stored else []) for r in ids)
        self._settle_runs(stored)
        rows = (row for rows in self._pages(_MANY, (json.dumps(stored),), page) for row in rows)
        return grouped_runs(ids, (stored_event(*row) for row in rows))
