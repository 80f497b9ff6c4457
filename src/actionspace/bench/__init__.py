"""``actionspace bench``: the per-call overhead of actionspace beside physical floors and peer frameworks.

Every path calls the same trivial tool ``add(a: int, b: int) -> int`` (and its async twin) with the
same arguments; each call is timed on its own with ``time.perf_counter_ns`` after a warm-up and a
``gc.collect()``. Each group of paths (floors, actionspace, each peer) runs in a fresh interpreter per
pass; figures are the median of the pass medians. Peers come from the ``bench`` extra
(``pip install 'actionspace[bench]'``); a missing one is reported as skipped.

    result = run_bench(passes=3, scale=1.0, only=())
    Console().print(render(result))
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from actionspace.bench._passes import aggregate, run_passes
from actionspace.bench._render import render
from actionspace.bench._report import annotate, machine, versions
from actionspace.bench._workload import BATCH, SLOW_S
from actionspace.execution.loop import LOOPS

__all__ = ["SCHEMA", "SECTIONS", "render", "run_bench"]

SCHEMA = "actionspace.bench/1"
"""The ``schema`` field of the result: bumped when a field changes meaning."""

SECTIONS: dict[str, tuple[str, ...]] = {"parallel": ("batch.", "dag."), "trim": ("trim.",)}
"""``only`` names that stand for a section's row prefixes: ``parallel`` (every parallel batch, the
100-node plan and the random DAG) and ``trim`` (the 1 GiB log through ``log-v1``)."""


def run_bench(
    passes: int = 3,
    scale: float = 1.0,
    only: Sequence[str] = (),
    *,
    progress: Callable[[str], None] | None = None,
    loop: str = "once",
) -> dict[str, Any]:
    """Run the bench and return its JSON-safe result.

    ``passes``: fresh-process rounds (figures are the median of the pass medians). ``scale``:
    multiplies call counts (at least 200 timed calls per row; ``0.05`` is a quick look). ``only``:
    keep the paths whose name starts with one of these prefixes (``batch.`` is ignored when
    matching, so ``actionspace`` selects our batch row too; a name in ``SECTIONS`` stands for its
    prefixes). The trimming row's log is ``scale`` GiB, at least 64 MiB. ``progress`` receives one line per
    measured row. Raises ValueError on a non-positive ``passes`` or ``scale``; a peer that is
    missing or fails is reported in ``skipped`` / ``errors``, never raised. ``loop``: the event loop
    every row runs on, ours and the peers' alike: ``"once"`` (the default;
    :func:`actionspace.execution.loop.new_event_loop`, whose timed waits are rounded up to the
    millisecond once) or ``"stdlib"`` (asyncio's own, whose epoll selector rounds some waits up
    twice, one millisecond more). Raises ValueError for another name.
    """
    if loop not in LOOPS:
        raise ValueError(f"loop must be one of {LOOPS}, got {loop!r}")
    if passes < 1:
        raise ValueError(f"passes must be at least 1, got {passes}")
    if not scale > 0:
        raise ValueError(f"scale must be positive, got {scale}")
    before = machine()
    started = time.perf_counter()
    prefixes = [q for o in only for q in SECTIONS.get(o, (o,))]
    raw, processes = run_passes(passes, scale, prefixes, progress, loop)
    agg = annotate(aggregate(raw))
    after = machine()
    host = {k: v for k, v in before.items() if k != "loadavg"}
    return {
        "schema": SCHEMA,
        "config": {
            "passes": passes,
            "scale": scale,
            "only": list(only),
            "loop": loop,
            "batch": BATCH,
            "slow_ms": SLOW_S * 1e3,
        },
        "machine": {**host, "loadavg_before": before["loadavg"], "loadavg_after": after["loadavg"]},
        "versions": versions(),
        "processes": processes,
        "elapsed_s": round(time.perf_counter() - started, 2),
        **agg,
    }
