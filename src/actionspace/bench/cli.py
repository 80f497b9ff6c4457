"""The ``actionspace bench`` command: mounted by :mod:`actionspace.cli` as ``bench_command``."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer
from rich.console import Console

__all__ = ["bench_command", "main"]


def bench_command(
    json_out: Annotated[
        bool,
        typer.Option("--json", help="Print the result as JSON on stdout (progress still goes to stderr)."),
    ] = False,
    passes: Annotated[
        int,
        typer.Option(
            "--passes", min=1, help="Fresh-process rounds; each figure is the median of the pass medians."
        ),
    ] = 3,
    scale: Annotated[
        float,
        typer.Option(
            "--scale",
            min=0.001,
            help="Multiply the call counts (at least 200 timed calls per path); 0.05 is a quick look.",
        ),
    ] = 1.0,
    only: Annotated[
        list[str] | None,
        typer.Option(
            "--only",
            help="Run only the paths whose name starts with PREFIX (repeatable), e.g. --only actionspace "
            "--only direct --only mcp. Batch rows match without their 'batch.' prefix. 'parallel' "
            "selects the parallel batches, the 100-node plan and the DAG; 'trim' the log trimming; "
            "'discovery' the candidate selection over a 10,000-tool catalog; 'paired' rt.acall and "
            "OpenAI Agents' call alternated in one process (the async-tool target's ratio); 'dbos' the "
            "durable plan backend against the in-process scheduler (needs the PostgreSQL server binaries).",
            metavar="PREFIX",
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Do not print progress on stderr.")] = False,
    loop: Annotated[
        str,
        typer.Option(
            "--loop",
            help="The event loop every row runs on, ours and the peers' alike: 'once' (timed waits "
            "rounded up to the millisecond once; actionspace.execution.loop) or 'stdlib' (asyncio's "
            "own epoll selector, which rounds some waits up twice: one millisecond more).",
        ),
    ] = "once",
    quick: Annotated[
        bool,
        typer.Option("--quick", help="A quick look: one pass at scale 0.05 (a 64 MiB log); overrides both."),
    ] = False,
) -> None:
    """Per-call overhead of actionspace beside physical floors and peer frameworks, in one run.

    Every path calls add(a: int, b: int) -> int, with a sync and an async variant.

    Floors: the direct call, pydantic validation, json.loads of the OpenAI call string.

    actionspace: the full in-memory pipeline, rt.call / rt.acall on an OpenAI-format call string.

    Peers (the bench extra; a missing one is skipped): MCP SDK, Pydantic AI, LangGraph, OpenAI Agents.

    Also a parallel batch: 100 calls that each sleep 10 ms, issued at once.

    Parallel section: the same 100 calls as one Plan (memory and SQLite stores) against the 10 ms
    ideal, asyncio.gather and each peer; a seeded 1,000-node random DAG against its critical path;
    a generated log of --scale GiB (at least 64 MiB) trimmed by log-v1: MiB/s and RSS growth.

    Discovery section: candidate selection (filters, BM25 ranking, permission, rank cut) over a
    generated 10,000-tool catalog: p50/p95/p99 in ms against the target p95 ≤ 5 ms.

    Prints median and p99 in µs, ratios, and PASS/FAIL of: our median ≤ 0.5 × the fastest peer's.
    """
    from actionspace.bench import render, run_bench
    from actionspace.execution.loop import LOOPS

    err = Console(stderr=True)

    def progress(line: str) -> None:
        if not quiet:
            err.print(line, style="dim", markup=False, highlight=False)

    if quick:
        passes, scale = 1, 0.05
    if only and "dbos" in only:  # the durable backend vs the in-process scheduler: its own section
        from actionspace.bench._dbos import render_dbos, run_dbos_bench

        figures = run_dbos_bench(progress=progress)
        typer.echo(json.dumps(figures, indent=1) if json_out else render_dbos(figures))
        only = [o for o in only if o != "dbos"]
        if not only:
            return
    if loop not in LOOPS:
        raise typer.BadParameter(f"--loop must be one of {', '.join(LOOPS)}, got {loop!r}")
    result = run_bench(passes=passes, scale=scale, only=only or [], progress=progress, loop=loop)
    if json_out:
        typer.echo(json.dumps(result, indent=1))
    else:
        # A pipe or a file gets wide lines: the path names are long and wrapping them hurts.
        Console(width=None if sys.stdout.isatty() else 150).print(render(result))


def main() -> None:
    """Run ``bench_command`` as a stand-alone program (``python -m actionspace.bench``)."""
    typer.run(bench_command)
