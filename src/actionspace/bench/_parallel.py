"""Plan rows: 100 independent slow calls as one Plan, and a 1,000-node random DAG.

Both go through ``rt.arun_plan``, so every node takes the full pipeline (validate, authorize,
approvals, ledger, observe, trace).

- ``batch.plan.arun_plan.memory_store`` / ``.sqlite_store``: one Plan of ``BATCH`` nodes, each a
  call of ``slow`` (``asyncio.sleep(0.010)``), with no edges and ``max_concurrency=BATCH``. Timed as
  a batch row, beside ``asyncio.gather`` of the raw coroutines and each peer's parallel batch.
- ``dag.random_1000``: a seeded random DAG (edges i → j for i < j, at most ``DAG_FAN_IN`` parents a
  node, 1–20 ms of ``asyncio.sleep`` per node, no read/write conflicts). Its makespan is held against
  the critical path (the longest latency-weighted path, the bound for unlimited concurrency), beside
  the same DAG as plain asyncio tasks. Run again with zero latency, wall time ÷ nodes is the
  per-node scheduling cost. The report side is :mod:`actionspace.bench._parallel_report`.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import random
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from actionspace.bench._timing import Pass
from actionspace.bench._workload import BATCH, slow

if TYPE_CHECKING:
    from actionspace.plan import Plan
    from actionspace.runtime import Runtime

__all__ = [
    "DAG_FAN_IN",
    "DAG_NODES",
    "DAG_ROW",
    "DAG_SEED",
    "GATHER_BESIDE_ROW",
    "PLAN_ROWS",
    "RandomDag",
    "asyncio_dag",
    "batch_plan",
    "critical_path_ms",
    "dag_plan",
    "pause",
    "random_dag",
    "run_plan_rows",
]

PLAN_ROWS: Final = ("batch.plan.arun_plan.memory_store", "batch.plan.arun_plan.sqlite_store")
"""The 100-node plan rows: the in-memory store, and the default SQLite store in a temporary folder."""
GATHER_BESIDE_ROW: Final = f"{PLAN_ROWS[0]}.gather_beside"
"""``asyncio.gather`` of the same coroutines, its batches timed alternately with the memory-store
plan's (the ``batch.direct.asyncio_gather`` floor is timed in another part of the run)."""

DAG_ROW: Final = "dag.random_1000"
DAG_NODES: Final = 1000
DAG_SEED: Final = 20260501
DAG_FAN_IN: Final = 3
"""Most parents a DAG node has (each node draws 0 to this many, uniformly)."""
DAG_LATENCY_MS: Final = (1, 20)
"""Inclusive range of a DAG node's sleep, in whole milliseconds."""
DAG_REPS: Final = 5
"""Timed runs of the DAG (and of its asyncio twin) per pass, at scale ≥ 0.5 (fewer below)."""


async def pause(ms: int) -> int:
    """Sleep ``ms`` milliseconds (not at all for 0), then return ``ms``.

    Args:
        ms: how long to sleep, in milliseconds.
    """
    if ms:
        await asyncio.sleep(ms / 1000)
    return ms


@dataclass(frozen=True, slots=True, kw_only=True)
class RandomDag:
    """A DAG over nodes ``0 … n-1`` whose edges all run from a lower to a higher index."""

    latency_ms: tuple[int, ...]
    """Sleep of each node, in milliseconds."""
    parents: tuple[tuple[int, ...], ...]
    """Each node's parents, ascending; every parent index is below the node's."""

    @property
    def edges(self) -> int:
        return sum(len(ps) for ps in self.parents)

    def depth(self) -> int:
        """Nodes on the longest path, counting edges only (latencies ignored)."""
        levels: list[int] = []
        for ps in self.parents:
            levels.append(1 + max((levels[p] for p in ps), default=0))
        return max(levels, default=0)


def random_dag(
    nodes: int = DAG_NODES,
    *,
    seed: int = DAG_SEED,
    fan_in: int = DAG_FAN_IN,
    latency_ms: tuple[int, int] = DAG_LATENCY_MS,
) -> RandomDag:
    """The same DAG for the same arguments: node ``j`` draws 0 to ``fan_in`` parents among ``0 … j-1``."""
    rng = random.Random(seed)
    low, high = latency_ms
    latency = tuple(rng.randint(low, high) for _ in range(nodes))
    parents = tuple(tuple(sorted(rng.sample(range(j), min(j, rng.randint(0, fan_in))))) for j in range(nodes))
    return RandomDag(latency_ms=latency, parents=parents)


def critical_path_ms(dag: RandomDag) -> int:
    """The longest path's total latency, in ms: no schedule can finish the DAG sooner."""
    finish: list[int] = []
    for j, ps in enumerate(dag.parents):
        finish.append(dag.latency_ms[j] + max((finish[p] for p in ps), default=0))
    return max(finish, default=0)


def dag_plan(dag: RandomDag, *, zero: bool = False) -> Plan:
    """``dag`` as a Plan of ``pause`` calls (node ``j`` is ``n{j}``); ``zero`` makes every sleep 0."""
    from actionspace.plan import Plan, PlanNode

    return Plan(
        nodes=[
            PlanNode(
                id=f"n{j}",
                tool="pause",
                arguments={"ms": 0 if zero else dag.latency_ms[j]},
                depends_on=tuple(f"n{p}" for p in ps),
            )
            for j, ps in enumerate(dag.parents)
        ],
        max_concurrency=len(dag.parents),
    )


async def asyncio_dag(dag: RandomDag, *, zero: bool = False) -> list[int]:
    """The floor: ``dag`` as bare asyncio tasks, each awaiting its parents, then ``pause``."""
    tasks: list[asyncio.Task[int]] = []

    async def node(j: int) -> int:
        for p in dag.parents[j]:
            await tasks[p]
        return await pause(0 if zero else dag.latency_ms[j])

    for j in range(len(dag.parents)):
        tasks.append(asyncio.ensure_future(node(j)))
    return list(await asyncio.gather(*tasks))


def batch_plan() -> Plan:
    """``BATCH`` independent ``slow`` calls (node ``n{i}`` returns ``i``), all allowed at once."""
    from actionspace.plan import Plan, PlanNode

    nodes = [PlanNode(id=f"n{i}", tool="slow", arguments={"x": i}) for i in range(BATCH)]
    return Plan(nodes=nodes, max_concurrency=BATCH)


def _runtime(store: str) -> Runtime:
    from actionspace.runtime import Runtime

    rt = Runtime(store=store, recover_on_start=False)
    rt.tool(effect="none")(slow)
    rt.tool(effect="none")(pause)
    return rt


def _wrong(result: Any, expect: Callable[[int], Any]) -> str | None:
    """Why a plan result is not every node ok with its expected data, or None."""
    if result.status != "ok":
        return f"status {result.status}: {dict(itertools.islice(result.failed.items(), 3))}"
    for key, obs in result.nodes.items():
        if obs.status != "ok" or obs.data != expect(int(key[1:])):
            return f"node {key} gave {obs.status} {obs.data!r}"
    return None


async def _batch_row(p: Pass, name: str, store: str) -> None:
    if not p.want(name):
        return
    plan = batch_plan()
    with _runtime(store) as rt:
        run = rt.new_run()

        async def batch() -> list[Any]:
            result = await rt.arun_plan(plan, run_id=run)
            if result.status != "ok":  # a failed rep is no figure
                raise AssertionError(_wrong(result, lambda i: i))
            return list(result.nodes.values())

        first = await rt.arun_plan(plan, run_id=run)
        why = _wrong(first, lambda i: i)
        if why is None and len(first.nodes) != BATCH:
            why = f"{len(first.nodes)} nodes ran, expected {BATCH}"
        if why is not None:
            p.fail(name, AssertionError(why))
            return
        if name != PLAN_ROWS[0]:
            await p.abatch(name, batch)
            return

        async def gather() -> list[int]:
            return list(await asyncio.gather(*(slow(i) for i in range(BATCH))))

        await p.abatch_beside(name, batch, GATHER_BESIDE_ROW, gather)


async def _ms(work: Awaitable[Any]) -> float:
    started = time.perf_counter()
    await work
    return (time.perf_counter() - started) * 1e3


async def _dag_figures(rt: Runtime, dag: RandomDag, reps: int) -> dict[str, Any]:
    nodes = len(dag.parents)
    plans = {zero: dag_plan(dag, zero=zero) for zero in (False, True)}
    run = rt.new_run()
    for zero in (False, True):  # warm-up, and the check that the run is what it claims
        result = await rt.arun_plan(plans[zero], run_id=run)
        why = _wrong(result, (lambda _j: 0) if zero else dag.latency_ms.__getitem__)
        if why is not None:
            raise AssertionError(f"the DAG plan (zero latency: {zero}) did not run: {why}")
    gc.collect()
    walls: dict[str, list[float]] = {"plan": [], "floor": [], "plan_zero": [], "floor_zero": [], "fresh": []}
    for _ in range(reps):  # interleaved, so a change of load is shared
        for zero, tag in ((False, ""), (True, "_zero")):
            walls["plan" + tag].append(await _ms(rt.arun_plan(plans[zero], run_id=run)))
            walls["floor" + tag].append(await _ms(asyncio_dag(dag, zero=zero)))
        fresh = dag_plan(dag, zero=True)  # as a model's plan arrives: a new object, checked anew
        walls["fresh"].append(await _ms(rt.arun_plan(fresh, run_id=run)))
    med = {k: statistics.median(v) for k, v in walls.items()}
    return {
        "nodes": nodes,
        "edges": dag.edges,
        "depth": dag.depth(),
        "seed": DAG_SEED,
        "fan_in": DAG_FAN_IN,
        "reps": reps,
        "critical_path_ms": critical_path_ms(dag),
        "makespan_ms": med["plan"],
        "floor_ms": med["floor"],
        "zero_latency_us_per_node": med["plan_zero"] * 1e3 / nodes,
        "zero_floor_us_per_node": med["floor_zero"] * 1e3 / nodes,
        "zero_latency_fresh_us_per_node": med["fresh"] * 1e3 / nodes,
        "pass_makespans_ms": [round(w, 2) for w in walls["plan"]],
    }


async def _dag_row(p: Pass) -> None:
    if not p.want(DAG_ROW):
        return
    try:
        with _runtime("memory://") as rt:
            row = await _dag_figures(rt, random_dag(), max(2, int(DAG_REPS * min(1.0, p.scale * 2))))
    except Exception as exc:
        p.fail(DAG_ROW, exc)
        return
    ratio = row["makespan_ms"] / row["critical_path_ms"]
    p.record(
        DAG_ROW,
        row,
        f"makespan {row['makespan_ms']:.1f} ms = {ratio:.3f} × critical path "
        f"{row['critical_path_ms']} ms; {row['zero_latency_us_per_node']:.1f} µs/node",
    )


async def _rows(p: Pass) -> None:
    for name in PLAN_ROWS:
        if name.endswith("memory_store"):
            await _batch_row(p, name, "memory://")
            continue
        with tempfile.TemporaryDirectory(prefix="actionspace-bench-") as home:
            from actionspace.trace.store import default_store_url

            await _batch_row(p, name, default_store_url({"ACTIONSPACE_HOME": home}))
    await _dag_row(p)


def run_plan_rows(p: Pass) -> None:
    """Every plan row of one pass: the 100-node plan on both stores, then the random DAG."""
    if not p.wants_any("plan.", "dag."):
        return
    try:
        import actionspace.plan  # noqa: F401
    except ImportError as exc:
        p.skip("plan", f"the plan package does not import: {exc}")
        return
    asyncio.run(_rows(p))


def medians(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The DAG row across passes: the median of each per-pass figure."""
    first = rows[0]
    out = {k: first[k] for k in ("nodes", "edges", "depth", "seed", "fan_in", "reps", "critical_path_ms")}
    for key in (
        "makespan_ms",
        "floor_ms",
        "zero_latency_us_per_node",
        "zero_floor_us_per_node",
        "zero_latency_fresh_us_per_node",
    ):
        out[key] = statistics.median(r[key] for r in rows)
    out["passes"] = len(rows)
    return out
