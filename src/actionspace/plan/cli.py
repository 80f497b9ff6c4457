"""``actionspace plan``: the published plan schema, and a structural check of a plan file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from actionspace.plan.model import InvalidPlan, Plan
from actionspace.plan.schema import PLAN_SCHEMA

__all__ = ["plan_app"]

plan_app = typer.Typer(
    help="Plans: DAGs of tool calls the runtime checks and schedules by read/write sets.",
    no_args_is_help=True,
)


@plan_app.command("schema")
def schema_command() -> None:
    """Print the JSON Schema of a plan (give it to a model that should propose plans)."""
    typer.echo(json.dumps(PLAN_SCHEMA, indent=2))


@plan_app.command("check")
def check_command(
    path: Annotated[Path, typer.Argument(help="A plan as JSON ('-' reads standard input).", allow_dash=True)],
) -> None:
    """Check a plan file's structure (ids, fields, reference syntax); exit 1 with the typed error if bad.

    Tools, permissions, cycles and conflicts are checked when a runtime runs the plan, since they need
    the catalog.
    """
    text = typer.get_text_stream("stdin").read() if str(path) == "-" else path.read_text()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        typer.echo(f"not JSON: {exc}", err=True)
        raise typer.Exit(1) from exc
    try:
        plan = Plan.from_dict(data)
    except InvalidPlan as exc:
        typer.echo(json.dumps(exc.error.to_dict(), indent=2))
        raise typer.Exit(1) from exc
    typer.echo(f"ok: {len(plan.nodes)} nodes")
