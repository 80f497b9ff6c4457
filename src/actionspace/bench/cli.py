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
            "--only direct --only mcp. Batch rows match without their 'batch.' prefix.",
            metavar="PREFIX",
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Do not print progress on stderr.")] = False,
) -> None:
    """Per-call overhead of actionspace beside physical floors and peer frameworks, in one run.

    Every path calls add(a: int, b: int) -> int, with a sync and an async variant.

    Floors: the direct call, pydantic validation, json.loads of the OpenAI call string.

    actionspace: the full in-memory pipeline, rt.call / rt.acall on an OpenAI-format call string.

    Peers (the bench extra; a missing one is skipped): MCP SDK, Pydantic AI, LangGraph, OpenAI Agents.

    Also a parallel batch: 100 calls that each sleep 10 ms, issued at once.

    Prints median and p99 in µs, ratios, and PASS/FAIL of: our median ≤ 0.5 × the fastest peer's.
    """
    from actionspace.bench import render, run_bench

    err = Console(stderr=True)

    def progress(line: str) -> None:
        if not quiet:
            err.print(line, style="dim", markup=False, highlight=False)

    result = run_bench(passes=passes, scale=scale, only=only or [], progress=progress)
    if json_out:
        typer.echo(json.dumps(result, indent=1))
    else:
        # A pipe or a file gets wide lines: the path names are long and wrapping them hurts.
        Console(width=None if sys.stdout.isatty() else 150).print(render(result))


def main() -> None:
    """Run ``bench_command`` as a stand-alone program (``python -m actionspace.bench``)."""
    typer.run(bench_command)
