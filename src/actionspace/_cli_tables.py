"""What every listing command shares: tables readable at 80 columns, id prefixes, the store named.

An id is the one thing a reader copies from a listing, so its column never truncates or wraps;
the other columns fold. ``show`` and the decision commands take any unique prefix of an id.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

import typer
from rich import box
from rich.console import Console
from rich.table import Table

__all__ = ["id_table", "say_store", "short_time", "unique"]


def id_table(title: str, id_header: str, ids: Sequence[str], *others: str) -> Table:
    """A compact table whose first column (the ids) is as wide as the longest id and never cut."""
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, title_justify="left")
    width = max((len(i) for i in ids), default=len(id_header))
    table.add_column(id_header, no_wrap=True, min_width=max(width, len(id_header)), overflow="ignore")
    for header in others:
        table.add_column(header, overflow="fold")
    return table


def short_time(ts: float | None) -> str:
    """``MM-DD HH:MM:SS`` in local time, or ``-``."""
    return datetime.fromtimestamp(ts).strftime("%m-%d %H:%M:%S") if ts else "-"


def unique(prefix: str, candidates: Iterable[str], what: str) -> str:
    """The one candidate equal to ``prefix`` or starting with it; typer.Exit(1) with the reason otherwise."""
    pool = list(candidates)
    if prefix in pool:
        return prefix
    found = sorted({c for c in pool if c.startswith(prefix)})
    if len(found) == 1:
        return found[0]
    if not found:
        fail(f"no {what} {prefix}")
    shown = ", ".join(found[:5]) + (", …" if len(found) > 5 else "")
    fail(f"{prefix!r} matches {len(found)} {what}s: {shown}")
    raise AssertionError("unreachable")


def say_store(url: str) -> None:
    """Name the store a command reads, on stderr (stdout stays what ``--json`` promises)."""
    Console(stderr=True, soft_wrap=True).print(f"store: {url}", style="dim", markup=False, highlight=False)


def fail(message: str) -> None:
    typer.echo(message, err=True)
    raise typer.Exit(1)
