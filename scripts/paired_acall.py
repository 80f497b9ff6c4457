"""``rt.acall`` of the bench's async tool against OpenAI Agents' ``on_invoke_tool`` of the same
tool, alternated in blocks within one process: the ratio of each pair of block medians.

    python scripts/paired_acall.py                 # 60 pairs of 500-call blocks
    python scripts/paired_acall.py --blocks 200

``actionspace bench`` times each group of rows in its own fresh interpreter, and on this machine a
process runs the same calls at one speed or at about 1.5 times it, switching every few seconds
(the floors move with it): two rows timed in different processes can be a mode apart. Pairs of
blocks timed seconds apart in one process share the mode, so their ratio is the one to read.
Needs the ``bench`` extra (``openai-agents``).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from actionspace.bench._ours import _acaller, _runtime
from actionspace.bench._workload import ARGS_JSON, VARIANTS, add_async, openai_calls

Caller = Callable[[int], Awaitable[Any]]


def _peer() -> Caller:
    from agents import function_tool
    from agents.tool_context import ToolContext

    tool = function_tool(add_async)

    def invoke(i: int) -> Awaitable[Any]:
        args = ARGS_JSON[i % VARIANTS]
        ctx = ToolContext(context=None, tool_name=tool.name, tool_call_id=f"call_{i}", tool_arguments=args)
        return tool.on_invoke_tool(ctx, args)

    return invoke


async def _block(call: Caller, n: int) -> float:
    clock = time.perf_counter_ns
    samples = [0] * n
    for i in range(n):
        t0 = clock()
        await call(i)
        samples[i] = clock() - t0
    return statistics.median(samples) / 1e3


async def measure(blocks: int, size: int) -> dict[str, float]:
    """Median µs of ours and of the peer over the blocks, and the median of the pair ratios."""
    with _runtime() as rt:
        ours, peer = _acaller(rt, openai_calls("add_async")), _peer()
        for i in range(2000):
            await ours(i)
            await peer(i)
        gc.collect()
        pairs = [(await _block(ours, size), await _block(peer, size)) for _ in range(blocks)]
    ratios = [a / b for a, b in pairs]
    quartiles = statistics.quantiles(ratios, n=4)
    return {
        "ours_us": statistics.median(a for a, _ in pairs),
        "peer_us": statistics.median(b for _, b in pairs),
        "ratio": statistics.median(ratios),
        "ratio_q1": quartiles[0],
        "ratio_q3": quartiles[2],
    }


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--blocks", type=int, default=60, help="pairs of blocks (default 60)")
    parser.add_argument("--size", type=int, default=500, help="calls per block (default 500)")
    args = parser.parse_args()
    got = asyncio.run(measure(args.blocks, args.size))
    print(
        f"rt.acall {got['ours_us']:.2f} µs, OpenAI Agents {got['peer_us']:.2f} µs (medians of the blocks); "
        f"ratio {got['ratio']:.3f} (quartiles {got['ratio_q1']:.3f}–{got['ratio_q3']:.3f})"
    )


if __name__ == "__main__":
    main()
