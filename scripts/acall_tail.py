"""What makes the slow calls of the bench's ``acall`` rows: each call timed as the bench times it
(``actionspace.bench._timing``: a fresh memory-store runtime, the warm-up, a full collection, then
20,000 calls), with what happened during it noted beside its time.

    python scripts/acall_tail.py                   # both rows, 3 rounds of 20,000 calls each
    python scripts/acall_tail.py --rows sync --rounds 5 --calls 20000
    python scripts/acall_tail.py --ab --rounds 8   # the memory store's call log as tuples vs flat
    python scripts/acall_tail.py --ab --rounds 8 --frame /tmp/old/src/actionspace/pipeline/_direct.py
    python scripts/acall_tail.py --ab --rounds 8 --fork            # each row in a forked child

For every call: its wall time; the cyclic collector's passes that ran inside it (``gc.callbacks``:
generation and duration); the thread's context switches (``getrusage(RUSAGE_THREAD)``, voluntary
and involuntary) and its CPU time (``time.thread_time_ns``). The calls at or above the row's p99
(and those above 3 x the median, the bench's limit) are then sorted by the first cause that
explains them: a collection inside the call, a context switch inside it (the scheduler took the
core, or the thread waited), a page fault inside it (``ru_minflt`` / ``ru_majflt``: the process's
memory grew onto a page not touched before), CPU time above 3 x the median CPU (work of its own),
or nothing seen. The probes add a few hundred nanoseconds to each call; ``--bare`` times the calls exactly as
the bench does (no probe) and counts only the collections.

``--ab`` alternates, in this process, rows whose memory trace store keeps each call's record as a
tuple (as it did before ``CallLog``: one object for the collector a call) with rows of the store as
it is, both timed bare, and prints each pair's p99 / median, median and young collections. With
``--frame FILE`` it alternates instead rows whose ``Engine.quick`` is the one-frame path of
``FILE`` (a ``pipeline/_direct.py`` of other code, e.g. ``git archive`` of an earlier commit; the
rest of the runtime is this one) with rows of the frame as it is. With ``--fork`` each row of
``--ab`` runs in a child forked from the script's process, as the bench runs a pass: every row
starts from the same heap, not from what the rows before it freed (which decides how many of its
calls touch a page the process never used: a row in a fresh process touches a new page on ~8 % of
its calls, one after another row's on ~2 %). ``--cold`` hands the C heap's free pages back to the
system (glibc's ``malloc_trim``) before each row.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import ctypes.util
import gc
import importlib.util
import json
import os
import resource
import statistics
import time
import traceback
from collections.abc import Awaitable, Callable
from typing import Any

from actionspace.bench._ours import _acaller, _runtime
from actionspace.bench._timing import warmup_count
from actionspace.bench._workload import openai_calls
from actionspace.trace import memory

TOOLS = {"async": "add_async", "sync": "add"}


class Collections:
    """The collector's passes, each as (call index, generation, ns), from ``gc.callbacks``."""

    def __init__(self) -> None:
        self.index = -1
        self.passes: list[tuple[int, int, int]] = []
        self._start = 0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.perf_counter_ns()
        else:
            self.passes.append((self.index, info["generation"], time.perf_counter_ns() - self._start))


async def _timed(
    afn: Callable[[int], Awaitable[Any]], n: int, seen: Collections, probe: bool
) -> dict[str, Any]:
    for i in range(warmup_count(n)):
        await afn(i)
    gc.collect()
    clock = time.perf_counter_ns
    cpu = time.thread_time_ns
    usage = resource.getrusage
    who = resource.RUSAGE_THREAD
    walls = [0] * n
    cpus = [0] * n
    switches = [0] * n
    faults = [0] * n
    gc.callbacks.append(seen)
    try:
        if probe:
            for i in range(n):
                seen.index = i
                before = usage(who)
                c0 = cpu()
                t0 = clock()
                await afn(i)
                walls[i] = clock() - t0
                cpus[i] = cpu() - c0
                after = usage(who)
                switches[i] = (after.ru_nvcsw - before.ru_nvcsw) + 1000 * (after.ru_nivcsw - before.ru_nivcsw)
                faults[i] = after.ru_minflt - before.ru_minflt + after.ru_majflt - before.ru_majflt
        else:
            for i in range(n):
                seen.index = i
                t0 = clock()
                await afn(i)
                walls[i] = clock() - t0
    finally:
        gc.callbacks.remove(seen)
    return {"walls": walls, "cpus": cpus, "switches": switches, "faults": faults}


def _p99(values: list[int]) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def _explain(row: dict[str, Any], seen: Collections, probe: bool) -> dict[str, Any]:
    walls = row["walls"]
    n = len(walls)
    ordered = sorted(walls)
    median = ordered[n // 2]
    p99 = ordered[min(n - 1, int(0.99 * n))]
    collected: dict[int, list[tuple[int, int]]] = {}
    for index, generation, ns in seen.passes:
        collected.setdefault(index, []).append((generation, ns))
    cpu_median = statistics.median(row["cpus"]) if probe else 0

    def cause(i: int) -> str:
        if i in collected:
            return f"gc gen {max(g for g, _ in collected[i])}"
        if probe and row["switches"][i] >= 1000:
            return "preempted"
        if probe and row["switches"][i]:
            return "waited"
        if probe and any(row["switches"][j] for j in range(max(0, i - 3), i)):
            return "after a switch"
        if probe and row["faults"][i]:
            return "page fault"
        if probe and row["cpus"][i] > 3 * cpu_median:
            return "cpu"
        return "unseen"

    def tally(indices: list[int]) -> dict[str, int]:
        out: dict[str, int] = {}
        for i in indices:
            key = cause(i)
            out[key] = out.get(key, 0) + 1
        return dict(sorted(out.items()))

    tail = [i for i in range(n) if walls[i] >= p99]
    over = [i for i in range(n) if walls[i] > 3 * median]
    by_gen: dict[int, list[int]] = {}
    for generation, ns in ((g, ns) for _, g, ns in seen.passes):
        by_gen.setdefault(generation, []).append(ns)
    return {
        "median_us": median / 1e3,
        "p99_us": p99 / 1e3,
        "p99_over_median": p99 / median,
        "over_3x": len(over),
        "tail_causes": tally(tail),
        "over_3x_causes": tally(over),
        "collections": {
            g: {"count": len(v), "median_us": statistics.median(v) / 1e3, "calls_per": n / len(v)}
            for g, v in sorted(by_gen.items())
        },
        "cpu_median_us": cpu_median / 1e3,
        "cpu_p99_over_median": _p99(row["cpus"]) / cpu_median if probe else 0.0,
        "ranks": {r: ordered[n - r] / median for r in (100, 150, 200, 250, 300, 400)},
        "faults": _faults(row, median) if probe else {},
    }


def _faults(row: dict[str, Any], median: int) -> dict[str, Any]:
    """The calls during which the thread took page faults (``ru_minflt`` + ``ru_majflt``): how many,
    the faults in all, and those calls' median time and CPU against the row's median."""
    hit = [i for i, f in enumerate(row["faults"]) if f]
    if not hit:
        return {"calls": 0}
    return {
        "calls": len(hit),
        "faults": sum(row["faults"]),
        "wall_x": statistics.median(row["walls"][i] for i in hit) / median,
        "cpu_x": statistics.median(row["cpus"][i] for i in hit) / statistics.median(row["cpus"]),
    }


class TupleLog(list[Any]):
    """A run's call log as the store kept it before :class:`~actionspace.trace._memory_records.CallLog`:
    each record appended as its tuple (only for timing: the store's readers expect it flat)."""

    __slots__ = ()


def _frame_of(path: str) -> Callable[[Any], Any]:
    """``direct_caller`` of the one-frame path in ``path``, imported beside the one in use."""
    spec = importlib.util.spec_from_file_location("actionspace.pipeline._direct_compared", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.direct_caller  # type: ignore[no-any-return]


def _forked(run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``run()`` in a forked child (as the bench measures each pass: a process whose state is this
    one's, its heap untouched by the rows before), its figures sent back as JSON."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: measure, answer, leave without running this process's exit handlers
        os.close(read)
        try:
            with os.fdopen(write, "w") as out:
                json.dump(run(), out)
        except BaseException:  # shown here; the parent then stops
            traceback.print_exc()
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as got:
        text = got.read()
    os.waitpid(pid, 0)
    if not text:
        raise SystemExit("the forked row failed (its traceback is above)")
    figures: dict[str, Any] = json.loads(text)
    figures["collections"] = {int(g): c for g, c in figures["collections"].items()}
    return figures


def _trim() -> None:
    """Hand the C heap's free pages back to the system (glibc ``malloc_trim``; elsewhere nothing)."""
    found = ctypes.util.find_library("c")
    trim = getattr(ctypes.CDLL(found), "malloc_trim", None) if found else None
    gc.collect()
    if trim is not None:
        trim(0)


async def _round(
    name: str,
    n: int,
    probe: bool,
    tuples: bool = False,
    frame: Callable[[Any], Any] | None = None,
) -> dict[str, Any]:
    seen = Collections()
    made = memory.__dict__["CallLog"]
    if tuples:
        setattr(memory, "CallLog", TupleLog)  # noqa: B010  (the run's log is made at its first call)
    try:
        with _runtime() as rt:
            if frame is not None:  # Runtime.acall reads engine.quick at each call
                rt.engine.quick = frame(rt.engine.messages)
            row = await _timed(_acaller(rt, openai_calls(TOOLS[name])), n, seen, probe)
    finally:
        setattr(memory, "CallLog", made)  # noqa: B010
    return _explain(row, seen, probe)


AB_FIGURES = ("p99_over_median", "median_us", "cpu_p99_over_median")
"""What ``--ab`` compares per pair of rows (the CPU figure only with the probes on)."""


def _figures(out: dict[str, Any]) -> str:
    young = out["collections"].get(0, {}).get("count", 0)
    cpu = f", cpu p99/median {out['cpu_p99_over_median']:.2f}" if out["cpu_median_us"] else ""
    faults = f", calls with faults {out['faults']['calls']}" if out["faults"] else ""
    figures = f"p99/median {out['p99_over_median']:.2f}, median {out['median_us']:.2f} µs"
    return f"{figures}{cpu}, gen 0: {young}{faults}"


def _ab(
    rows: list[str],
    rounds: int,
    n: int,
    probe: bool,
    frame: str | None = None,
    cold: bool = False,
    fork: bool = False,
) -> None:
    """Rows with the call log as tuples (A) and flat (B), or with the one-frame path of ``frame``
    (A) and the one in use (B), alternated; the order flips each round. ``cold``: :func:`_trim`
    before each row; ``fork``: each row in a child forked from this process (:func:`_forked`)."""
    old = None if frame is None else _frame_of(frame)
    a_name, b_name = ("tuples", "flat") if old is None else ("frame of file", "frame now")
    got: dict[tuple[str, bool], list[dict[str, Any]]] = {}
    for r in range(rounds):
        for name in rows:
            for is_a in (True, False) if r % 2 == 0 else (False, True):
                variant = (is_a, None) if old is None else (False, old if is_a else None)
                if cold:
                    _trim()

                def row(name: str = name, variant: Any = variant) -> dict[str, Any]:
                    return asyncio.run(_round(name, n, probe, *variant))

                out = _forked(row) if fork else row()
                got.setdefault((name, is_a), []).append(out)
            a, b = got[(name, True)][-1], got[(name, False)][-1]
            print(f"round {r} {name}: {a_name} {_figures(a)} | {b_name} {_figures(b)}", flush=True)
    for name in rows:
        olds, news = got[(name, True)], got[(name, False)]
        for figure in AB_FIGURES[: 3 if probe else 2]:
            lower = sum(y[figure] < x[figure] for x, y in zip(olds, news, strict=True))
            before = statistics.median(x[figure] for x in olds)
            now = statistics.median(y[figure] for y in news)
            print(
                f"{name} {figure}, median of rounds: {a_name} {before:.2f}, {b_name} {now:.2f}"
                f" ({b_name} lower in {lower}/{len(olds)})"
            )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", default="async,sync", help="async, sync or both (default both)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--bare", action="store_true", help="no probes: only the collections")
    parser.add_argument("--ab", action="store_true", help="the call log as tuples vs flat, alternated")
    parser.add_argument("--frame", help="with --ab: a pipeline/_direct.py to alternate with the one in use")
    parser.add_argument("--cold", action="store_true", help="free C heap pages handed back before each row")
    parser.add_argument("--fork", action="store_true", help="with --ab: each row in a forked child")
    args = parser.parse_args()
    if args.ab:
        rows = args.rows.split(",")
        _ab(rows, args.rounds, args.calls, not args.bare, args.frame, args.cold, args.fork)
        return
    for r in range(args.rounds):
        for name in args.rows.split(","):
            if args.cold:
                _trim()
            out = asyncio.run(_round(name, args.calls, not args.bare))
            gens = ", ".join(
                f"gen {g}: {c['count']} ({c['median_us']:.0f} µs, 1/{c['calls_per']:.0f})"
                for g, c in out["collections"].items()
            )
            ranks = ", ".join(f"{rank}: {v:.2f}" for rank, v in out["ranks"].items())
            print(f"round {r} {name}: {_figures(out)}; calls over 3 x the median: {out['over_3x']}")
            print(f"  p99 calls: {out['tail_causes']}\n  over 3 x: {out['over_3x_causes']}")
            print(f"  collections: {gens}\n  x the median at rank from the top: {ranks}")
            print(f"  calls with page faults: {out['faults']}", flush=True)


if __name__ == "__main__":
    main()
