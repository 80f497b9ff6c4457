"""Where the 100-node plan's time goes against ``asyncio.gather`` of the same calls.

    python scripts/plan_timeline.py               # 40 rounds, each the plan then gather
    python scripts/plan_timeline.py --rounds 80

The workload is the bench's batch row (``bench/_parallel.py`` ``batch_plan``: 100 independent
calls of a tool sleeping 10 ms, all allowed at once), with a tool that notes when each sleep
began and ended. A round runs it as one plan, then as ``asyncio.gather`` of the bare coroutines,
and splits each run's wall time into:

- ``to first start``: until the first call's sleep began (for the plan: checking it, the
  ``plan_started`` event, the scheduler, the driver's first turn);
- ``starts``: from the first call's sleep to the last one's (each call begun in turn: for the
  plan, its check, its trace record, its task);
- ``to first end``: from the last start until the first sleep ended;
- ``ends``: from the first sleep's end to the last one's;
- ``tail``: from the last sleep's end until the batch returned (for the plan: the last node
  settled, its trace records handed to the store, the result built, the flow state shown every
  observation, ``plan_finished``, the plan's state dropped).

Every sleep ends about 10 ms after it began, so the last one ends about 10 ms after the last
start: what a batch spends before its last start and after its last end is what it adds to
those 10 ms. Medians over the rounds, in milliseconds; then, per batch, the cyclic collector's
collections that began in each phase (means over the rounds: a collection in ``starts`` or after
the last end adds to the total, one while the calls wait does not); the last line is the ratio
of the medians of the totals, the bench's ``≤ 1.10 × gather`` row measured the same way.
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from _rounds import arguments, run_on  # scripts/_rounds.py

from actionspace.bench._workload import BATCH, SLOW_S
from actionspace.plan import Plan, PlanNode
from actionspace.runtime import Runtime

BEGAN: list[float] = []
ENDED: list[float] = []
COLLECTED: list[float] = []
"""When each of the cyclic collector's collections began, during the current batch."""
PHASES = ("to first start", "starts", "to first end", "ends", "tail", "total")


async def noted(x: int) -> int:
    """Sleep as the bench's ``slow`` does, noting when the sleep began and ended.

    Args:
        x: the value to return.
    """
    BEGAN.append(time.perf_counter())
    await asyncio.sleep(SLOW_S)
    ENDED.append(time.perf_counter())
    return x


def _collecting(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        COLLECTED.append(time.perf_counter())


async def _one(run: Callable[[], Awaitable[Any]]) -> dict[str, float]:
    BEGAN.clear()
    ENDED.clear()
    COLLECTED.clear()
    start = time.perf_counter()
    await run()
    end = time.perf_counter()
    first, last = min(BEGAN), max(BEGAN)
    first_end, last_end = min(ENDED), max(ENDED)
    bounds = (first, last, first_end, last_end, end)
    row = {
        "to first start": first - start,
        "starts": last - first,
        "to first end": first_end - last,
        "ends": last_end - first_end,
        "tail": end - last_end,
        "total": end - start,
    }
    for phase in PHASES[:-1]:
        row[f"gc {phase}"] = 0.0
    for at in COLLECTED:  # the phase it began in: the first whose end is after it
        phase = next((p for p, bound in zip(PHASES, bounds, strict=False) if at < bound), PHASES[-2])
        row[f"gc {phase}"] += 1
    return row


async def _measure(rounds: int) -> dict[str, list[dict[str, float]]]:
    rt = Runtime("memory://", recover_on_start=False)
    rt.tool(effect="none")(noted)
    plan = Plan(
        nodes=[PlanNode(id=f"n{i}", tool="noted", arguments={"x": i}) for i in range(BATCH)],
        max_concurrency=BATCH,
    )
    run_id = rt.new_run()

    async def as_plan() -> None:
        result = await rt.arun_plan(plan, run_id=run_id)
        if result.status != "ok":
            raise SystemExit(f"the plan did not run: {result.status} {dict(result.failed)}")

    async def as_gather() -> None:
        await asyncio.gather(*(noted(i) for i in range(BATCH)))

    runs: dict[str, Callable[[], Awaitable[Any]]] = {"plan": as_plan, "gather": as_gather}
    for run in runs.values():  # warm-up
        for _ in range(3):
            await _one(run)
    rows: dict[str, list[dict[str, float]]] = {name: [] for name in runs}
    gc.callbacks.append(_collecting)
    try:
        for _ in range(rounds):
            for name, run in runs.items():
                rows[name].append(await _one(run))
    finally:
        gc.callbacks.remove(_collecting)
    rt.close()
    return rows


def main() -> None:
    args = arguments(__doc__, 40, "the plan then gather")
    rows = run_on(args.loop, _measure(args.rounds))
    print(f"{BATCH} calls of a {SLOW_S * 1e3:.0f} ms sleep; medians of {args.rounds} rounds, ms")
    medians = {
        name: {k: statistics.median(r[k] for r in runs) for k in PHASES} for name, runs in rows.items()
    }
    for name, phases in medians.items():
        print(f"{name:>7}: " + "  ".join(f"{k} {v * 1e3:.3f}" for k, v in phases.items()))
    print("collections a batch, by the phase they began in")
    for name, runs in rows.items():
        means = {k: statistics.fmean(r[f"gc {k}"] for r in runs) for k in PHASES[:-1]}
        print(f"{name:>7}: " + "  ".join(f"{k} {v:.2f}" for k, v in means.items()))
    print(f"total, plan / gather: {medians['plan']['total'] / medians['gather']['total']:.3f}")


if __name__ == "__main__":
    main()
