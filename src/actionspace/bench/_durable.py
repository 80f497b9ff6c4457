"""Durability rows: a side-effecting call on the SQLite store vs the database's raw commit rate.

Both rows write to a SQLite file with the same settings as the ledger (WAL, ``synchronous=FULL``):
the floor commits one INSERT per transaction; ours runs a full ``rt.call`` of a ``write`` tool,
whose ledger entry is made durable before dispatch and again at commit, plus the trace. The ratio
is the price of exactly-once, in transactions' worth.

A third row runs the same call from ``CALLERS`` threads at once (one round = one call from each):
its figure is the wall time of a round divided by ``CALLERS``, so one caller's median over it is
how much concurrent callers gain by sharing commits.

Both rows of ours also say what the processor did: ``cpu_us``, the median CPU time (user and
system, the kernel's part of the fsync included) of one call on its calling thread (the raw insert
beside it likewise), and for the concurrent callers the process's CPU time per call over the timed
rounds with ``cores_busy``, that CPU time over the wall time: how many of the machine's cores the
callers kept busy. A call whose CPU time is most of its wall time is bound by the processor, not
by the disk.

The disk's fsync latency drifts by several times within a minute on a shared machine, so the
one-caller ratio is measured on pairs: each of our calls is timed right after one raw insert into
a second file on the same disk, both recorded (``BESIDE_ROW`` is that interleaved floor).
"""

from __future__ import annotations

import gc
import sqlite3
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from actionspace.bench._timing import Pass, _describe, summarize, warmup_count

__all__ = [
    "BESIDE_ROW",
    "CALLERS",
    "FLOOR_ROW",
    "GROUP_ROW",
    "OUR_ROW",
    "run_durable_floor",
    "run_durable_ours",
]

FLOOR_ROW = "sqlite_commit.insert_per_transaction"
OUR_ROW = "actionspace.call.durable_write_sqlite"
BESIDE_ROW = f"{OUR_ROW}.raw_insert_beside"
"""The raw insert (as :data:`FLOOR_ROW`) timed alternately with :data:`OUR_ROW`, one each in turn."""
CALLERS = 8
"""Concurrent callers of the group-commit row."""
GROUP_ROW = f"actionspace.call.durable_write_sqlite.{CALLERS}_callers"
CALLS = 2000


def _raw_commit(path: Path) -> tuple[sqlite3.Connection, Callable[[int], int]]:
    """A SQLite file with the ledger's settings and a function committing one INSERT per call."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, k TEXT UNIQUE, v INTEGER)")

    def commit(i: int) -> int:
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT OR REPLACE INTO t (k, v) VALUES (?, ?)", (f"k{i}", i))
        db.execute("COMMIT")
        return 3

    return db, commit


def run_durable_floor(p: Pass) -> None:
    if not p.want(FLOOR_ROW):
        return
    with tempfile.TemporaryDirectory(prefix="actionspace-bench-") as tmp:
        db, commit = _raw_commit(Path(tmp) / "raw.db")
        p.sync(FLOOR_ROW, commit, CALLS, extract=lambda r: r, expect=3)
        db.close()


def _paired(p: Pass, raw: Callable[[int], int], ours: Callable[[int], Any]) -> None:
    """Time ``raw`` and ``ours`` one after the other, ``p.calls(CALLS)`` times each."""
    try:
        first = ours(0)
        if (first.status, first.data) != ("ok", 3):
            raise AssertionError(f"{OUR_ROW} returned {first!r}")
        n = p.calls(CALLS)
        for i in range(1, warmup_count(n)):
            raw(i)
            ours(i)
        gc.collect()
        clock, cpu = time.perf_counter_ns, time.thread_time_ns
        floor, mine, floor_cpu, mine_cpu = [0] * n, [0] * n, [0] * n, [0] * n
        for i in range(n):
            c0 = cpu()
            t0 = clock()
            raw(10**6 + i)
            t1 = clock()
            c1 = cpu()
            t2 = clock()
            ours(10**6 + i)
            t3 = clock()
            floor[i], mine[i] = t1 - t0, t3 - t2
            floor_cpu[i], mine_cpu[i] = c1 - c0, cpu() - c1
    except Exception as exc:
        p.errors[OUR_ROW] = _describe(exc)
    else:
        p.percall[BESIDE_ROW] = {**summarize(floor), "cpu_us": _median_us(floor_cpu), "result": 3}
        p.percall[OUR_ROW] = {
            **summarize(mine),
            "cpu_us": _median_us(mine_cpu),
            "result": {"status": "ok", "data": 3},
        }
        p._report(BESIDE_ROW)
    p._report(OUR_ROW)


def run_durable_ours(p: Pass) -> None:
    if not p.want(OUR_ROW) and not p.want(GROUP_ROW):
        return
    from actionspace.runtime import Runtime
    from actionspace.types import ToolCall

    with tempfile.TemporaryDirectory(prefix="actionspace-bench-") as tmp:
        rt = Runtime(f"sqlite:///{Path(tmp) / 'actionspace.db'}", recover_on_start=False)

        def put(key: str, value: int) -> int:
            return 3

        schema: dict[str, Any] = {
            "type": "object",
            "properties": {"key": {"type": "string"}, "value": {"type": "integer"}},
        }
        rt.add_tool(name="put", input_schema=schema, fn=put, effect="write", blocking=False)
        run = rt.new_run()
        calls = [ToolCall(name="put", arguments={"key": f"k{i}", "value": i}) for i in range(CALLS * 4)]

        def call(i: int) -> Any:
            return rt.call(calls[i % len(calls)], run_id=run, node_id=f"n{i}")

        if p.want(OUR_ROW):
            db, raw = _raw_commit(Path(tmp) / "raw.db")  # same disk, same settings
            _paired(p, raw, call)
            db.close()
        if p.want(GROUP_ROW):
            _group_row(p, lambda i: rt.call(calls[i % len(calls)], run_id=run, node_id=f"g{i}"))
        rt.close()


def _group_row(p: Pass, call: Any) -> None:
    """``CALLERS`` threads each make one call per round; the figure is a round's wall ÷ ``CALLERS``."""
    with ThreadPoolExecutor(max_workers=CALLERS, thread_name_prefix="bench-caller") as pool:

        def round_of(i: int) -> list[Any]:
            return list(pool.map(call, range(i * CALLERS, (i + 1) * CALLERS)))

        try:
            first = round_of(10**6)
            bad = [o for o in first if (o.status, o.data) != ("ok", 3)]
            if bad:
                raise AssertionError(f"{GROUP_ROW} returned {bad[0]!r}")
            rounds = max(25, p.calls(CALLS) // CALLERS)
            for i in range(warmup_count(rounds)):  # node ids of their own: a timed call never replays
                round_of(2 * 10**6 + i)
            gc.collect()
            clock = time.perf_counter_ns
            samples = [0] * rounds
            c0 = time.process_time_ns()  # every thread of the process: the callers and the writer's
            for i in range(rounds):
                t0 = clock()
                round_of(i)
                samples[i] = clock() - t0
            used = time.process_time_ns() - c0
            row = summarize([t // CALLERS for t in samples], CALLERS)
        except Exception as exc:
            p.errors[GROUP_ROW] = _describe(exc)
        else:
            cpu = {"cpu_us": used / (rounds * CALLERS) / 1e3, "cores_busy": used / sum(samples)}
            p.percall[GROUP_ROW] = {**row, **cpu, "result": {"status": "ok", "data": 3}}
        p._report(GROUP_ROW)


def _median_us(samples_ns: list[int]) -> float:
    return sorted(samples_ns)[len(samples_ns) // 2] / 1e3
