"""Pure functions from trace events to what ``actionspace trace`` prints.

Every summary is one line and tolerates payloads it does not know: an unknown kind, a missing
field or a field of the wrong type shows up as ``key=value`` text, never as an exception.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, Literal

from rich import box
from rich.console import Console, ConsoleOptions, RenderResult
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from actionspace._canonical import canonical_text, normalize
from actionspace._cli_tables import counted, short_time
from actionspace.trace._terminal_text import escaped_json as _escaped_json
from actionspace.trace._terminal_text import shown as _safe
from actionspace.trace.events import RunSummary, TraceEvent

__all__ = [
    "OUTCOME_STYLES",
    "Outcome",
    "RunHeader",
    "TimelineRow",
    "event_outcome",
    "events_json",
    "format_time",
    "run_header",
    "runs_json",
    "runs_table",
    "safe_line",
    "summarize_event",
    "timeline_rows",
    "timeline_table",
]

Outcome = Literal["ok", "warn", "error", "info"]
OUTCOME_STYLES: Final[Mapping[Outcome, str]] = {"ok": "green", "warn": "yellow", "error": "red", "info": ""}

MODEL_OUTPUT_CHARS: Final = 80
_MAX_NAMES: Final = 8
_MAX_VALUE_CHARS: Final = 60
_MAX_LINE_CHARS: Final = 160
_MAX_ID_CHARS: Final = 40

_OK_WORDS: Final = frozenset(
    {"ok", "accepted", "allowed", "allow", "granted", "approved", "completed", "succeeded", "success"}
    | {"passed", "committed", "done"}
)
_ERROR_WORDS: Final = frozenset(
    {"error", "rejected", "denied", "deny", "failed", "failure", "cancelled", "aborted", "crashed"}
)
_WARN_WORDS: Final = frozenset({"needs_approval", "pending", "unknown", "unknown_commit", "timeout"})


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TimelineRow:
    """One line of ``actionspace trace show``."""

    offset_ms: float
    """Milliseconds since the run's first event."""
    seq: int
    kind: str
    call_id: str
    """Empty when the event belongs to no call."""
    summary: str
    outcome: Outcome


# -- one-line summaries ------------------------------------------------------------------------


def summarize_event(event: TraceEvent) -> str:
    """A one-line, human-readable account of ``event`` (never raises)."""
    data = event.data if isinstance(event.data, Mapping) else {}
    summarizer = _SUMMARIZERS.get(event.kind, _generic)
    try:
        line = summarizer(data)
    except Exception:  # an odd payload must not break rendering of the whole run
        line = _generic(data)
    return _clip(line, _MAX_LINE_CHARS)


def _run_started(data: Mapping[str, Any]) -> str:
    principal = data.get("principal")
    if isinstance(principal, Mapping):
        principal = principal.get("id") or principal.get("name") or principal
    return f"principal {_text(principal)}" if principal not in (None, "") else _generic(data)


def _candidates_offered(data: Mapping[str, Any]) -> str:
    offered = [_tool_ref(item) for item in _items(data.get("offered"))]
    left_out = [
        f"{_text(item.get('name'))} ({_text(item.get('reason'))})"
        if item.get("reason")
        else _text(item.get("name"))
        for item in _items(data.get("left_out"))
    ]
    line = f"{len(offered)} offered: {_names(offered) or '-'}"
    if left_out:
        line += f"; {len(left_out)} left out: {_names(left_out)}"
    elif isinstance(data.get("reasons"), Mapping) and data["reasons"]:  # a packed event: the counts
        counts = [(str(k), n) for k, n in data["reasons"].items() if isinstance(n, int)]
        total = sum(n for _, n in counts)
        line += f"; {total:,} left out: " + ", ".join(f"{n:,} {_text(k)}" for k, n in counts)
    return line


def _model_output(data: Mapping[str, Any]) -> str:
    raw = _text(data.get("raw"))
    flat = "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in " ".join(raw.split()))
    if len(flat) <= MODEL_OUTPUT_CHARS:
        return f'"{flat}"'
    return f'"{flat[:MODEL_OUTPUT_CHARS]}…" ({len(raw):,} chars)'


def _parsed(data: Mapping[str, Any]) -> str:
    head = _text(data.get("format")) or "?"
    names = [_text(call.get("name")) for call in _items(data.get("calls"))]
    line = f"{head}: {_names(names) if names else 'no calls'}"
    if data.get("error"):
        line += f"; error: {_error_text(data['error'])}"
    return line


def _resolved(data: Mapping[str, Any]) -> str:
    if data.get("error"):
        return f"error: {_error_text(data['error'])}"
    line = _tool_ref(data, name_key="tool")
    if data.get("schema_hash"):
        line += f" schema {_text(data['schema_hash'])[:12]}"
    return line


def _validated(data: Mapping[str, Any]) -> str:
    parts = [_text(data.get("verdict")) or "?"]
    if data.get("category"):
        parts.append(_text(data["category"]))
    line = " ".join(parts)
    paths = [_text(err.get("path")) or "/" for err in _items(data.get("field_errors"))]
    if paths:
        line += f": {_names(paths)}"
    if data.get("reason"):
        line += f" ({_text(data['reason'])})"
    return line


def _authorized(data: Mapping[str, Any]) -> str:
    parts = [_text(data.get("verdict")) or "?"]
    if data.get("category"):
        parts.append(_text(data["category"]))
    line = " ".join(parts)
    missing = data.get("missing_scope")
    if missing:
        scopes = [_text(s) for s in missing] if isinstance(missing, list | tuple) else [_text(missing)]
        line += f", missing scope {_names(scopes)}"
    if data.get("reason"):
        line += f" ({_text(data['reason'])})"
    return line


def _dispatched(data: Mapping[str, Any]) -> str:
    line = _tool_ref(data, name_key="tool")
    if data.get("attempt") is not None:
        line += f" attempt {_text(data['attempt'])}"
    if data.get("node_id"):
        line += f" node {_text(data['node_id'])}"
    return line


def _dry_run(data: Mapping[str, Any]) -> str:
    line = f"{_tool_ref(data, name_key='tool')} not dispatched"
    preview = data.get("preview") is True
    line += ": answered by its preview" if preview else " (no preview: the call described)"
    if data.get("node"):
        line += f" node {_text(data['node'])}"
    return line


def _attempt(data: Mapping[str, Any]) -> str:
    line = f"attempt {_text(data.get('attempt')) or '?'}"
    if data.get("category"):
        line += f" {_text(data['category'])}"
    delay = data.get("delay_s")
    if isinstance(delay, int | float) and not isinstance(delay, bool):
        line += f", retry in {delay:.2f}s"
    return line


def _observation(data: Mapping[str, Any]) -> str:
    head = _text(data.get("status")) or "?"
    if data.get("category"):
        head += f" {_text(data['category'])}"
    recovery = data.get("recovery")
    if recovery:
        steps = [_text(s) for s in recovery] if isinstance(recovery, list | tuple) else [_text(recovery)]
        head += f" → {', '.join(steps)}"
    parts = [head]
    trimming = data.get("trimming")
    if isinstance(trimming, Mapping):
        parts.append(_trimming(trimming))
    if data.get("artifact_ref"):
        parts.append(f"artifact {_text(data['artifact_ref'])}")
    return "; ".join(parts)


def _trimming(trimming: Mapping[str, Any]) -> str:
    rule = _text(trimming.get("rule")) or "?"
    if trimming.get("rule_version") is not None:
        rule += f"@{_text(trimming['rule_version'])}"
    sizes = ""
    original, kept = trimming.get("original_bytes"), trimming.get("kept_bytes")
    if isinstance(original, int) and isinstance(kept, int):
        sizes = f" ({original:,} → {kept:,} B)"
    return f"trimmed by {rule}{sizes}"


def _run_finished(data: Mapping[str, Any]) -> str:
    return f"status {_text(data.get('status'))}" if data.get("status") else _generic(data)


def _generic(data: Mapping[str, Any]) -> str:
    return " ".join(f"{key}={_clip(_text(value), _MAX_VALUE_CHARS)}" for key, value in data.items())


_SUMMARIZERS: Final[Mapping[str, Callable[[Mapping[str, Any]], str]]] = {
    "run_started": _run_started,
    "candidates_offered": _candidates_offered,
    "model_output": _model_output,
    "parsed": _parsed,
    "resolved": _resolved,
    "validated": _validated,
    "authorized": _authorized,
    "dispatched": _dispatched,
    "dry_run": _dry_run,
    "attempt": _attempt,
    "observation": _observation,
    "run_finished": _run_finished,
}


# -- outcomes ----------------------------------------------------------------------------------


def event_outcome(event: TraceEvent) -> Outcome:
    """Whether ``event`` reports success, a failure, something to watch, or just information
    (never raises: a value whose truth raises, which an in-process trace may hold, is information)."""
    try:
        return _outcome(event)
    except Exception:
        return "info"


def _outcome(event: TraceEvent) -> Outcome:
    data = event.data if isinstance(event.data, Mapping) else {}
    if data.get("error"):
        return "error"
    for key in ("verdict", "status", "decision", "result"):
        word = data.get(key)
        if isinstance(word, str):
            return _word_outcome(word)
    if isinstance(data.get("passed"), bool):
        return "ok" if data["passed"] else "error"
    if event.kind == "attempt" and data.get("category"):
        return "warn"
    if event.kind in ("resolved", "dispatched") or (event.kind == "parsed" and data.get("calls")):
        return "ok"
    return "info"


def _word_outcome(word: str) -> Outcome:
    word = word.lower()
    if word in _OK_WORDS:
        return "ok"
    if word in _ERROR_WORDS:
        return "error"
    if word in _WARN_WORDS:
        return "warn"
    return "info"


# -- rows, tables, JSON ------------------------------------------------------------------------


def timeline_rows(events: Iterable[TraceEvent]) -> list[TimelineRow]:
    """One row per event, in the order given; offsets count from the first event."""
    rows: list[TimelineRow] = []
    start: float | None = None
    for event in events:
        start = event.ts if start is None else start
        rows.append(
            TimelineRow(
                offset_ms=(event.ts - start) * 1000.0,
                seq=event.seq,
                kind=_clip(event.kind, _MAX_ID_CHARS),
                call_id=_clip(event.call_id or "", _MAX_ID_CHARS),
                summary=summarize_event(event),
                outcome=event_outcome(event),
            )
        )
    return rows


def timeline_table(events: Iterable[TraceEvent], *, title: str | None = None) -> Table:
    """The Rich table of ``actionspace trace show``; payload text is never read as markup."""
    table = Table(title=title, title_justify="left")
    table.add_column("+ms", justify="right", no_wrap=True)
    table.add_column("kind", no_wrap=True)
    table.add_column("call", overflow="fold")
    table.add_column("summary", overflow="fold")
    for row in timeline_rows(events):
        style = OUTCOME_STYLES[row.outcome]
        table.add_row(
            Text(f"{row.offset_ms:,.1f}", style="dim"),
            Text(row.kind, style=style or "bold"),
            Text(row.call_id, style="cyan"),
            Text(row.summary, style=style),
        )
    return table


def runs_table(summaries: Sequence[RunSummary]) -> Table:
    """The Rich table of ``actionspace trace list``: one line per run, run ids never cut (they are
    what one copies); the start time is ``MM-DD HH:MM:SS`` (``--json`` has the timestamp)."""
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, collapse_padding=True)
    width = max((len(_safe(s.run_id)) for s in summaries), default=6)
    table.add_column("run id", no_wrap=True, min_width=width, overflow="ignore", style="cyan")
    table.add_column("started", no_wrap=True)
    table.add_column("events", justify="right", no_wrap=True)
    table.add_column("calls", justify="right", no_wrap=True)
    table.add_column("errors", justify="right", no_wrap=True)
    table.add_column("finished", no_wrap=True)
    for s in summaries:
        table.add_row(
            Text(_safe(s.run_id)),
            _short_time(s.started_at),
            str(s.events),
            str(s.calls),
            Text(str(s.errors), style="red" if s.errors else ""),
            Text("yes", style="green") if s.finished else Text("no", style="yellow"),
        )
    return table


def run_header(summary: RunSummary) -> RunHeader:
    """The lines above the timeline: id, start time and counts, laid out to the terminal's width."""
    return RunHeader(
        run=Text.assemble(("run ", "bold"), (_safe(summary.run_id), "bold cyan")),
        started=Text(f"started {format_time(summary.started_at)}"),
        counts=(
            Text(counted(summary.events, "event")),
            Text(counted(summary.calls, "call")),
            Text(counted(summary.errors, "error"), style="red" if summary.errors else ""),
            Text("finished", style="green") if summary.finished else Text("not finished", style="yellow"),
        ),
    )


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RunHeader:
    """``run ID  started … · N events · …`` on one line where it fits, else the run and its start,
    then the counts, breaking between facts, never inside one; the run id is never cut or folded."""

    run: Text
    """``run`` and the run id."""
    started: Text
    """When the run started."""
    counts: tuple[Text, ...]
    """Events, calls, errors, and whether the run finished."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        whole = _joined(self.run, (self.started, *self.counts), first_gap="  ")
        if whole.cell_len <= width:
            yield from _unwrapped(whole, console)
            return
        yield from _laid_out(console, self.run, (self.started,), width, first_gap="  ")
        yield from _laid_out(console, self.counts[0], self.counts[1:], width)


def _joined(first: Text, rest: Sequence[Text], *, first_gap: str = " · ") -> Text:
    line = first.copy()
    for n, fact in enumerate(rest):
        line.append(first_gap if n == 0 else " · ")
        line.append_text(fact)
    return line


def _laid_out(
    console: Console, first: Text, rest: Sequence[Text], width: int, *, first_gap: str = " · "
) -> Iterable[Segment]:
    """``first`` and ``rest`` joined, a new line begun before any fact that would pass ``width``."""
    line, gap = first.copy(), first_gap
    for fact in rest:
        if line.cell_len + len(gap) + fact.cell_len > width:
            yield from _unwrapped(line, console)
            line = fact.copy()
        else:
            line.append(gap)
            line.append_text(fact)
        gap = " · "
    yield from _unwrapped(line, console)


def _unwrapped(line: Text, console: Console) -> Iterable[Segment]:
    """``line`` as segments, never wrapped (rich 15 folds a ``Text`` whatever its ``overflow``)."""
    yield from line.render(console, "")
    yield Segment.line()


def format_time(ts: float) -> str:
    """Local wall-clock time of a Unix timestamp, to the second; ``?`` for one that is no time
    (NaN, text, beyond the platform's clock: a row another version wrote or a hand edited)."""
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))
    except (OverflowError, OSError, ValueError, TypeError):
        return "?"


def events_json(events: Iterable[TraceEvent]) -> str:
    """The events as an indented JSON array of ``TraceEvent.to_dict``, the characters of
    :data:`~actionspace.trace._terminal_text.HIDDEN` written as JSON escapes (it reads back the same)."""
    dicts = [e.to_dict() for e in events]
    try:
        text = json.dumps(dicts, indent=2, ensure_ascii=False, default=str)
    except Exception:  # a value an in-process trace holds as given (a cycle, a raising str)
        text = json.dumps(normalize(dicts), indent=2, ensure_ascii=False)
    return _escaped_json(text)


def runs_json(summaries: Iterable[RunSummary]) -> str:
    """The run summaries as an indented JSON array (escaped as :func:`events_json` is)."""
    return _escaped_json(json.dumps([dataclasses.asdict(s) for s in summaries], indent=2, ensure_ascii=False))


# -- text helpers ------------------------------------------------------------------------------


def _short_time(ts: float) -> str:
    """:func:`~actionspace._cli_tables.short_time`, or ``?`` for a start that is no time."""
    try:
        return short_time(ts)
    except (OverflowError, OSError, ValueError, TypeError):
        return "?"


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        if isinstance(value, bool | int | float):
            return str(value)
        return json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))
    except Exception:  # held as given by an in-process trace (a cycle, a raising str)
        return canonical_text(value)


def _items(value: Any) -> list[Mapping[str, Any]]:
    if not isinstance(value, list | tuple):
        return []
    return [item if isinstance(item, Mapping) else {"name": item} for item in value]


def _tool_ref(item: Mapping[str, Any], *, name_key: str = "name") -> str:
    name = _text(item.get(name_key)) or "?"
    version = item.get("version")
    return f"{name}@{_text(version)}" if version not in (None, "") else name


def _names(names: Sequence[str]) -> str:
    shown = ", ".join(names[:_MAX_NAMES])
    return f"{shown}, +{len(names) - _MAX_NAMES} more" if len(names) > _MAX_NAMES else shown


def _error_text(error: Any) -> str:
    if isinstance(error, Mapping):
        category, message = _text(error.get("category")), _text(error.get("message"))
        return ": ".join(p for p in (category, message) if p) or _text(error)
    return _text(error)


def _clip(text: str, limit: int) -> str:
    """``text`` on one line, control characters escaped (never sent raw to a terminal), cut to ``limit``."""
    text = _safe(" ".join(text.split()))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def safe_line(text: str, limit: int) -> str:
    """``text`` with every control character (line breaks too) escaped, cut to ``limit`` characters."""
    text = _safe(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"
