"""The trace stores' read of many runs' events in one statement, a run at a time.

A reader of many whole runs (the per-tool metrics, ``evaluation.monitor``) asked ``events`` once per
run: a statement and its round trip each. :meth:`ReadsManyRuns.events_of_runs` names every run in
one statement whose rows come back in pages, grouped into runs as they arrive: what is held is a
page of rows and the run being read, however many runs are asked.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Final, Protocol, runtime_checkable

from actionspace.trace.events import TraceEvent

__all__ = ["PAGE_ROWS", "ReadsManyRuns", "RunsOneByOne", "events_of_runs", "grouped_runs"]

PAGE_ROWS: Final = 1000
"""Rows a batch read takes from the database at a time."""

RunEvents = tuple[str, list[TraceEvent]]


@runtime_checkable
class ReadsManyRuns(Protocol):
    """A trace store that reads the events of many runs in one statement (the SQLite and PostgreSQL
    stores and their read-only readers do). The memory store has no statement to save: it is read
    through ``events`` (:class:`RunsOneByOne`), a short hold of its lock a run; copying many runs
    under one hold read no faster and held its writers up longer (docs/performance-notes.md)."""

    def events_of_runs(self, run_ids: Sequence[str], *, page: int = PAGE_ROWS) -> Iterator[RunEvents]:
        """Each of ``run_ids`` once, in their order (a repeated id where it is first), with its
        events as ``events(run_id)`` gives them: ``[]`` for a run with none. The rows are read
        ``page`` at a time (``page`` ≥ 1); a consumer that stops early leaves the rest unread.
        Raises ``ValueError`` for a ``page`` below 1."""
        ...


class RunsOneByOne:
    """``events_of_runs`` read through ``events``, one run after another (a store without one of
    its own: what :func:`events_of_runs` falls back to)."""

    def events(self, run_id: str) -> list[TraceEvent]:
        raise NotImplementedError

    def events_of_runs(self, run_ids: Sequence[str], *, page: int = PAGE_ROWS) -> Iterator[RunEvents]:
        """See :class:`ReadsManyRuns`."""
        checked_page(page)
        return ((run_id, self.events(run_id)) for run_id in dict.fromkeys(run_ids))


def events_of_runs(store: Any, run_ids: Sequence[str], *, page: int = PAGE_ROWS) -> Iterator[RunEvents]:
    """``store.events_of_runs`` when the store has it (:class:`ReadsManyRuns`), else each run's
    ``events`` in turn, as :meth:`ReadsManyRuns.events_of_runs` answers."""
    if isinstance(store, ReadsManyRuns):
        return store.events_of_runs(run_ids, page=page)
    return RunsOneByOne.events_of_runs(store, run_ids, page=page)


def checked_page(page: int) -> int:
    if type(page) is not int or page < 1:
        raise ValueError(f"page must be a positive int, got {page!r}")
    return page


def grouped_runs(ids: Sequence[str], events: Iterable[TraceEvent]) -> Iterator[RunEvents]:
    """``ids`` (distinct) each with its events, from ``events``: those of ``ids``' runs, a run's
    together and in order, the runs in the order of ``ids``; a run none of ``events`` holds is
    given ``[]`` where it stands."""
    at = 0
    run: list[TraceEvent] = []
    for event in events:
        if at < len(ids) and event.run_id == ids[at]:
            run.append(event)
            continue
        if run:
            yield ids[at], run
            at += 1
            run = []
        while at < len(ids) and ids[at] != event.run_id:
            yield ids[at], []
            at += 1
        if at == len(ids):
            raise ValueError(f"an event of run {event.run_id!r} came out of the runs' order")
        run.append(event)
    if run:
        yield ids[at], run
        at += 1
    for run_id in ids[at:]:
        yield run_id, []
