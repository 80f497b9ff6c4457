"""Where the 100-node plan's time goes against ``asyncio.gather`` of the same calls.

    python scripts/plan_timeline.py               # 40 rounds, each the plan then gather
    python scripts/plan_timeline.py --rounds 80
    git archive HEAD src | tar -x -C /tmp/old && python scripts/plan_timeline.py --old /tmp/old/src

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

With ``--old SRC`` (the ``src`` folder of other code, e.g. from ``git archive``; ``--new SRC``:
this checkout's by default) the same rounds run on a runtime of each code in one process,
alternating in blocks of ``--block`` rounds (the order flipped each pair): each code's modules are
imported under their own names once, and ``sys.modules`` holds the code whose block runs (for
imports made inside functions). The code imported first in a process runs a little slower there
(two copies of one tree: 1.116 against 1.092), so ``--processes`` processes (2 by default) import
each code first in turn, and their blocks are pooled. Printed: per process the two codes' median
block ratios, per code the medians of its phases, then every block's ratio of the plan's median
total to ``gather``'s beside it, their median, and in how many pairs of blocks ``new`` was lower.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import subprocess
import sys
import time
import types
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from _rounds import run_on  # scripts/_rounds.py

from actionspace.bench._workload import BATCH, SLOW_S
from actionspace.execution.loop import LOOPS
from actionspace.plan import Plan, PlanNode
from actionspace.runtime import Runtime

BEGAN: list[float] = []
ENDED: list[float] = []
COLLECTED: list[float] = []
"""When each of the cyclic collector's collections began, during the current batch."""
SRC = str(Path(__file__).resolve().parent.parent / "src")
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


Code = dict[str, types.ModuleType]
"""One code's ``actionspace`` modules, by name."""


def _ours() -> Code:
    return {k: m for k, m in sys.modules.items() if k == "actionspace" or k.startswith("actionspace.")}


def _other(src: str) -> Code:
    """The modules of the code under ``src``, imported under their own names beside this code's
    (which ``sys.modules`` holds again afterwards)."""
    mine = _ours()
    for k in mine:
        del sys.modules[k]
    sys.path.insert(0, src)
    try:
        __import__("actionspace.runtime")
        __import__("actionspace.plan")
        other = _ours()
    finally:
        sys.path.remove(src)
        for k in other if "other" in locals() else _ours():
            sys.modules.pop(k, None)
        sys.modules.update(mine)
    if not other["actionspace"].__file__ or not other["actionspace"].__file__.startswith(src):
        raise SystemExit(f"{src} holds no actionspace package")
    return other


def _use(code: Code) -> None:
    for k in _ours():
        if k not in code:
            del sys.modules[k]
    sys.modules.update(code)


def _runs(
    runtime: type[Any], plan_of: Callable[[], Any]
) -> tuple[Any, dict[str, Callable[[], Awaitable[Any]]]]:
    """A runtime of the code whose ``Runtime`` is ``runtime``, and its batch as a plan and as gather."""
    rt = runtime("memory://", recover_on_start=False)
    rt.tool(effect="none")(noted)
    plan = plan_of()
    run_id = rt.new_run()

    async def as_plan() -> None:
        result = await rt.arun_plan(plan, run_id=run_id)
        if result.status != "ok":
            raise SystemExit(f"the plan did not run: {result.status} {dict(result.failed)}")

    async def as_gather() -> None:
        await asyncio.gather(*(noted(i) for i in range(BATCH)))

    return rt, {"plan": as_plan, "gather": as_gather}


def _plan_of(plan: type[Any], node: type[Any]) -> Callable[[], Any]:
    return lambda: plan(
        nodes=[node(id=f"n{i}", tool="noted", arguments={"x": i}) for i in range(BATCH)],
        max_concurrency=BATCH,
    )


async def _rounds(
    runs: dict[str, Callable[[], Awaitable[Any]]], rounds: int
) -> dict[str, list[dict[str, float]]]:
    rows: dict[str, list[dict[str, float]]] = {name: [] for name in runs}
    gc.callbacks.append(_collecting)
    try:
        for _ in range(rounds):
            for name, run in runs.items():
                rows[name].append(await _one(run))
    finally:
        gc.callbacks.remove(_collecting)
    return rows


async def _warm(runs: dict[str, Callable[[], Awaitable[Any]]]) -> None:
    for run in runs.values():
        for _ in range(3):
            await _one(run)


async def _measure(rounds: int) -> dict[str, list[dict[str, float]]]:
    rt, runs = _runs(Runtime, _plan_of(Plan, PlanNode))
    await _warm(runs)
    rows = await _rounds(runs, rounds)
    rt.close()
    return rows


async def _measure_ab(
    old: str, here: str, rounds: int, block: int, first: str
) -> dict[str, dict[str, list[dict[str, float]]]]:
    """Rounds of the code under ``here`` (``new``) and under ``old``, in blocks of ``block`` rounds
    alternating; per code, each block's rounds (``blocks``: per batch kind, its rows)."""
    mine = _ours()
    # each code imported the same way, in the order asked (the first imported runs a little slower)
    loaded = {
        name: _other(here if name == "new" else old) for name in (first, "old" if first == "new" else "new")
    }
    codes = {"new": loaded["new"], "old": loaded["old"]}
    made: dict[str, tuple[Any, dict[str, Callable[[], Awaitable[Any]]]]] = {}
    for name, code in codes.items():
        _use(code)
        plan_module = code["actionspace.plan"]
        made[name] = _runs(
            code["actionspace.runtime"].Runtime, _plan_of(plan_module.Plan, plan_module.PlanNode)
        )
        await _warm(made[name][1])
    _use(mine)
    out: dict[str, dict[str, list[Any]]] = {name: {"blocks": []} for name in codes}
    try:
        for i in range(max(1, rounds // block)):
            for name in ("old", "new") if i % 2 == 0 else ("new", "old"):
                _use(codes[name])
                try:
                    out[name]["blocks"].append(await _rounds(made[name][1], block))
                finally:
                    _use(mine)
    finally:
        for name, (rt, _) in made.items():
            _use(codes[name])
            rt.close()
        _use(mine)
    return out  # type: ignore[return-value]


def _print(rows: dict[str, list[dict[str, float]]], indent: str = "") -> dict[str, dict[str, float]]:
    medians = {
        name: {k: statistics.median(r[k] for r in runs) for k in PHASES} for name, runs in rows.items()
    }
    for name, phases in medians.items():
        print(f"{indent}{name:>7}: " + "  ".join(f"{k} {v * 1e3:.3f}" for k, v in phases.items()))
    return medians


def _block_ratios(found: dict[str, list[Any]]) -> list[float]:
    blocks: list[dict[str, list[dict[str, float]]]] = found["blocks"]
    return [
        statistics.median(r["total"] for r in b["plan"]) / statistics.median(r["total"] for r in b["gather"])
        for b in blocks
    ]


def _one_process(old: str, here: str, rounds: int, block: int, loop: str, first: str) -> None:
    """One process's blocks, as one JSON line: per code its blocks' ratios and its phases' medians."""
    out = run_on(loop, _measure_ab(old, here, rounds, block, first))
    shown: dict[str, Any] = {}
    for name, found in out.items():
        blocks: list[dict[str, list[dict[str, float]]]] = found["blocks"]  # type: ignore[assignment]
        merged = {k: [r for b in blocks for r in b[k]] for k in ("plan", "gather")}
        phases = {n: {k: statistics.median(r[k] for r in rs) for k in PHASES} for n, rs in merged.items()}
        shown[name] = {"ratios": _block_ratios(found), "phases": phases}
    print(json.dumps(shown))


def _main_ab(args: argparse.Namespace) -> None:
    """``--processes`` processes (half importing this code first, half the other), their blocks
    pooled: the code imported first in a process runs a little slower there, whichever it is."""
    ratios: dict[str, list[float]] = {"new": [], "old": []}
    phases: dict[str, list[dict[str, dict[str, float]]]] = {"new": [], "old": []}
    for i in range(args.processes):
        first = "old" if i % 2 == 0 else "new"
        command = [
            sys.executable,
            __file__,
            "--old",
            args.old,
            "--new",
            args.new,
            "--rounds",
            str(args.rounds),
        ]
        command += ["--block", str(args.block), "--loop", args.loop, "--first", first]
        found = json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)
        for name in ratios:
            ratios[name] += found[name]["ratios"]
            phases[name].append(found[name]["phases"])
        print(f"process {i + 1} ({first} imported first):", end=" ")
        print(" ".join(f"{n} {statistics.median(found[n]['ratios']):.3f}" for n in ("old", "new")))
    for name in ("old", "new"):
        print(f"{name} code, medians of the processes' phase medians, ms")
        for which in ("plan", "gather"):
            row = {k: statistics.median(p[which][k] for p in phases[name]) for k in PHASES}
            print(f"  {which:>7}: " + "  ".join(f"{k} {v * 1e3:.3f}" for k, v in row.items()))
    for name in ("old", "new"):
        shown = " ".join(f"{r:.3f}" for r in ratios[name])
        print(f"{name}: plan / gather by block {shown}; median {statistics.median(ratios[name]):.3f}")
    lower = sum(n < o for n, o in zip(ratios["new"], ratios["old"], strict=True))
    print(f"this code's ratio lower in {lower} of {len(ratios['new'])} pairs of blocks")


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=40, help="rounds, each the plan then gather")
    parser.add_argument(
        "--loop", choices=LOOPS, default="once", help="the event loop (as actionspace bench --loop)"
    )
    parser.add_argument("--old", help="the src folder of other code, alternated with this code in blocks")
    parser.add_argument("--block", type=int, default=10, help="rounds a block with --old (default 10)")
    parser.add_argument("--new", default=SRC, help="the src folder of this code (default: this checkout's)")
    parser.add_argument("--processes", type=int, default=2, help="processes with --old (default 2)")
    parser.add_argument("--first", choices=("old", "new"), help=argparse.SUPPRESS)
    return parser.parse_args()


def main() -> None:
    args = _arguments()
    if args.old:
        if args.first:
            _one_process(args.old, args.new, args.rounds, args.block, args.loop, args.first)
        else:
            _main_ab(args)
        return
    rows = run_on(args.loop, _measure(args.rounds))
    print(f"{BATCH} calls of a {SLOW_S * 1e3:.0f} ms sleep; medians of {args.rounds} rounds, ms")
    medians = _print(rows)
    print("collections a batch, by the phase they began in")
    for name, runs in rows.items():
        means = {k: statistics.fmean(r[f"gc {k}"] for r in runs) for k in PHASES[:-1]}
        print(f"{name:>7}: " + "  ".join(f"{k} {v:.2f}" for k, v in means.items()))
    print(f"total, plan / gather: {medians['plan']['total'] / medians['gather']['total']:.3f}")


if __name__ == "__main__":
    main()
