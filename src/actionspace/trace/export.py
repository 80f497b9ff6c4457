"""JSON Lines export and import of runs: one event per line, as ``TraceEvent.to_dict``.

Export writes one run at a time, so memory holds one run, never the whole store. Import reads
line by line, checks every line before it writes any (a checked copy is spooled to a temporary
file past a few MiB, so memory stays bounded), then writes in batches; importing a file twice
stores each ``(run_id, seq)`` once.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from actionspace._unicode import json_for_utf8
from actionspace.trace.events import AppendsNew, FindsRunIds, TraceEvent, TraceStore
from actionspace.trace.store_encoding import check_event

__all__ = ["ImportResult", "dumps_event", "export_jsonl", "import_jsonl", "iter_jsonl", "loads_event"]

_ALL_RUNS: Final = 2**62
_SPOOL_BYTES: Final = 8 * 1024 * 1024


class _Writer(Protocol):
    def write(self, text: str, /) -> Any: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ImportResult:
    """What :func:`import_jsonl` did."""

    read: int
    """Events read from the input."""
    written: int
    """Events the store did not have yet and now has."""


def dumps_event(event: TraceEvent) -> str:
    """One event as one line of JSON (no trailing newline), keys sorted."""
    text = json.dumps(event.to_dict(), ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return text if text.isascii() else json_for_utf8(text)  # an unpaired surrogate as its escape


_MAX_TS = 2**1000
"""Past this an integer ``ts`` has no float (and is no time)."""


def loads_event(line: str) -> TraceEvent:
    """Parse one line written by :func:`dumps_event`; raises ``ValueError`` if it is not an event
    or holds what no store can keep (see :func:`~actionspace.trace.store_encoding.check_event`)."""
    try:
        raw = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc.msg}") from exc
    if not isinstance(raw, dict):
        raise ValueError(f"expected a JSON object, got {type(raw).__name__}")
    for name in ("run_id", "kind"):
        if name in raw and type(raw[name]) is not str:
            got = "null" if raw[name] is None else type(raw[name]).__name__
            raise ValueError(f"bad field value: {name} must be text, got {got}")
    ts = raw.get("ts")
    if "ts" in raw and type(ts) not in (int, float):
        got = "null" if ts is None else type(ts).__name__
        raise ValueError(f"bad field value: ts must be a number of seconds, got {got}")
    if type(ts) is int and not -_MAX_TS < ts < _MAX_TS:
        raise ValueError("bad field value: ts must be a finite number of seconds")
    try:
        event = TraceEvent.from_dict(raw)
    except KeyError as exc:
        raise ValueError(f"missing field {exc.args[0]!r}") from exc
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValueError(f"bad field value: {exc}") from exc
    seq, call_id = raw["seq"], raw.get("call_id")
    if type(seq) is not int or seq < 0:
        raise ValueError(f"bad field value: seq must be a whole number from 0, got {seq!r}")
    if call_id is not None and type(call_id) is not str:
        raise ValueError(f"bad field value: call_id must be text or null, got {type(call_id).__name__}")
    if raw.get("data") is not None and type(raw["data"]) is not dict:
        raise ValueError("bad field value: data must be an object")
    try:
        check_event(event.run_id, event.kind, event.ts)
    except ValueError as exc:  # what no store can keep: refused before any store sees it
        raise ValueError(f"bad field value: {exc}") from exc
    return event


def export_jsonl(store: TraceStore, out: _Writer, *, run_id: str | None = None) -> int:
    """Write the events of ``run_id`` (or of every run, sorted by id) to ``out``; return the count.

    An unknown ``run_id`` writes nothing and returns 0.
    """
    count = 0
    for rid in [run_id] if run_id is not None else _all_run_ids(store):
        for event in store.events(rid):
            out.write(dumps_event(event) + "\n")
            count += 1
    return count


def iter_jsonl(lines: Iterable[str]) -> Iterator[TraceEvent]:
    """Parse JSON Lines lazily, skipping blank lines; ``ValueError`` names the bad line's number."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield loads_event(line)
        except ValueError as exc:
            raise ValueError(f"line {number}: {exc}") from exc


def import_jsonl(store: TraceStore, lines: Iterable[str], *, batch_size: int = 500) -> ImportResult:
    """Append the events in ``lines`` that ``store`` does not have yet, ``batch_size`` at a time.

    Every line is checked first: a malformed one raises ``ValueError`` (``line N: reason``)
    before anything is written.
    """
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    with tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES, mode="w+", encoding="utf-8") as checked:
        read = 0
        for event in iter_jsonl(lines):
            checked.write(dumps_event(event) + "\n")
            read += 1
        checked.seek(0)
        append = _new_events_appender(store)
        written = 0
        batch: list[TraceEvent] = []
        for line in checked:
            batch.append(loads_event(line))
            if len(batch) >= batch_size:
                written += append(batch)
                batch = []
        if batch:
            written += append(batch)
    return ImportResult(read=read, written=written)


def _all_run_ids(store: TraceStore) -> list[str]:
    if isinstance(store, FindsRunIds):
        return store.run_ids()
    return sorted(summary.run_id for summary in store.runs(limit=_ALL_RUNS))


class _Appender(Protocol):
    def __call__(self, events: Sequence[TraceEvent], /) -> int: ...


def _new_events_appender(store: TraceStore) -> _Appender:
    if isinstance(store, AppendsNew):
        return store.append_new
    known: dict[str, set[int]] = {}

    def append(events: Sequence[TraceEvent]) -> int:
        fresh: list[TraceEvent] = []
        for event in events:
            seqs = known.get(event.run_id)
            if seqs is None:
                seqs = known[event.run_id] = {e.seq for e in store.events(event.run_id)}
            if event.seq not in seqs:
                seqs.add(event.seq)
                fresh.append(event)
        store.append_many(fresh)
        return len(fresh)

    return append
