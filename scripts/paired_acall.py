"""``rt.acall`` of the bench's async tool against OpenAI Agents' ``on_invoke_tool`` of the same
tool, alternated in blocks within one process: the ratio of each pair of block medians.

    python scripts/paired_acall.py                 # 60 pairs of 500-call blocks
    python scripts/paired_acall.py --blocks 200
    python scripts/paired_acall.py --floor         # the bare work of the call instead of rt.acall

The same measurement as ``actionspace bench``'s ``paired`` group
(:mod:`actionspace.bench._paired`, whose ratio the async-tool target reads), with its size chosen
here. Needs the ``bench`` extra (``openai-agents``).
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from actionspace.bench._ours import _acaller, _runtime
from actionspace.bench._paired import measure_pairs, peer_caller
from actionspace.bench._workload import add_async, openai_calls


def bare_caller() -> Callable[[int], Awaitable[Any]]:
    """The least any runtime does for the same call, written out: the entry and its arguments
    parsed (``pydantic_core.from_json``), the compiled schema check (``jsonschema_rs``), the tool's
    coroutine run to its end, one tuple appended to a log and a dict returned. No authorization,
    flow state, trace events, ledger or typed observation."""
    import time

    import jsonschema_rs
    from pydantic_core import from_json

    calls = openai_calls("add_async")
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    }
    check = jsonschema_rs.validator_for(schema).is_valid
    log: list[tuple[Any, ...]] = []

    async def bare(i: int) -> Any:
        entry = from_json(calls[i % len(calls)])
        function = entry["function"]
        args = from_json(function["arguments"])
        if not check(args):
            raise ValueError(args)
        coro = add_async(**args)
        try:
            coro.send(None)
        except StopIteration as stop:
            result = stop.value
        else:  # pragma: no cover - add_async never waits
            raise AssertionError("add_async waited")
        log.append((entry["id"], function["name"], result, time.time()))
        if len(log) > 1000:
            log.clear()
        return {"status": "ok", "data": result, "call_id": entry["id"]}

    return bare


async def measure(blocks: int, size: int, *, floor: bool = False) -> dict[str, Any]:
    """Median µs of ours (or, with ``floor``, of :func:`bare_caller`) and of the peer over the
    blocks, and the median of the pair ratios."""
    if floor:
        return await measure_pairs(bare_caller(), peer_caller(), blocks, size)
    with _runtime() as rt:
        return await measure_pairs(_acaller(rt, openai_calls("add_async")), peer_caller(), blocks, size)


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--blocks", type=int, default=60, help="pairs of blocks (default 60)")
    parser.add_argument("--size", type=int, default=500, help="calls per block (default 500)")
    parser.add_argument(
        "--floor",
        action="store_true",
        help="time the bare work of the call (parse, schema check, the tool, a log line) instead of rt.acall",
    )
    args = parser.parse_args()
    got = asyncio.run(measure(args.blocks, args.size, floor=args.floor))
    ours = "the bare work" if args.floor else "rt.acall"
    print(
        f"{ours} {got['ours_us']:.2f} µs, OpenAI Agents {got['peer_us']:.2f} µs (medians of the blocks); "
        f"ratio {got['ratio']:.3f} (quartiles {got['ratio_q1']:.3f}–{got['ratio_q3']:.3f})"
    )


if __name__ == "__main__":
    main()
