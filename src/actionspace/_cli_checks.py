"""The commands that check the guarantees under load and faults: store throughput, timeouts, crashes."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

__all__ = ["bench_stores", "sweep_command", "timeouts_command"]


def bench_stores(
    calls: Annotated[int, typer.Option(min=1, help="Write calls per process.")] = 300,
    processes: Annotated[
        list[int] | None, typer.Option(min=1, help="Process counts (repeatable; default 1 2 4).")
    ] = None,
    store: Annotated[list[str] | None, typer.Option(help="sqlite and/or postgres (default both).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Durable write calls per second on the shared stores from 1, 2 and 4 processes.

    PostgreSQL runs on a throwaway cluster started from the installed server binaries.

    Example: actionspace bench-stores --store sqlite --processes 1 --processes 4 --calls 100
    """
    from actionspace._cli_tables import on_interrupt
    from actionspace.bench.stores import store_throughput

    _choices("--store", store, ("sqlite", "postgres"))
    on_interrupt("nothing was kept (the stores are made in a temporary folder, removed)")

    result = store_throughput(
        processes=processes or [1, 2, 4], calls=calls, stores=store or ["sqlite", "postgres"]
    )
    if json_out:
        typer.echo(json.dumps(result, indent=2))
        return
    grid = Table(title=f"durable write calls/s ({calls} per process)")
    for col in ("store", "processes", "calls", "failed", "wall s", "calls/s"):
        grid.add_column(col, justify="right")
    for name, rows in result.items():
        for row in rows:
            grid.add_row(
                name,
                str(row["processes"]),
                str(row["calls"]),
                str(row["failed"]),
                str(row["wall_s"]),
                str(row["calls_per_s"]),
            )
    Console().print(grid)


def timeouts_command(
    trials: Annotated[int, typer.Option(min=1, help="Trials per tool kind.")] = 10_000,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """ExecuteAndTimeout: the tool commits, then the call times out; how every trial ended, per kind.

    Exits 1 on any duplicate, lost effect or blind resend.

    Example: actionspace timeouts --trials 1000 --json
    """
    from actionspace._cli_tables import on_interrupt
    from actionspace.evaluation.timeouts import execute_and_timeout

    on_interrupt("nothing was written (the trials run on stores in memory)")

    results = [execute_and_timeout(trials, kind) for kind in ("native", "query", "none")]
    if json_out:
        typer.echo(json.dumps(results, indent=2))
    else:
        for r in results:
            typer.echo(
                f"{r['kind']:>6}: {r['trials']} trials -> {r['outcomes']}; duplicates {r['duplicates']}, "
                f"lost {r['lost']}, blind resends {r['blind_resends']}"
            )
    if any(r["duplicates"] or r["lost"] or r["blind_resends"] for r in results):
        raise typer.Exit(1)


def sweep_command(
    seeds: Annotated[
        int, typer.Option(min=1, help="Seeds per (crash point, tool kind); each draws where to crash.")
    ] = 20,
    point: Annotated[list[str] | None, typer.Option(help="Only these crash points (repeatable).")] = None,
    kind: Annotated[list[str] | None, typer.Option(help="Only these kinds: native, query, none.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the table as JSON.")] = False,
) -> None:
    """Crash sweep: SIGKILL at every ledger boundary, restart, recover(), finish the workload.

    Counts at the tool's own store: duplicate effects, lost committed effects, and ambiguities of
    tools without a status query reported as unknown_commit. Exits 1 if any case went wrong.

    Example: actionspace sweep --seeds 5 --point after_dispatch_durable --kind none
    """
    from rich.progress import Progress

    from actionspace import _crash
    from actionspace._cli_tables import on_interrupt
    from actionspace.evaluation.sweep import KINDS, sweep, table

    _choices("--point", point, _crash.POINTS)
    _choices("--kind", kind, KINDS)
    on_interrupt("nothing was kept (every case runs in a temporary folder, removed)")
    points = point or list(_crash.POINTS)
    kinds = kind or list(KINDS)
    total = len(points) * len(kinds) * seeds
    # Redrawn by the sweep's own thread after each case: a refreshing thread would be running
    # while every case forks its workload, and a lock it held then stays held in the child.
    with Progress(transient=True, disable=json_out, auto_refresh=False) as bar:
        task = bar.add_task("crash sweep", total=total)

        def advance(_: object) -> None:
            bar.update(task, advance=1, refresh=True)

        results = sweep(seeds=seeds, points=points, kinds=kinds, progress=advance)
    rows = table(results)
    if json_out:
        typer.echo(json.dumps(rows, indent=2))
    else:
        Console().print(_sweep_table(rows, f"crash sweep: {total} cases ({seeds} seeds per point and kind)"))
    bad = [r for r in results if not r.ok]
    for r in bad[:20]:
        typer.echo(f"FAILED {r.point}/{r.kind}/seed {r.seed}: {r}", err=True)
    if bad:
        raise typer.Exit(1)


def _sweep_table(rows: list[dict[str, object]], title: str) -> Table:
    """The sweep's rows whole at 80 columns: names never cut, one space between columns, the one
    long header on two lines."""
    from rich import box

    grid = Table(title=title, box=box.SIMPLE_HEAD, show_edge=False, padding=0)
    for column in _SWEEP_COLUMNS:
        header = column.replace("_", "\n")
        width = max([len(line) for line in header.splitlines()] + [len(str(row[column])) for row in rows])
        grid.add_column(header, justify="left" if column in ("point", "kind") else "right", min_width=width)
    for row in rows:
        grid.add_row(*(str(row[c]) for c in _SWEEP_COLUMNS))
    return grid


_SWEEP_COLUMNS = ("point", "kind", "cases", "crashed", "duplicates", "lost", "unknown_commit", "incomplete")


def _choices(option: str, given: list[str] | None, allowed: tuple[str, ...]) -> None:
    """A usage error (exit 2) naming the choices when ``given`` holds a value not ``allowed``."""
    unknown = [g for g in given or () if g not in allowed]
    if unknown:
        raise typer.BadParameter(
            f"unknown {', '.join(map(repr, unknown))}; choose from {', '.join(allowed)}", param_hint=option
        )
