"""Where the SQLite writer's time goes in a durable call, one caller against several at once.

    python scripts/group_commit.py                 # 800 calls alone, then 800 from 8 threads
    python scripts/group_commit.py --calls 1600 --callers 4

Runs the bench's durable row (``rt.call`` of a ``write`` tool on a SQLite file, the
``durable_write_sqlite`` rows of ``actionspace bench``): first from one thread, then from
``--callers`` threads in rounds of one call each, as the bench's group row does. For each it
prints the wall time and the process's CPU time (every thread) per call, the share of the wall
the file's writer was held by each kind of group, the groups it committed (``GroupCommit``: how
many per call, how many operations each carried, how long each held the writer) and, per kind of
statement run inside a group, how long it took from its start to the start of the next one (the
last, ``COMMIT``, until the group returned); times are medians unless marked. With several callers
a statement's time includes waits to take the interpreter's lock back from the other callers'
Python: SQLite releases it around every statement, and the statement trace that times them takes
it once more, so the split by statement is indicative there; the time a group held the writer is
what the other callers waited for.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from actionspace import Runtime, ToolCall
from actionspace.ledger.sqlite_writer import GroupCommit, SqliteConnections

KINDS = {
    "durable": "groups on disk before they return (an intent)",
    "WAL": "groups in the WAL only (an outcome)",
    "deferred": "groups carrying deferred operations (the trace rows the flusher commits)",
}


class Watch:
    """The groups committed and the statements run inside them, while installed."""

    def __init__(self) -> None:
        self.groups: list[tuple[int, str, int]] = []
        """(operations, kind, ns the group held the writer); the kinds are those of :data:`KINDS`."""
        self.statements: dict[str, list[int]] = defaultdict(list)
        self._local = threading.local()
        self._lock = threading.Lock()

    def clear(self) -> None:
        with self._lock:
            self.groups.clear()
            self.statements.clear()

    @contextmanager
    def installed(self) -> Iterator[None]:
        commit, connect = GroupCommit._commit, SqliteConnections._connect
        watch = self

        def timed_commit(self: GroupCommit, group: list[Any]) -> Any:
            marks: list[tuple[int, str]] = []
            watch._local.marks = marks
            start = time.perf_counter_ns()
            try:
                return commit(self, group)
            finally:
                end = time.perf_counter_ns()
                watch._local.marks = None
                watch._note(group, start, end, marks)

        def traced_connect(self: SqliteConnections) -> Any:
            conn = connect(self)
            conn.set_trace_callback(watch._seen)
            return conn

        GroupCommit._commit = timed_commit  # type: ignore[method-assign]
        SqliteConnections._connect = traced_connect  # type: ignore[method-assign]
        try:
            yield
        finally:
            GroupCommit._commit = commit  # type: ignore[method-assign]
            SqliteConnections._connect = connect  # type: ignore[method-assign]

    def _seen(self, statement: str) -> None:
        marks = getattr(self._local, "marks", None)
        if marks is not None:
            marks.append((time.perf_counter_ns(), statement.split(None, 1)[0].upper()))

    def _note(self, group: list[Any], start: int, end: int, marks: list[tuple[int, str]]) -> None:
        durable = any(slot.durable for slot in group)
        where = "durable" if durable else "deferred" if any(slot.detached for slot in group) else "WAL"
        with self._lock:
            self.groups.append((len(group), where, end - start))
            for (at, kind), (after, _) in zip(marks, [*marks[1:], (end, "")], strict=True):
                self.statements[f"{where}: {kind}"].append(after - at)


def _runtime(home: Path) -> tuple[Runtime, str, list[ToolCall]]:
    rt = Runtime(f"sqlite:///{home / 'actionspace.db'}", recover_on_start=False)

    def put(key: str, value: int) -> int:
        return 3

    schema = {"type": "object", "properties": {"key": {"type": "string"}, "value": {"type": "integer"}}}
    rt.add_tool(name="put", input_schema=schema, fn=put, effect="write", blocking=False)
    calls = [ToolCall(name="put", arguments={"key": f"k{i}", "value": i}) for i in range(4000)]
    return rt, rt.new_run(), calls


def _report(label: str, calls: int, wall_ns: int, cpu_ns: int, watch: Watch) -> None:
    cpu = f"{cpu_ns / calls / 1000:.0f} µs of process CPU a call"
    print(f"{label}: {wall_ns / calls / 1000:.0f} µs a call, {cpu}")
    held = {kind: sum(g[2] for g in watch.groups if g[1] == kind) for kind in KINDS}
    shares = ", ".join(
        f"{kind} {ns / wall_ns:.0%} ({ns / calls / 1000:.0f} µs a call)" for kind, ns in held.items()
    )
    print(f"  the writer held: {sum(held.values()) / wall_ns:.0%} of the wall; {shares}")
    for kind, what in KINDS.items():
        groups = [g for g in watch.groups if g[1] == kind]
        if groups:
            size = statistics.mean(g[0] for g in groups)
            held = statistics.median(g[2] for g in groups) / 1000
            print(f"  {what}: {len(groups) / calls:.2f} a call, {size:.1f} operations, {held:.1f} µs each")
            for name, times in sorted(watch.statements.items()):
                if name.startswith(f"{kind}: "):
                    median, mean = statistics.median(times) / 1000, statistics.mean(times) / 1000
                    count = len(times) / calls
                    statement = name.split(": ")[1]
                    print(f"    {statement:10s} {count:5.2f} a call, {median:7.1f} µs (mean {mean:7.1f} µs)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=800, help="calls per mode (default 800)")
    parser.add_argument("--callers", type=int, default=8, help="threads of the second mode (default 8)")
    args = parser.parse_args(argv)
    watch = Watch()
    with tempfile.TemporaryDirectory(prefix="actionspace-group-commit-") as tmp, watch.installed():
        rt, run, calls = _runtime(Path(tmp))
        n, callers = args.calls - args.calls % args.callers, args.callers
        call: Callable[[int], Any] = lambda i: rt.call(calls[i % len(calls)], run_id=run, node_id=f"n{i}")  # noqa: E731
        for i in range(200):  # warm-up
            call(10**6 + i)
        with ThreadPoolExecutor(max_workers=callers, thread_name_prefix="caller") as pool:
            list(pool.map(call, range(2 * 10**6, 2 * 10**6 + callers)))
            for label in ("one caller", f"{callers} callers"):
                watch.clear()
                base = 10**7 if label == "one caller" else 2 * 10**7
                start, cpu = time.perf_counter_ns(), time.process_time_ns()
                if label == "one caller":
                    for i in range(n):
                        call(base + i)
                else:
                    for r in range(n // callers):
                        list(pool.map(call, range(base + r * callers, base + (r + 1) * callers)))
                _report(label, n, time.perf_counter_ns() - start, time.process_time_ns() - cpu, watch)
        rt.close()


if __name__ == "__main__":
    main()
