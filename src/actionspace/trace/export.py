"""JSON Lines export and import of runs: one event per line, as ``TraceEvent.to_dict``.

Export writes one run at a time, so memory holds one run, never the whole store. Import reads
line by line (a line longer than :data:`MAX_LINE_CHARS` is refused before it is read whole),
checks every line before it writes any (a checked copy is spooled to a temporary file past a few
MiB, so memory stays bounded), then writes in batches; importing a file twice stores each
``(run_id, seq)`` once, and an import cut short completes when the file is imported again.

A run id the store already holds for another run is never merged into: when the stored run and
the file's share no ``seq``, or an event at a shared ``seq`` differs in kind, time or call id,
the file's events of that run are skipped and counted (:class:`ImportResult`). Nor is a run of the
file that holds two different events at one ``seq`` (which of them is the run's cannot be told):
its events are skipped and counted the same way; the same event written twice is imported once.
Telling them apart keeps a small digest of each event of the file in memory while it is read.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import sys
import tempfile
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from actionspace._unicode import json_for_utf8
from actionspace.trace.events import AppendsNew, FindsRunIds, TraceEvent, TraceStore
from actionspace.trace.store_encoding import call_id_for_postgres, check_event, encode_data

__all__ = ["ImportResult", "dumps_event", "export_jsonl", "import_jsonl", "iter_jsonl", "loads_event"]

_ALL_RUNS: Final = 2**62
_SPOOL_BYTES: Final = 8 * 1024 * 1024
MAX_LINE_CHARS = 16 * 1024 * 1024
"""Longest line :func:`import_jsonl` reads (characters); a stored event's data is kept under
about 1 MB (:data:`~actionspace.trace.store_encoding.MAX_EVENT_CHARS`)."""
_MAX_SEQ: Final = 2**63 - 1
"""Largest ``seq`` every store holds (SQLite's INTEGER and PostgreSQL's bigint are 64-bit)."""
_RUNS_CACHED: Final = 16
"""Stored runs an import keeps the events of at once while it checks the file against them."""


class _Writer(Protocol):
    def write(self, text: str, /) -> Any: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ImportResult:
    """What :func:`import_jsonl` did."""

    read: int
    """Events read from the input."""
    written: int
    """Events the store did not have yet and now has."""
    skipped: int = 0
    """Events not written because their run id names another run in the store, or their run holds
    two different events at one ``seq`` in the file."""
    skipped_runs: int = 0
    """How many run ids of the file name other runs in the store (their events are skipped)."""
    repeated_runs: int = 0
    """How many runs of the file hold two different events at one ``seq`` (their events are skipped)."""


def dumps_event(event: TraceEvent) -> str:
    """One event as one line of JSON (no trailing newline), keys sorted. Its data is written as
    every store but the in-memory one keeps it (:func:`~actionspace.trace.store_encoding.encode_data`:
    a NaN or an infinity as the text ``"NaN"``, ``"Infinity"``), so the line is JSON any reader takes."""
    fields = event.to_dict()
    try:
        text = json.dumps(fields, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except ValueError:  # a non-finite number only the in-memory store holds as one
        fields["data"] = json.loads(encode_data(event.data))
        text = json.dumps(fields, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return text if text.isascii() else json_for_utf8(text)  # an unpaired surrogate as its escape


_EXPONENT: Final = re.compile(r"e\+?\d")
_EXPONENT_UPPER: Final = re.compile(r"E\+?\d")
_DIGITS: Final = re.compile(r"\d{309}")


def _checked_loads(line: str, unkept: list[str]) -> Any:
    """``json.loads(line)``, each NaN or infinity it reads named in ``unkept``."""

    def constant(name: str) -> float:
        unkept.append(name)
        return float(name)

    def finite(text: str) -> float:
        value = float(text)
        if not math.isfinite(value):  # 1e400: Infinity written another way
            unkept.append(text if len(text) <= 40 else text[:40] + "…")
        return value

    return json.loads(line, parse_constant=constant, parse_float=finite)


def _suspect(line: str) -> bool:
    """Whether ``line`` holds text a NaN or an infinity may be read from: ``NaN``, ``Infinity``, a
    positive exponent (``repr`` writes one only from 1e16: ``1e400``) or 309 digits in a row."""
    return (
        "NaN" in line
        or "Infinity" in line
        or _EXPONENT.search(line) is not None
        or ("E" in line and _EXPONENT_UPPER.search(line) is not None)
        or _DIGITS.search(line) is not None
    )


_MAX_TS = 2**1000
"""Past this an integer ``ts`` has no float (and is no time)."""


def loads_event(line: str, *, postgres: bool = False) -> TraceEvent:
    """Parse one line written by :func:`dumps_event`; raises ``ValueError`` if it is not an event
    or holds what no store can keep (see :func:`~actionspace.trace.store_encoding.check_event`;
    ``postgres``: what PostgreSQL cannot keep either)."""
    unkept: list[str] = []  # numbers read that no store keeps as numbers: refused below
    try:
        # Most lines hold no text a non-finite number is read from: parsed with no Python per number
        raw = _checked_loads(line, unkept) if _suspect(line) else json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc.msg}") from exc
    except ValueError as exc:  # Python's own limit on integer digits, worded for the file's reader
        limit = sys.get_int_max_str_digits()
        raise ValueError(f"not JSON a store can read: an integer of more than {limit} digits") from exc
    except RecursionError as exc:
        raise ValueError("not JSON a store can read: nested too deeply") from exc
    if not isinstance(raw, dict):
        raise ValueError(f"expected a JSON object, got {type(raw).__name__}")
    for name in ("run_id", "kind"):
        if name in raw and type(raw[name]) is not str:
            got = "null" if raw[name] is None else type(raw[name]).__name__
            raise ValueError(f"bad field value: {name} must be text, got {got}")
    if unkept:  # a store keeps it as the text "NaN", and no other JSON reader takes it
        raise ValueError(f"not JSON a store can keep: {unkept[0]} is not a finite number")
    ts = raw.get("ts")
    if "ts" in raw and type(ts) not in (int, float):
        got = "null" if ts is None else type(ts).__name__
        raise ValueError(f"bad field value: ts must be a number of seconds, got {got}")
    if type(ts) is int and not -_MAX_TS < ts < _MAX_TS:
        raise ValueError("bad field value: ts must be a finite number of seconds")
    seq = raw.get("seq")
    if type(seq) is int and not 0 <= seq <= _MAX_SEQ:
        raise ValueError(f"bad field value: seq must be a whole number from 0 to 2**63 - 1, got {seq!r}")
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
        check_event(event.run_id, event.kind, event.ts, postgres=postgres)
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


def iter_jsonl(lines: Iterable[str], *, postgres: bool = False) -> Iterator[TraceEvent]:
    """Parse JSON Lines lazily, skipping blank lines; ``ValueError`` names the bad line's number.

    A file object (anything with ``readline``) is read at most :data:`MAX_LINE_CHARS` characters
    at a time, and a longer line is refused before the rest of it is read.
    """
    for number, line in enumerate(_bounded(lines), start=1):
        if not line.strip():
            continue
        try:
            yield loads_event(line, postgres=postgres)
        except ValueError as exc:
            raise ValueError(f"line {number}: {exc}") from exc


def _bounded(lines: Iterable[str]) -> Iterator[str]:
    """``lines``, each refused (``ValueError``, naming its number) when longer than the bound."""
    limit = MAX_LINE_CHARS
    readline = getattr(lines, "readline", None)
    source: Iterable[str] = iter(lambda: readline(limit + 1), "") if callable(readline) else lines
    for number, line in enumerate(source, start=1):
        if len(line) > limit and not (len(line) == limit + 1 and line.endswith("\n")):
            raise ValueError(f"line {number}: longer than {limit} characters")
        yield line


def import_jsonl(store: TraceStore, lines: Iterable[str], *, batch_size: int = 500) -> ImportResult:
    """Append the events in ``lines`` that ``store`` does not have yet, ``batch_size`` at a time.

    Every line is checked first: a malformed one raises ``ValueError`` (``line N: reason``)
    before anything is written. The events of a run id the store holds for another run, and of
    a run holding two different events at one ``seq``, are skipped and counted (see the module
    docstring).
    """
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    postgres = getattr(store, "holds_nul", True) is False
    stored = _StoredRuns(store)
    digests: dict[str, dict[int, bytes]] = {}
    repeated: set[str] = set()
    with tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES, mode="w+", encoding="utf-8") as checked:
        read = 0
        for event in iter_jsonl(lines, postgres=postgres):
            stored.check(event)
            line = dumps_event(event)
            digest = hashlib.blake2b(line.encode("utf-8", "surrogatepass"), digest_size=16).digest()
            if digests.setdefault(event.run_id, {}).setdefault(event.seq, digest) != digest:
                repeated.add(event.run_id)
            checked.write(line + "\n")
            read += 1
        del digests
        conflicting = stored.foreign()
        foreign = conflicting | repeated
        checked.seek(0)
        append = _new_events_appender(store)
        written = skipped = 0
        batch: list[TraceEvent] = []
        for line in checked:
            event = loads_event(line)
            if event.run_id in foreign:
                skipped += 1
                continue
            batch.append(event)
            if len(batch) >= batch_size:
                written += append(batch)
                batch = []
        if batch:
            written += append(batch)
    return ImportResult(
        read=read,
        written=written,
        skipped=skipped,
        skipped_runs=len(conflicting),
        repeated_runs=len(repeated),
    )


_Signature = tuple[str, float, "str | None"]


def _signature(event: TraceEvent) -> _Signature:
    """What tells one run's event from another's at one seq, as every store gives it back."""
    return event.kind, event.ts, call_id_for_postgres(event.call_id)


class _StoredRuns:
    """Which run ids of a file name other runs in the store (see the module docstring); the
    events of at most :data:`_RUNS_CACHED` stored runs are held at once."""

    def __init__(self, store: TraceStore) -> None:
        self._store = store
        self._cached: OrderedDict[str, dict[int, _Signature]] = OrderedDict()
        self._shared: dict[str, bool] = {}
        """Run ids the store holds events of → whether the file shares a seq with them."""
        self._differ: set[str] = set()

    def check(self, event: TraceEvent) -> None:
        run_id = event.run_id
        if run_id in self._differ:
            return
        held = self._cached.get(run_id)
        if held is None:
            held = {e.seq: _signature(e) for e in self._store.events(run_id)}
            self._cached[run_id] = held
            if len(self._cached) > _RUNS_CACHED:
                self._cached.popitem(last=False)
            if held:
                self._shared.setdefault(run_id, False)
        else:
            self._cached.move_to_end(run_id)
        found = held.get(event.seq)
        if found is None:
            return
        self._shared[run_id] = True
        if found != _signature(event):
            self._differ.add(run_id)

    def foreign(self) -> set[str]:
        return self._differ | {run_id for run_id, shared in self._shared.items() if not shared}


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
