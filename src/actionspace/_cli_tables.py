"""What every listing command shares: tables readable at 80 columns, id prefixes, the store named.

An id is the one thing a reader copies from a listing, so its column never truncates or wraps;
the other columns fold. ``show`` and the decision commands take any unique prefix of an id.

Every stored text (ids, run ids, reasons, arguments) was written by someone else, a model among
them: cells are plain text (never rich markup) and control, format and unpaired surrogate
characters are shown as escapes, so a row can neither restyle the terminal nor hide what it says.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import NoReturn

import typer
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

__all__ = [
    "cell",
    "clipped",
    "counted",
    "fail",
    "id_table",
    "interrupted_line",
    "on_interrupt",
    "one_line",
    "printable",
    "say_store",
    "short_time",
    "shown_store",
    "unique",
    "utf8_text",
]

_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
"""Unicode categories a terminal acts on or does not show: controls, format (bidi, zero-width),
unpaired surrogates, line and paragraph separators."""
_ECHO_CHARS = 120
"""How much of a typed id a refusal repeats."""
_LINE_BREAKS = re.compile(r"[ \t]*[\r\n]+\s*")
REFUSAL_PREFIX = "error: "
"""What every command's refusal starts with."""


def printable(text: str) -> str:
    """``text`` with every control, format or unpaired surrogate character written as its escape."""
    if text.isprintable():
        return text
    return "".join(_escape(ch) if unicodedata.category(ch) in _HIDDEN else ch for ch in text)


def _escape(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def cell(text: str, style: str = "") -> Text:
    """A table cell showing ``text`` as it is: no markup, nothing hidden (:func:`printable`)."""
    return Text(printable(text), style=style)


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun``, in the plural unless ``n`` is 1: ``1 call``, ``0 calls``, ``1,200 calls``."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def clipped(text: str) -> str:
    """``text`` as a refusal repeats it: printable and at most ``_ECHO_CHARS`` characters."""
    shown = printable(text)
    return shown if len(shown) <= _ECHO_CHARS else f"{shown[:_ECHO_CHARS]}… ({len(text)} characters)"


def utf8_text(value: str | None) -> str | None:
    """Typer callback: refuse an argument whose bytes were not UTF-8 (decoded to lone surrogates)."""
    if value is not None:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise typer.BadParameter("is not valid UTF-8 text") from None
    return value


def id_table(title: str, id_header: str, ids: Sequence[str], *others: str) -> Table:
    """A compact table whose first column (the ids) is as wide as the longest id and never cut."""
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, title_justify="left")
    width = max((len(printable(i)) for i in ids), default=len(id_header))
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
        fail(f"no {what} {clipped(prefix)}")
    shown = ", ".join(clipped(c) for c in found[:5]) + (", …" if len(found) > 5 else "")
    fail(f"'{clipped(prefix)}' matches {len(found)} {what}s: {shown}")
    raise AssertionError("unreachable")


def shown_store(url: str) -> str:
    """``url`` as a command prints it, its password as ``***`` (:func:`actionspace._store_url.shown_url`)."""
    from actionspace._store_url import shown_url

    return shown_url(url)


def refused_store(url: str, exc: BaseException, what: str = "store") -> str | None:
    """One line for an SQLite ``url`` no retry opens (a folder, a path through a file, another
    program's file), saying what to give ``--store`` instead; None for a failure that may pass
    (the file locked or busy, the system short of file handles) and for any other store."""
    import sqlite3

    from actionspace._store_url import sqlite_path
    from actionspace.errors import ConfigurationError

    if url.partition("://")[0].lower() != "sqlite" or not isinstance(exc, sqlite3.DatabaseError):
        return None
    said = str(exc).lower()
    try:
        path = sqlite_path(url)
        if "not a database" in said:
            return (
                f"cannot read {what} {shown_store(url)}: file is not a database (another program's file?); "
                "give --store the file a runtime recorded to"
            )
        if "unable to open" not in said:
            return None
        if path.is_dir():
            reason = "it is a folder, not a database file"
        elif not path.parent.is_dir():
            reason = f"{path.parent} is not a folder"
        else:
            return None
    except (OSError, ConfigurationError):
        return None
    return f"cannot open {what} {path}: {reason}; give --store a database file's path"


def say_store(url: str) -> None:
    """Name the store a command reads, on stderr (stdout stays what ``--json`` promises)."""
    Console(stderr=True, soft_wrap=True).print(
        f"store: {shown_store(url)}", style="dim", markup=False, highlight=False
    )


def one_line(message: str) -> str:
    """``message`` as a refusal says it: line breaks (a driver's text spans several) as one space,
    then :func:`printable`, behind the common ``error: `` prefix."""
    return REFUSAL_PREFIX + printable(_LINE_BREAKS.sub(" ", message.strip()))


def fail(message: str) -> NoReturn:
    """One line on stderr (whatever ``message`` holds), then exit 1."""
    typer.echo(one_line(message), err=True)
    raise typer.Exit(1)


_WRITTEN: list[str] = []
"""What the running command has (or has not) written, as :func:`on_interrupt` last said it."""
_NOTHING_SAID = "what it wrote before it was stopped stays"


def on_interrupt(written: str) -> None:
    """Have Ctrl-C stopping the running command say ``written``: what it has or has not written."""
    _WRITTEN[:] = [written]


def interrupted_line(exc: SystemExit) -> str | None:
    """The one line to print when ``exc`` is how Typer ends a command Ctrl-C stopped (exit 130,
    raised from the KeyboardInterrupt), else None. Forgets what :func:`on_interrupt` said."""
    said = _WRITTEN[0] if _WRITTEN else _NOTHING_SAID
    _WRITTEN.clear()
    ended = exc.__context__
    if exc.code != 130 or ended is None or not isinstance(ended.__cause__, KeyboardInterrupt):
        return None
    return one_line(f"interrupted: {said}")
