"""``actionspace plan``: the published plan schema, and the checks ``run_plan`` runs, on a plan file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from actionspace._cli_app import CliApp
from actionspace._cli_tables import counted, one_line

if TYPE_CHECKING:
    from actionspace.runtime import Runtime

__all__ = ["plan_app"]

plan_app = CliApp(
    help="Plans: DAGs of tool calls the runtime checks and schedules by read/write sets.",
    no_args_is_help=True,
)


@plan_app.command("schema")
def schema_command() -> None:
    """Print the JSON Schema of a plan (give it to a model that should propose plans).

    Example: actionspace plan schema (redirect it to a file: > plan.schema.json)
    """
    from actionspace.plan.schema import PLAN_SCHEMA

    typer.echo(json.dumps(PLAN_SCHEMA, indent=2))


@plan_app.command("check")
def check_command(
    path: Annotated[Path, typer.Argument(help="A plan as JSON ('-' reads standard input).", allow_dash=True)],
    tools: Annotated[
        str | None,
        typer.Option(
            help="module:attribute naming your tools: a Runtime, a list of tools or @tool functions, or a "
            "function returning either. With it every check runs against your catalog.",
        ),
    ] = None,
) -> None:
    """Run the checks run_plan runs before anything executes; exit 1 with the typed error if one fails.

    The checks: the JSON form, node ids, references to existing nodes, tools and versions,
    permissions, reference types, cycles and read/write conflicts (the same function as
    ``Runtime.run_plan``). Without ``--tools`` every named tool is taken as an open, read-only
    tool, so schemas and permissions are not checked; say ``--tools`` to check them too.

    Example: actionspace plan check plan.json --tools myapp.tools:rt
    """
    from actionspace.errors import ActionError
    from actionspace.plan.run import preflight

    try:
        text = typer.get_text_stream("stdin").read() if str(path) == "-" else path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        unread = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        typer.echo(one_line(f"cannot read {path}: {unread}"), err=True)
        raise typer.Exit(1) from exc
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        unparsed = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        typer.echo(one_line(f"{path}: not JSON: {unparsed}"), err=True)
        raise typer.Exit(1) from exc
    rt = _runtime(tools) if tools else _open_runtime(data)
    with rt:
        checked = preflight(rt.engine, data, rt.run_state(), rt.principal, rt.environments)
    if isinstance(checked, ActionError):
        typer.echo(json.dumps(checked.to_dict(), indent=2))
        raise typer.Exit(1)
    scope = "" if tools else " (tools taken as open and read-only; give --tools to check them)"
    typer.echo(f"ok: {counted(len(checked.order), 'node')}, {counted(len(checked.edges), 'edge')}{scope}")


def _runtime(spec: str) -> Runtime:
    """The runtime ``--tools`` names; typer.BadParameter (one line, exit 2) when it names none."""
    from actionspace._loader import load_attribute
    from actionspace.errors import ActionspaceError
    from actionspace.runtime import TOOL_ATTRIBUTE, Runtime

    try:
        found: Any = load_attribute(spec, option="--tools")
        if callable(found) and not isinstance(found, Runtime) and not hasattr(found, TOOL_ATTRIBUTE):
            found = found()
        if isinstance(found, Runtime):
            return found
        items = found if isinstance(found, list | tuple) else [found]
        return Runtime("memory://", tools=items, recover_on_start=False)
    except ActionspaceError as exc:  # not loadable, or not tools (ConfigurationError, ToolDefinitionError)
        raise typer.BadParameter(str(exc), param_hint="--tools") from exc
    except Exception as exc:  # the factory's own failure
        raise typer.BadParameter(
            f"{spec}() raised {type(exc).__name__}: {exc}", param_hint="--tools"
        ) from exc


def _open_runtime(data: Any) -> Runtime:
    """A runtime where every tool the plan names exists, open and read-only (structure checks only)."""
    from actionspace.catalog.spec import ToolSpec
    from actionspace.runtime import Runtime

    rt = Runtime("memory://", recover_on_start=False)
    nodes = data.get("nodes") if isinstance(data, dict) else None
    names = {n.get("tool") for n in nodes if isinstance(n, dict)} if isinstance(nodes, list) else set()
    for name in sorted(n for n in names if isinstance(n, str) and n):
        base = name.partition("@")[0]
        if rt.catalog.current(base) is None:
            rt.register(ToolSpec(name=base, input_schema={"type": "object"}, effect="read", fn=_nothing))
    return rt


def _nothing(**_: Any) -> None:
    return None
