"""Tasks of one evaluation played in several worker processes.

Each task runs in its own fresh runtime whatever the process, so splitting a suite over processes
changes no verdict, only the wall time. Workers are forked (the suite and the policy are inherited,
not pickled) before any thread of the evaluation starts; outcomes come back in task order. Only
policies that say their answers depend on the view alone (``policy.independent``) are split: a
policy with state (a mutation log, a conversation) stays in one process.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any, TypeVar

__all__ = ["default_workers", "run_split"]

Job = TypeVar("Job")
Result = TypeVar("Result")

_MIN_PER_WORKER = 200
"""Fewer jobs per worker than this are not worth a process."""
_CHUNK = 64
"""Jobs per chunk handed to a worker (small enough to balance slow and fast tasks)."""

_STATE: dict[str, Any] = {}


def default_workers() -> int:
    """The processes an evaluation may use: the CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _chunk(bounds: tuple[int, int]) -> list[Any]:
    run, jobs = _STATE["run"], _STATE["jobs"]
    return [run(job) for job in jobs[bounds[0] : bounds[1]]]


def run_split(
    jobs: Sequence[Job],
    run: Callable[[Job], Result],
    *,
    workers: int,
    done: Callable[[Result], None] | None = None,
) -> list[Result] | None:
    """``[run(job) for job in jobs]`` over ``workers`` forked processes, in job order.

    ``done`` is called in this process for every result as its chunk arrives. Returns None (and
    runs nothing) when splitting is not worth it or not possible here (no ``fork``): the caller
    then runs the jobs itself.
    """
    workers = min(workers, len(jobs) // _MIN_PER_WORKER)
    if workers < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return None
    _STATE.update(run=run, jobs=jobs)
    bounds = [(start, min(start + _CHUNK, len(jobs))) for start in range(0, len(jobs), _CHUNK)]
    results: list[list[Result]] = [[] for _ in bounds]
    try:
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            futures = {pool.submit(_chunk, b): i for i, b in enumerate(bounds)}
            for future in as_completed(futures):
                chunk = future.result()
                results[futures[future]] = chunk
                if done is not None:
                    for result in chunk:
                        done(result)
    finally:
        _STATE.clear()
    return [r for chunk in results for r in chunk]
