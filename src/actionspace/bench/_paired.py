"""Our ``rt.acall`` and the fastest peer's call of the same async tool, alternated in one process.

Every other row is timed in its own group's fresh interpreter (:mod:`actionspace.bench._passes`),
and on a shared machine a process runs the same calls at one speed or at about 1.5 times it,
switching every few seconds: two rows timed in different processes can be a mode apart, and their
ratio moves with it (0.57 to 1.35 on the same code). Here blocks of calls of each alternate within
one process, seconds apart, so each pair shares the machine's state; the ratio of the pair's
medians is what the async-tool target reads (``paired.acall`` in a pass's ``extra``).

The peer is OpenAI Agents' ``FunctionTool.on_invoke_tool`` (the fastest peer on this row in every
run so far), driven as its own row drives it: a ``ToolContext`` made per call, the model's JSON
argument string parsed and validated by the SDK.
"""

from __future__ import annotations

import asyncio
import gc
import statistics
from collections.abc import Awaitable, Callable
from typing import Any

from actionspace.bench._timing import Pass, timed_async
from actionspace.bench._workload import ARGS_JSON, VARIANTS, add_async, openai_calls

__all__ = ["PAIRED_PEER", "PAIRED_ROW", "measure_pairs", "run_paired"]

PAIRED_ROW = "paired.acall"
"""The ``extra`` entry a pass records: ours and the peer's block medians and their ratio."""

PAIRED_PEER = "openai_agents.on_invoke_tool.async_tool"
"""The peer row whose calls alternate with ours."""

BLOCKS = 40
"""Pairs of blocks at scale 1."""

BLOCK_SIZE = 500
"""Calls per block."""

WARM_UP = 2000
"""Calls of each before the first block (imports, caches, the run's state)."""

Caller = Callable[[int], Awaitable[Any]]


def peer_caller() -> Caller:
    """OpenAI Agents' ``on_invoke_tool`` of the bench's async tool (ImportError without the SDK)."""
    from agents import function_tool
    from agents.tool_context import ToolContext

    tool = function_tool(add_async)

    def invoke(i: int) -> Awaitable[Any]:
        args = ARGS_JSON[i % VARIANTS]
        ctx = ToolContext(context=None, tool_name=tool.name, tool_call_id=f"call_{i}", tool_arguments=args)
        return tool.on_invoke_tool(ctx, args)

    return invoke


async def _block(call: Caller, n: int) -> float:
    return statistics.median(await timed_async(call, n)) / 1e3


async def measure_pairs(ours: Caller, peer: Caller, blocks: int, size: int = BLOCK_SIZE) -> dict[str, Any]:
    """Median µs of ``ours`` and of ``peer`` over ``blocks`` alternated pairs of ``size`` calls,
    the median of the pairs' ratios (ours ÷ peer) and its quartiles."""
    for i in range(WARM_UP):
        await ours(i)
        await peer(i)
    gc.collect()
    pairs = [(await _block(ours, size), await _block(peer, size)) for _ in range(blocks)]
    ratios = sorted(a / b for a, b in pairs)
    quartiles = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    return {
        "ours_us": statistics.median(a for a, _ in pairs),
        "peer_us": statistics.median(b for _, b in pairs),
        "ratio": statistics.median(ratios),
        "ratio_q1": quartiles[0],
        "ratio_q3": quartiles[2],
        "blocks": blocks,
        "block_size": size,
        "peer": PAIRED_PEER,
    }


def run_paired(p: Pass) -> None:
    """Record :data:`PAIRED_ROW` in ``p`` (skipped without the OpenAI Agents SDK)."""
    if not p.want(PAIRED_ROW):
        return
    try:
        peer = peer_caller()
    except ImportError as exc:
        p.skip(PAIRED_ROW, f"{exc}; pip install 'actionspace[bench]'")
        return
    from actionspace.bench._ours import _acaller, _runtime

    blocks = max(4, int(BLOCKS * min(1.0, p.scale)))
    try:
        with _runtime() as rt:
            row = asyncio.run(measure_pairs(_acaller(rt, openai_calls("add_async")), peer, blocks))
    except Exception as exc:
        p.fail(PAIRED_ROW, exc)
        return
    figure = (
        f"rt.acall {row['ours_us']:.2f} µs, OpenAI Agents {row['peer_us']:.2f} µs, alternated: "
        f"ratio {row['ratio']:.3f} (quartiles {row['ratio_q1']:.3f}–{row['ratio_q3']:.3f})"
    )
    p.record(PAIRED_ROW, row, figure)
