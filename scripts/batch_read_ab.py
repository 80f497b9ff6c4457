"""PostgreSQL's read-only trace reader: its batch read (``events_of_runs``) against the run-by-run
read, in one process.

``python scripts/batch_read_ab.py [RUNS] [BLOCKS]`` writes RUNS runs (default 2,000) of 17 events to
a throwaway cluster (``actionspace.pgcluster``), then reads them all through the read-only reader in
blocks that alternate the batch read (``on``) and each run's ``events`` in turn (``off``,
``_runs_events.RunsOneByOne``), the order swapped each block (default 8 blocks). Prints the medians
of the calling thread's CPU time and of the wall time, and the blocks in which ``on`` used less CPU.
"""

from __future__ import annotations

import statistics
import sys
import time
from typing import Any

from actionspace.trace._runs_events import RunsOneByOne
from actionspace.trace.events import TraceEvent


def _run(run_id: str, calls: int) -> list[TraceEvent]:
    events = [TraceEvent(run_id=run_id, seq=0, kind="run_started", ts=1.0, data={"tenant": "a"})]
    for c in range(calls):
        seq, call = 1 + 3 * c, f"c{c}"
        events += [
            TraceEvent(run_id=run_id, seq=seq, kind="proposed", ts=2.0, call_id=call, data={"tool": "t"}),
            TraceEvent(run_id=run_id, seq=seq + 1, kind="dispatched", ts=2.0, call_id=call, data={}),
            TraceEvent(
                run_id=run_id, seq=seq + 2, kind="observation", ts=3.0, call_id=call, data={"status": "ok"}
            ),
        ]
    events.append(TraceEvent(run_id=run_id, seq=1 + 3 * calls, kind="run_finished", ts=4.0, data={}))
    return events


def _read(store: Any, ids: list[str], batch: bool) -> int:
    read = store.events_of_runs(ids) if batch else RunsOneByOne.events_of_runs(store, ids)
    return sum(len(events) for _, events in read)


def _ab(store: Any, ids: list[str], blocks: int, reads: int) -> None:
    took: dict[str, list[tuple[float, float]]] = {"on": [], "off": []}
    lower = 0
    for block in range(blocks):
        order = ("on", "off") if block % 2 == 0 else ("off", "on")
        for which in order:
            cpu, wall = time.thread_time(), time.perf_counter()
            for _ in range(reads):
                _read(store, ids, which == "on")
            took[which].append((time.thread_time() - cpu, time.perf_counter() - wall))
        lower += took["on"][-1][0] < took["off"][-1][0]

    def median(which: str, i: int) -> float:
        return statistics.median(t[i] for t in took[which]) * 1000

    print(
        f"CPU medians on {median('on', 0):.1f} ms / off {median('off', 0):.1f} ms"
        f" (on lower in {lower} of {blocks}); wall {median('on', 1):.1f} / {median('off', 1):.1f} ms"
    )


def main(runs: int, blocks: int) -> None:
    from actionspace.pgcluster import throwaway_cluster
    from actionspace.trace.postgres import PostgresTraceReader, PostgresTraceStore

    ids = [f"m{n}" for n in range(runs)]
    with throwaway_cluster("batch_read_ab") as url:
        with PostgresTraceStore(url) as writer:
            for start in range(0, runs, 100):
                writer.append_many([e for run_id in ids[start : start + 100] for e in _run(run_id, 5)])
        with PostgresTraceReader(url) as reader:
            _ab(reader, ids, blocks, 1)


if __name__ == "__main__":
    args = [int(arg) for arg in sys.argv[1:]]
    main(args[0] if args else 2000, args[1] if len(args) > 1 else 8)
