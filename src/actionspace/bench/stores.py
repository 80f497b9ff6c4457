"""Durable throughput of the shared stores: write calls per second from 1, 2 and 4 processes.

Every process runs its own ``Runtime`` on the same store URL and makes ``calls`` side-effecting
calls on distinct nodes (each one: ledger intent, claim, commit, and the call's trace events),
all released at once. PostgreSQL runs on a throwaway cluster started from the installed binaries.
"""

from __future__ import annotations

import multiprocessing as mp
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["store_throughput"]


def _worker(url: str, name: str, calls: int, ready: Any, start: Any, out: Any) -> None:
    from actionspace.runtime import Runtime
    from actionspace.types import ToolCall

    rt = Runtime(url, recover_on_start=False)

    def put(key: str, value: int) -> int:
        return value

    schema = {"type": "object", "properties": {"key": {"type": "string"}, "value": {"type": "integer"}}}
    rt.add_tool(name="put", input_schema=schema, fn=put, effect="write", blocking=False)
    run = f"bench-{name}"
    ready.put(name)
    start.wait()
    began = time.perf_counter()
    ok = sum(
        1
        for i in range(calls)
        if rt.call(
            ToolCall(name="put", arguments={"key": f"k{i}", "value": i}), run_id=run, node_id=f"n{i}"
        ).ok
    )
    out.put((name, ok, time.perf_counter() - began))
    rt.close()


def _measure(url: str, processes: int, calls: int, tag: str) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    ready, start, out = ctx.Queue(), ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=_worker, args=(url, f"{tag}-{processes}-{k}", calls, ready, start, out))
        for k in range(processes)
    ]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get(timeout=120)
    began = time.perf_counter()
    start.set()
    results = [out.get(timeout=600) for _ in procs]
    wall = time.perf_counter() - began
    for p in procs:
        p.join(60)
    done = sum(r[1] for r in results)
    return {
        "processes": processes,
        "calls": done,
        "failed": processes * calls - done,
        "wall_s": round(wall, 3),
        "calls_per_s": round(done / wall, 1),
    }


def store_throughput(
    *, processes: Sequence[int] = (1, 2, 4), calls: int = 300, stores: Sequence[str] = ("sqlite", "postgres")
) -> dict[str, list[dict[str, Any]]]:
    """``{store: [{processes, calls, failed, wall_s, calls_per_s}, ...]}``."""
    out: dict[str, list[dict[str, Any]]] = {}
    if "sqlite" in stores:
        with tempfile.TemporaryDirectory(prefix="actionspace-bench-") as tmp:
            url = f"sqlite:///{Path(tmp) / 'actionspace.db'}"
            out["sqlite"] = [_measure(url, n, calls, "sqlite") for n in processes]
    if "postgres" in stores:
        from actionspace.pgcluster import throwaway_cluster

        with throwaway_cluster() as url:
            out["postgres"] = [_measure(url, n, calls, "postgres") for n in processes]
    return out
