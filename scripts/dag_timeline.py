"""Where the random DAG's makespan goes: the plan against bare asyncio tasks, along the critical path.

    python scripts/dag_timeline.py            # 10 rounds, each the plan then the bare tasks
    python scripts/dag_timeline.py --rounds 20

The DAG is the bench's (``bench/_parallel.py`` ``random_dag``: 1,000 nodes, 1-20 ms each); its
tool notes when each node's sleep began and ended, so the makespan splits into:

- ``first``: from the start until the first node of the critical path (by latency) began;
- ``dispatch``: summed over the critical path, from the end of a node's last parent until it began;
- ``late``: summed over the critical path, how much later than asked each sleep ended (the event
  loop wakes on whole milliseconds, and after whatever else is ready);
- ``tail``: from the end of the last node of the critical path until the plan (or ``gather``)
  returned; for the plan, the part of it after every node settled is split further:
  ``flush`` (the trace records held since the last flush), ``observed`` (the flow state told the
  model was shown every node's observation, ``FlowState.observed_taken``), and ``teardown`` (the
  rest: the result, and dropping the checked plan and the scheduler's state when ``arun_plan``
  returns).

Medians over the rounds, in milliseconds.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from _rounds import arguments, run_on  # scripts/_rounds.py

from actionspace.bench._parallel import _runtime, critical_path_ms, random_dag
from actionspace.plan import Plan, PlanNode
from actionspace.plan.scheduler import Scheduler
from actionspace.policy.flow import FlowState

BEGAN: dict[int, float] = {}
ENDED: dict[int, float] = {}
MARKS: dict[str, float] = {}


async def timed_pause(j: int, ms: int) -> int:
    """Sleep ``ms`` milliseconds as node ``j``, noting when the sleep began and ended.

    Args:
        j: the node's index in the DAG.
        ms: how long to sleep.
    """
    BEGAN[j] = time.perf_counter()
    await asyncio.sleep(ms / 1000)
    ENDED[j] = time.perf_counter()
    return ms


def _spans(name: str, wrapped: Callable[..., Any]) -> Callable[..., Any]:
    def spanned(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return wrapped(*args, **kwargs)
        finally:
            MARKS[name] = MARKS.get(name, 0.0) + time.perf_counter() - began

    return spanned


def _instrument() -> None:
    """Note when the plan's last node settled, and time its final flush and ``observed_many``."""
    check_settled = Scheduler._check_settled

    def noting(self: Scheduler) -> None:
        check_settled(self)
        if self._all_settled.done() and "settled" not in MARKS:
            MARKS["settled"] = time.perf_counter()

    Scheduler._check_settled = noting  # type: ignore[method-assign]
    flush = Scheduler._flush_pending

    def final_flush(self: Scheduler, now: float) -> None:
        if self._closed:
            _spans("flush", flush)(self, now)
        else:
            flush(self, now)

    Scheduler._flush_pending = final_flush  # type: ignore[method-assign]
    FlowState.observed_taken = _spans("observed", FlowState.observed_taken)  # type: ignore[method-assign]


def main() -> None:
    args = arguments(__doc__, 10, "the plan then the bare tasks")
    rounds = args.rounds
    dag = random_dag()
    rt = _runtime("memory://")
    rt.tool(effect="none")(timed_pause)
    plan = Plan(
        nodes=[
            PlanNode(
                id=f"n{j}",
                tool="timed_pause",
                arguments={"j": j, "ms": dag.latency_ms[j]},
                depends_on=tuple(f"n{p}" for p in parents),
            )
            for j, parents in enumerate(dag.parents)
        ],
        max_concurrency=len(dag.parents),
    )
    critical = _critical_path(dag.latency_ms, dag.parents)
    run_id = rt.new_run()

    async def bare() -> None:
        tasks: list[asyncio.Task[int]] = []

        async def node(j: int) -> int:
            for p in dag.parents[j]:
                await tasks[p]
            return await timed_pause(j, dag.latency_ms[j])

        for j in range(len(dag.parents)):
            tasks.append(asyncio.ensure_future(node(j)))
        await asyncio.gather(*tasks)

    async def one(run: Callable[[], Awaitable[Any]]) -> dict[str, float]:
        BEGAN.clear(), ENDED.clear(), MARKS.clear()
        start = time.perf_counter()
        await run()
        end = time.perf_counter()
        with_parents = [j for j in critical if dag.parents[j]]
        row = {
            "makespan": end - start,
            "first": BEGAN[critical[0]] - start,
            "dispatch": sum(BEGAN[j] - max(ENDED[p] for p in dag.parents[j]) for j in with_parents),
            "late": sum(ENDED[j] - BEGAN[j] - dag.latency_ms[j] / 1000 for j in critical),
            "tail": end - ENDED[critical[-1]],
        }
        if "settled" in MARKS:
            row["after settled"] = end - MARKS["settled"]
            row["flush"] = MARKS.get("flush", 0.0)
            row["observed"] = MARKS.get("observed", 0.0)
            row["teardown"] = row["after settled"] - row["flush"] - row["observed"]
        return row

    async def measure() -> dict[str, list[dict[str, float]]]:
        runs: dict[str, Callable[[], Awaitable[Any]]] = {
            "plan": lambda: rt.arun_plan(plan, run_id=run_id),
            "bare tasks": bare,
        }
        for run in runs.values():  # warm-up
            await one(run)
        rows: dict[str, list[dict[str, float]]] = {name: [] for name in runs}
        for _ in range(rounds):
            for name, run in runs.items():
                rows[name].append(await one(run))
        return rows

    _instrument()
    rows = run_on(args.loop, measure())
    print(
        f"DAG: {len(dag.parents)} nodes, critical path {critical_path_ms(dag)} ms over {len(critical)} nodes;"
        f" medians of {rounds} rounds, ms"
    )
    for name, runs in rows.items():
        keys = list(runs[0])
        print(
            f"{name:>10}: "
            + "  ".join(f"{k} {statistics.median(r[k] for r in runs) * 1e3:.2f}" for k in keys)
        )
    ratio = statistics.median(r["makespan"] for r in rows["plan"]) / statistics.median(
        r["makespan"] for r in rows["bare tasks"]
    )
    print(f"makespan, plan / bare tasks: {ratio:.3f}")


def _critical_path(latency: tuple[int, ...], parents: tuple[tuple[int, ...], ...]) -> list[int]:
    """The nodes of the longest path by latency, first to last."""
    finish: list[int] = []
    via: list[int | None] = []
    for j, ps in enumerate(parents):
        best = max(ps, key=finish.__getitem__, default=None)
        finish.append(latency[j] + (finish[best] if best is not None else 0))
        via.append(best)
    path: list[int] = []
    at: int | None = max(range(len(finish)), key=finish.__getitem__)
    while at is not None:
        path.append(at)
        at = via[at]
    return path[::-1]


if __name__ == "__main__":
    main()
