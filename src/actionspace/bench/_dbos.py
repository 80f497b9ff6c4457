"""``actionspace bench --only dbos``: the price of durability, DBOS backend vs the in-process scheduler.

Both run the same plans on one Runtime over the same throwaway PostgreSQL cluster (ledger, approvals
and trace in PostgreSQL either way), with one ``native`` write tool that inserts a row. So the
difference is what the DBOS backend adds: a workflow per plan and per node, their checkpoints, the
queue hand-off and the completion messages. Reported:

* sequential: one plan after another, the backends alternating plan by plan — plans/s and the
  wall time per node (latency view);
* concurrent: ``plans`` plans started at once — plans/s (throughput view, one worker process);
* the per-node overhead of DBOS (sequential wall per node, DBOS minus in-process) and the ratios;
* the target, PASS or FAIL: DBOS adds at most :data:`OVERHEAD_LIMIT_MS` per node.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from functools import partial
from typing import Any

import psycopg

__all__ = ["OVERHEAD_LIMIT_MS", "TARGET_LABEL", "dbos_target", "render_dbos", "run_dbos_bench"]

DEFAULT_PLANS = 20
DEFAULT_NODES = 10
BACKENDS = ("inprocess", "dbos")
OVERHEAD_LIMIT_MS = 5.0
"""Target: DBOS adds at most this many milliseconds per node (sequential) over in-process."""
TARGET_LABEL = f"DBOS per-node overhead ≤ {OVERHEAD_LIMIT_MS:g} ms over in-process"


def _plan(run_id: str, nodes: int) -> dict[str, Any]:
    """Half the nodes take the value of the node before (depth about ``nodes / 2``), half stand alone."""
    out = []
    for i in range(nodes):
        value: Any = {"$ref": f"n{i - 1}.data.value"} if i % 2 else i
        out.append(
            {"id": f"n{i}", "tool": "bench_write", "arguments": {"ref": f"{run_id}/n{i}", "value": value}}
        )
    return {"nodes": out}


def _tool(url: str) -> Callable[..., dict[str, Any]]:
    from psycopg_pool import ConnectionPool

    pool: ConnectionPool[psycopg.Connection[tuple[Any, ...]]] = ConnectionPool(url, min_size=1, max_size=8)

    def bench_write(ref: str, value: int, idempotency_key: str) -> dict[str, Any]:
        with pool.connection() as conn:
            conn.execute(
                "INSERT INTO bench_effects (key, ref, value) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                (idempotency_key, ref, value),
            )
        return {"ref": ref, "value": value + 1}

    return bench_write


def _timed(runs: Callable[[], int]) -> tuple[float, int]:
    began = time.perf_counter()
    done = runs()
    return time.perf_counter() - began, done


def run_dbos_bench(
    *,
    plans: int = DEFAULT_PLANS,
    nodes: int = DEFAULT_NODES,
    progress: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """Measure both backends (see the module docstring); returns the figures as a dict."""
    from actionspace.durable import DurableConfig, launch, shutdown
    from actionspace.pgcluster import throwaway_cluster
    from actionspace.runtime import Runtime

    with throwaway_cluster("actionspace_bench") as url:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE bench_effects (key text PRIMARY KEY, ref text, value bigint)")
        rt = Runtime(store=url, recover_on_start=False)
        rt.add_tool(
            name="bench_write",
            fn=_tool(url),
            effect="write",
            idempotency="native",
            writes=["bench:{ref}"],
            input_schema={
                "type": "object",
                "properties": {"ref": {"type": "string"}, "value": {"type": "integer"}},
                "required": ["ref", "value"],
            },
        )
        try:
            progress("launching DBOS")
            launched = time.perf_counter()
            launch(rt, DurableConfig(worker_concurrency=16, system_schema="dbos_bench"))
            launch_s = time.perf_counter() - launched
            tag = uuid.uuid4().hex[:6]
            for backend in BACKENDS:
                warm = f"warm-{backend}-{tag}"
                rt.run_plan(_plan(warm, nodes), run_id=warm, backend=backend)
            progress(f"{plans} plans one after another, alternating the backends")
            seq = _sequential(rt, tag, plans, nodes)
            con: dict[str, float] = {}
            for backend in BACKENDS:
                progress(f"{backend}: {plans} plans at once")
                con[backend], _ = _timed(partial(_concurrent, rt, backend, tag, plans, nodes))
            rows = {
                backend: {
                    "sequential_plans_per_s": round(plans / seq[backend], 2),
                    "sequential_ms_per_node": round(seq[backend] / (plans * nodes) * 1000, 2),
                    "concurrent_plans_per_s": round(plans / con[backend], 2),
                    "concurrent_ms_per_node": round(con[backend] / (plans * nodes) * 1000, 2),
                }
                for backend in BACKENDS
            }
        finally:
            shutdown()
            rt.close()
    inproc, dbos = rows["inprocess"], rows["dbos"]
    overhead = dbos["sequential_ms_per_node"] - inproc["sequential_ms_per_node"]
    figures = {
        "plans": plans,
        "nodes_per_plan": nodes,
        "dbos_launch_s": round(launch_s, 2),
        "inprocess": inproc,
        "dbos": dbos,
        "dbos_overhead_ms_per_node": round(overhead, 2),
        "sequential_ratio": round(inproc["sequential_plans_per_s"] / dbos["sequential_plans_per_s"], 2),
        "concurrent_ratio": round(inproc["concurrent_plans_per_s"] / dbos["concurrent_plans_per_s"], 2),
    }
    figures["target"] = dbos_target(figures)
    return figures


def dbos_target(figures: dict[str, Any]) -> dict[str, Any]:
    """The PASS/FAIL row of the figures: the sequential per-node overhead against the limit."""
    overhead = float(figures["dbos_overhead_ms_per_node"])
    return {
        "label": TARGET_LABEL,
        "status": "PASS" if overhead <= OVERHEAD_LIMIT_MS else "FAIL",
        "overhead_ms": overhead,
        "limit_ms": OVERHEAD_LIMIT_MS,
    }


def _sequential(rt: Any, tag: str, plans: int, nodes: int) -> dict[str, float]:
    """Seconds each backend spent on ``plans`` plans run one at a time, the backends alternating
    plan by plan so that both see the same load of the machine."""
    spent = dict.fromkeys(BACKENDS, 0.0)
    for i in range(plans):
        for backend in BACKENDS:
            run_id = f"seq-{backend}-{tag}-{i}"
            began = time.perf_counter()
            result = rt.run_plan(_plan(run_id, nodes), run_id=run_id, backend=backend)
            spent[backend] += time.perf_counter() - began
            if result.status != "ok":
                raise RuntimeError(f"bench plan {run_id} ended {result.status}: {result.failed}")
    return spent


def _concurrent(rt: Any, backend: str, tag: str, plans: int, nodes: int) -> int:
    async def all_at_once() -> list[Any]:
        runs = [f"con-{backend}-{tag}-{i}" for i in range(plans)]
        return await asyncio.gather(*(rt.arun_plan(_plan(r, nodes), run_id=r, backend=backend) for r in runs))

    results = asyncio.run(all_at_once())
    bad = [r.run_id for r in results if r.status != "ok"]
    if bad:
        raise RuntimeError(f"bench plans {bad[:3]} did not end ok")
    return plans


def render_dbos(figures: dict[str, Any]) -> str:
    """The figures as a small text table."""
    lines = [
        f"durable plans: {figures['plans']} plans of {figures['nodes_per_plan']} nodes,"
        " one process, PostgreSQL",
        f"{'backend':<10} {'seq plans/s':>12} {'seq ms/node':>12} {'conc plans/s':>13} {'conc ms/node':>13}",
    ]
    for backend in BACKENDS:
        row = figures[backend]
        lines.append(
            f"{backend:<10} {row['sequential_plans_per_s']:>12} {row['sequential_ms_per_node']:>12}"
            f" {row['concurrent_plans_per_s']:>13} {row['concurrent_ms_per_node']:>13}"
        )
    lines.append(
        f"DBOS adds {figures['dbos_overhead_ms_per_node']} ms per node (sequential); in-process is "
        f"{figures['sequential_ratio']}x faster one plan at a time, {figures['concurrent_ratio']}x with "
        f"{figures['plans']} plans at once; DBOS launch {figures['dbos_launch_s']} s"
    )
    target = figures.get("target") or dbos_target(figures)
    lines.append(
        f"{target['status']:<4}  {target['label']}: {target['overhead_ms']} ms per node"
        f" (DBOS {figures['dbos']['sequential_ms_per_node']} vs in-process"
        f" {figures['inprocess']['sequential_ms_per_node']} ms, one plan at a time)"
    )
    return "\n".join(lines)
