"""Where the time of one actionspace call goes: cProfile over many in-memory calls of ``add``.

    .venv/bin/python benchmarks/profile_pipeline.py                 # rt.acall, async tool, JSON string
    .venv/bin/python benchmarks/profile_pipeline.py --path call     # rt.call, sync tool
    .venv/bin/python benchmarks/profile_pipeline.py --path toolcall --calls 50000 --out acall.prof

Same workload as ``actionspace bench`` (``actionspace.bench._workload``): a fresh
``Runtime(store="memory://")``, tools registered with ``effect="none"``, OpenAI-format call strings.
Prints the top functions by own time and by cumulative time, and the per-call wall time without the
profiler for scale (the profiler itself roughly doubles the cost of small Python functions).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import pstats
import time
from collections.abc import Callable
from typing import Any

from actionspace.bench._workload import ARGS_DICTS, VARIANTS, add, add_async, openai_calls
from actionspace.runtime import Runtime
from actionspace.types import ToolCall


def _runtime() -> Runtime:
    rt = Runtime(store="memory://")
    rt.tool(effect="none")(add)
    rt.tool(effect="none")(add_async)
    return rt


def _loop(path: str, rt: Runtime, n: int) -> Callable[[], Any]:
    if path == "call":
        calls = openai_calls("add")

        def run_sync() -> None:
            for i in range(n):
                rt.call(calls[i % VARIANTS])

        return run_sync
    inputs: list[Any]
    if path == "toolcall":
        inputs = [
            ToolCall(name="add_async", arguments=ARGS_DICTS[i], id=f"call_{i}") for i in range(VARIANTS)
        ]
    else:
        inputs = openai_calls("add_async")

    def run_async() -> None:
        async def body() -> None:
            for i in range(n):
                await rt.acall(inputs[i % VARIANTS])

        asyncio.run(body())

    return run_async


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--path", choices=("acall", "call", "toolcall"), default="acall")
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--out", help="also write the raw profile here (for snakeviz, pstats)")
    args = ap.parse_args()

    with _runtime() as rt:
        _loop(args.path, rt, 2000)()  # warm-up: compiled schemas, caches
        gc.collect()
        t0 = time.perf_counter()
        _loop(args.path, rt, args.calls)()
        plain_us = (time.perf_counter() - t0) / args.calls * 1e6
    with _runtime() as rt:
        _loop(args.path, rt, 2000)()
        gc.collect()
        profiler = cProfile.Profile()
        profiler.enable()
        _loop(args.path, rt, args.calls)()
        profiler.disable()
    print(
        f"{args.path}: {plain_us:.2f} µs per call without the profiler ({args.calls} calls, loop included)\n"
    )
    stats = pstats.Stats(profiler)
    if args.out:
        stats.dump_stats(args.out)
    stats.strip_dirs()
    print(f"== top {args.top} by own time (tottime)")
    stats.sort_stats("tottime").print_stats(args.top)
    print(f"== top {args.top} by cumulative time")
    stats.sort_stats("cumulative").print_stats(args.top)


if __name__ == "__main__":
    main()
