"""``actionspace eval bfcl-multiturn``: BFCL's multi-turn ground truth replayed through plans."""

from __future__ import annotations

import json
from typing import Annotated

import typer

__all__ = ["eval_bfcl_multiturn"]


def eval_bfcl_multiturn(
    json_out: Annotated[bool, typer.Option("--json", help="Print the figures as JSON.")] = False,
    limit: Annotated[
        int | None, typer.Option(min=1, help="Only the first N entries of each category.")
    ] = None,
    category: Annotated[
        list[str] | None,
        typer.Option(help="Only these categories (repeatable), e.g. multi_turn_base."),
    ] = None,
    max_concurrency: Annotated[int, typer.Option(min=1, help="Most plan nodes running at once.")] = 16,
) -> None:
    """Replay BFCL's multi-turn ground truth (bfcl-eval 2026.3.23, Apache-2.0) through actionspace plans.

    Each turn's calls become one plan over BFCL's own backends (read/write sets order the
    conflicting calls); BFCL's state check compares every turn with BFCL's direct execution, then
    every write is re-sent and must replay from the ledger. Exits 1 unless every entry passes.
    """
    from rich.progress import Progress

    from actionspace.evaluation.bfcl_multiturn import (
        MULTI_TURN_CATEGORIES,
        format_multiturn_report,
        load_multiturn,
        run_multiturn,
    )

    categories = category or list(MULTI_TURN_CATEGORIES)
    unknown = sorted(set(categories) - set(MULTI_TURN_CATEGORIES))
    if unknown:
        raise typer.BadParameter(f"unknown categories {unknown}; known: {', '.join(MULTI_TURN_CATEGORIES)}")
    total = len(load_multiturn(categories))
    if limit is not None:
        total = min(total, limit * len(categories))
    with Progress(transient=True, disable=json_out) as bar:
        task = bar.add_task("BFCL multi-turn", total=total)
        report = run_multiturn(
            categories=categories,
            limit=limit,
            max_concurrency=max_concurrency,
            progress=lambda _: bar.advance(task),
        ).to_dict()
    typer.echo(json.dumps(report, indent=2, default=str) if json_out else format_multiturn_report(report))
    if report["passed"] != report["entries"]:
        raise typer.Exit(1)
