"""``actionspace trace``: list runs, show one run as a timeline, export and import JSON Lines.

The Typer app only parses options, opens the store and prints; what is printed comes from
:mod:`actionspace.trace.render`. Expected failures (no such run, bad store URL, unreadable file)
print one line to stderr and exit with code 1.
"""

from __future__ import annotations

import json
import re
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.text import Text

from actionspace._cli_app import CliApp
from actionspace._cli_tables import counted, refused_store
from actionspace._store_url import shown_url as shown_store
from actionspace.errors import ConfigurationError
from actionspace.trace import render
from actionspace.trace.events import TraceEvent, TraceStore, summarize
from actionspace.trace.export import export_jsonl, import_jsonl
from actionspace.trace.store import (
    default_store_url,
    open_trace_store,
    resolve_run_id,
)

__all__ = ["trace_app"]

_LINE_BREAKS = re.compile(r"[ \t]*[\r\n]+\s*")

trace_app = CliApp(
    name="trace",
    help="Inspect recorded runs: list them, show one as a timeline, export or import JSON Lines.",
    no_args_is_help=True,
    add_completion=False,
)

StoreOption = Annotated[
    str | None,
    typer.Option(
        "--store",
        metavar="URL",
        help="Trace store URL: sqlite:///relative.db, sqlite:////abs/path.db or memory://. "
        "Default: $ACTIONSPACE_STORE, else sqlite:///$ACTIONSPACE_HOME/actionspace.db "
        "(ACTIONSPACE_HOME defaults to ~/.actionspace).",
        show_default=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
ViewerOption = Annotated[
    str | None,
    typer.Option("--viewer", metavar="ID", help="Show the run as this principal sees it (readers sets)."),
]
ViewerScopeOption = Annotated[
    list[str] | None,
    typer.Option("--viewer-scope", metavar="SCOPE", help="A scope of the viewer, e.g. labels:secret."),
]


@trace_app.command("list")
def list_runs(
    store: StoreOption = None,
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=1, max=1_000_000, help="Show at most N runs.")
    ] = 20,
    as_json: JsonOption = False,
) -> None:
    """List the most recent runs: id, start time, events, calls, errors, finished.

    Example: actionspace trace list -n 5 --store sqlite:///actionspace.db
    """
    url = store or default_store_url()
    with _only_reading(), _opened(url) as opened:  # no trace: one line and exit 1, as show says
        summaries = opened.runs(limit=limit)
    if as_json:
        typer.echo(render.runs_json(summaries))
    elif not summaries:
        _stderr().print(Text(f"No runs in {shown_store(url)}."), soft_wrap=True)
    else:
        _stdout().print(render.runs_table(summaries))


@trace_app.command("show")
def show_run(
    run_id: Annotated[
        str, typer.Argument(metavar="RUN_ID", help="A run id, or a prefix that matches only one run.")
    ],
    store: StoreOption = None,
    as_json: JsonOption = False,
    viewer: ViewerOption = None,
    viewer_scope: ViewerScopeOption = None,
) -> None:
    """Show one run as a timeline: one row per event with time since start, kind, call and summary.

    Rows are green for success, yellow for approvals and retries, red for rejections and errors.
    Events recorded while the run held secret (or reader-restricted) data are redacted unless the
    viewer may read them: a member of the readers set (--viewer) or a holder of labels:secret.

    Example: actionspace trace show run_a2a4 --json
    """
    url = store or default_store_url()
    with _only_reading(), _opened(url) as opened:
        rid = _resolve(opened, run_id)
        events = _as_seen(opened.events(rid), viewer, viewer_scope)
    if as_json:
        typer.echo(render.events_json(events))
        return
    summary = summarize(rid, events)
    console = _stdout()
    if summary is not None:
        console.print(render.run_header(summary), crop=False)  # the run id is never cut
    console.print(render.timeline_table(events))


@trace_app.command("export")
def export_runs(
    run_id: Annotated[
        str | None,
        typer.Argument(
            metavar="RUN_ID", help="A run id or unique prefix; all runs when omitted.", show_default=False
        ),
    ] = None,
    out: Annotated[
        str,
        typer.Option("--out", "-o", metavar="FILE", help="File to write; '-' writes to stdout."),
    ] = "-",
    store: StoreOption = None,
) -> None:
    """Export runs as JSON Lines, one event per line (TraceEvent.to_dict).

    Load the file into another store with 'actionspace trace import FILE --store URL'.

    Example: actionspace trace export run_a2a4 --out run.jsonl
    """
    url = store or default_store_url()
    with _opened(url) as opened:  # the store is read, never written: only the --out file is
        rid = _resolve(opened, run_id) if run_id is not None else None
        if out == "-":
            count = export_jsonl(opened, sys.stdout, run_id=rid)
        else:
            try:
                with Path(out).open("w", encoding="utf-8") as fh:
                    count = export_jsonl(opened, fh, run_id=rid)
            except OSError as exc:
                _fail(f"cannot write {out}: {exc.strerror or exc}")
    if out != "-":
        _stderr().print(Text(f"Exported {counted(count, 'event')} to {out}."), soft_wrap=True)


@trace_app.command("import")
def import_runs(
    file: Annotated[str, typer.Argument(metavar="FILE", help="JSON Lines file to read; '-' reads stdin.")],
    store: StoreOption = None,
) -> None:
    """Import JSON Lines written by 'export'; events already in the store are skipped.

    A run whose id the store holds for another run (other events at the same numbers), or that
    holds two different events at one number in the file, is skipped whole and counted, never
    merged into the store.

    Example: actionspace trace import run.jsonl --store sqlite:///other.db
    """
    url = store or default_store_url()
    try:  # before the store is opened (or made)
        source = nullcontext(sys.stdin) if file == "-" else Path(file).open(encoding="utf-8")  # noqa: SIM115
    except OSError as exc:
        _fail(f"cannot read {file}: {exc.strerror or exc}")
    made = _new_sqlite_parts(url)
    with source as lines, _opened(url, writing=True) as opened:
        try:
            result = import_jsonl(opened, lines)
        except BaseException as exc:
            new = bool(made) and not opened.runs(limit=1)  # a store made here that holds runs stays
            if new:
                opened.close()
                _remove(made)
            _refuse_import(exc, file, url, new=new)
    said = f"Read {counted(result.read, 'event')}, {result.written} new."
    why = []
    if result.skipped_runs:
        n = result.skipped_runs
        why.append(
            f"{n} run{'s' if n > 1 else ''} of the file {'have ids' if n > 1 else 'has an id'}"
            " the store holds for other runs"
        )
    if result.repeated_runs:
        n = result.repeated_runs
        why.append(
            f"{n} run{'s' if n > 1 else ''} of the file {'hold' if n > 1 else 'holds'}"
            " two different events at one seq"
        )
    if why:
        said += f" {result.skipped} skipped: {'; '.join(why)}."
    _stderr().print(Text(said), soft_wrap=True)


@trace_app.command("replay")
def replay_run(
    run_id: Annotated[
        str, typer.Argument(metavar="RUN_ID", help="A run id, or a prefix that matches only one run.")
    ],
    runtime: Annotated[
        str,
        typer.Option(
            "--runtime", metavar="MODULE:FUNCTION", help="Builds the fresh runtime to replay against."
        ),
    ],
    store: StoreOption = None,
    as_json: JsonOption = False,
    strict: Annotated[
        bool,
        typer.Option("--strict", help="Exit 1 also when a decision could not be replayed."),
    ] = False,
    viewer: ViewerOption = None,
    viewer_scope: ViewerScopeOption = None,
) -> None:
    """Re-decide every recorded decision of a run against a fresh runtime, running no tool.

    Decisions: offer, resolve, authorize, validate, provenance, flow, approval, budget. Exit 1
    when any differs. A decision the trace does not let the replay make (e.g. a plan node's
    arguments are not recorded) is shown with '?' and counted as not replayed. As with 'show',
    the events of a secret (or reader-restricted) run are replayed redacted unless the viewer
    may read them (--viewer in its readers set, or --viewer-scope labels:secret).

    Example: actionspace trace replay run_a2a4 --runtime actionspace.demo.registry:calendar_runtime
    """
    from actionspace.trace.replay import load_factory, render_text, replay_events

    try:
        factory = load_factory(runtime)
    except ConfigurationError as exc:
        _fail(str(exc))
    url = store or default_store_url()
    with _opened(url) as opened:
        rid = _resolve(opened, run_id)
        events = _as_seen(opened.events(rid), viewer, viewer_scope)
    result = replay_events(rid, events, factory())
    typer.echo(json.dumps(result.to_dict(), indent=2) if as_json else render_text(result))
    if result.differences or (strict and result.unreplayed):
        raise typer.Exit(code=1)


def _new_sqlite_parts(url: str) -> list[Path]:
    """What opening the SQLite store of ``url`` would create: its file and any missing folders."""
    from actionspace._store_url import sqlite_path

    if url.partition("://")[0].lower() != "sqlite":
        return []
    try:
        path = sqlite_path(url)
        made = [] if path.exists() else [path]
        made += [p for p in path.parents if not p.exists()]
    except (ConfigurationError, OSError):  # refused when the store is opened
        return []
    return made


def _remove(made: list[Path]) -> None:
    """Undo what a failed import created: the store's file (with its journal) and then its folders."""
    for path in made:
        try:
            if path.is_dir():
                path.rmdir()
            else:
                for part in (path, *(path.with_name(path.name + s) for s in ("-wal", "-shm", "-journal"))):
                    part.unlink(missing_ok=True)
        except OSError:  # something else is in it now: it stays
            return


def _refuse_import(exc: BaseException, file: str, url: str, *, new: bool) -> NoReturn:
    """One line for an import that stopped: the file unreadable or malformed, or Ctrl-C."""
    if isinstance(exc, OSError):
        _fail(f"cannot read {file}: {exc.strerror or exc}")
    if isinstance(exc, ValueError):  # a malformed line (or bytes that are not UTF-8): nothing written
        _fail(f"{file}: {exc}")
    if isinstance(exc, KeyboardInterrupt):
        if new:
            _fail("interrupted: nothing was imported", code=130)
        _fail(
            f"interrupted: {shown_store(url)} keeps the events written so far; import the file "
            "again to complete it",
            code=130,
        )
    raise exc


def _as_seen(events: list[TraceEvent], viewer: str | None, scopes: list[str] | None) -> list[TraceEvent]:
    """The events as the viewer of ``--viewer`` / ``--viewer-scope`` may see them (none given: a
    viewer with no id and no scope), redacted where their label forbids it."""
    from actionspace.policy import Principal, redact_events

    who = Principal(id=viewer or "", scopes=tuple(scopes or ())) if viewer or scopes else None
    return redact_events(events, who)


@contextmanager
def _opened(url: str, *, writing: bool = False) -> Iterator[TraceStore]:
    """The store of ``url``: made if missing when ``writing``, else opened so that reading writes
    nothing (a store without a trace is refused: ``no trace in …``)."""
    with _reading(url):
        try:
            store = open_trace_store(url, read_only=not writing)
        except ConfigurationError as exc:
            _fail(str(exc))
        try:
            yield store
        finally:
            store.close()


@contextmanager
def _only_reading() -> Iterator[None]:
    """Ctrl-C while a command that only reads is reading: one line saying so, exit 130."""
    try:
        yield
    except KeyboardInterrupt:
        _fail("interrupted: nothing was written", code=130)


@contextmanager
def _reading(url: str) -> Iterator[None]:
    # on stderr: stdout stays the output
    _stderr().print(Text(f"store: {shown_store(url)}", style="dim"), soft_wrap=True)
    try:
        yield
    except sqlite3.DatabaseError as exc:
        _fail(refused_store(url, exc, "trace store") or f"cannot read trace store {shown_store(url)}: {exc}")
    except ConfigurationError as exc:
        _fail(str(exc))
    except OSError as exc:  # a path the system refuses (a name too long, a file where a folder goes)
        _fail(f"cannot open trace store {shown_store(url)}: {exc.strerror or exc}")


def _resolve(store: TraceStore, prefix: str) -> str:
    try:
        return resolve_run_id(store, prefix)
    except LookupError as exc:
        _fail(str(exc.args[0]) if exc.args else "no such run")


def _fail(message: str, *, code: int = 1) -> NoReturn:
    """One line on stderr, however long its path and however many lines the driver's text spans."""
    said = _LINE_BREAKS.sub(" ", message.strip())
    _stderr().print(Text.assemble(("error: ", "bold red"), said), soft_wrap=True)
    raise typer.Exit(code=code)


def _stdout() -> Console:
    return Console(highlight=False)


def _stderr() -> Console:
    return Console(stderr=True, highlight=False)
