"""A simple call's events kept as one compact record: read back as the events the stages record."""

from __future__ import annotations

import asyncio
import gc
import itertools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from actionspace import Runtime, ToolCall
from actionspace.trace import memory
from actionspace.trace.events import EventRecord, TraceEvent
from actionspace.trace.recorder import Recorder

RUN = "run-compact"


def _runtime(store: str = "memory://", *, fast: bool = True) -> Runtime:
    rt = Runtime(store)

    @rt.tool(effect="none")
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @rt.tool(effect="none")
    def echo(text: str) -> dict[str, Any]:
        """Echo a text."""
        return {"text": text, "n": len(text)}

    rt.engine.fast.enabled = fast
    return rt


def _openai(name: str, args: dict[str, Any], call_id: str | None) -> str:
    function = {"name": name, "arguments": json.dumps(args)}
    entry: dict[str, Any] = {"type": "function", "function": function}
    if call_id is not None:
        entry["id"] = call_id
    return json.dumps(entry)


def _calls(n: int) -> list[Any]:
    out: list[Any] = []
    for i in range(n):
        if i % 3 == 0:
            out.append(_openai("add", {"a": i, "b": 1}, f"call_{i}"))
        elif i % 3 == 1:
            out.append(ToolCall(name="echo", arguments={"text": "x" * i}, id=None))
        else:
            out.append(_openai("echo", {"text": "long " * 5000}, None))  # model output cut
    return out


def _play(rt: Runtime, calls: list[Any], run_id: str = RUN) -> list[Any]:
    async def play() -> list[Any]:
        return [await rt.acall(c, run_id=run_id) for c in calls]

    asyncio.run(play())
    return _events(rt.trace.events(run_id))


def _events(events: list[TraceEvent]) -> list[Any]:
    """Everything but the wall clock; tuples stay tuples, so payload types are compared too."""
    return [(e.seq, e.kind, e.call_id, _no_clock(e.data)) for e in events]


def _no_clock(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _no_clock(v) for k, v in value.items() if k not in ("ts", "fetched_at")}
    if isinstance(value, tuple):
        return tuple(_no_clock(v) for v in value)
    if isinstance(value, list):
        return [_no_clock(v) for v in value]
    return value


def test_simple_calls_are_read_back_as_exactly_the_events_the_stages_record() -> None:
    calls = _calls(12)
    with _runtime(fast=True) as fast, _runtime(fast=False) as staged:
        _play(fast, calls[:3])  # first calls of each tool resolve their names on the staged path
        _play(staged, calls[:3])
        got, want = _play(fast, calls), _play(staged, calls)
        assert got == want
        assert [e[0] for e in got] == list(range(len(got)))
        assert fast.trace.next_seq(RUN) == staged.trace.next_seq(RUN) == len(got)
        assert [s.events for s in fast.trace.runs()] == [s.events for s in staged.trace.runs()]


def test_a_store_that_takes_plain_records_gets_the_same_events() -> None:
    calls = _calls(9)
    with _runtime(fast=True) as fast, _runtime(fast=False) as staged:
        trace = fast.trace
        assert isinstance(trace, memory.MemoryTraceStore)
        taken: list[EventRecord] = []

        def plain(run_id: str, records: Any) -> None:  # no append_call: events arrive expanded
            taken.extend(records)
            trace.append_records(run_id, records)

        fast.engine.sink = plain
        _play(fast, calls[:3])
        _play(staged, calls[:3])
        assert _play(fast, calls) == _play(staged, calls)
        assert len(taken) == len(trace.events(RUN))  # one plain record per event


def test_a_sqlite_trace_gets_the_same_events_on_both_paths(tmp_path: Path) -> None:
    calls = _calls(6)
    with (
        _runtime(f"sqlite:///{tmp_path / 'fast.db'}", fast=True) as fast,
        _runtime(f"sqlite:///{tmp_path / 'staged.db'}", fast=False) as staged,
    ):
        got, want = _play(fast, calls * 2), _play(staged, calls * 2)
        assert json.loads(json.dumps(got)) == json.loads(json.dumps(want))


def test_simple_calls_never_pack_events_on_the_calling_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    packed: list[int] = []
    encode = memory._encode

    def counting(records: Any) -> bytes:
        packed.append(len(records))
        return encode(records)

    monkeypatch.setattr(memory, "_encode", counting)
    with _runtime() as rt:
        call = _openai("add", {"a": 1, "b": 2}, "c1")
        _play(rt, [call] * 1500)  # about 9,000 events
        assert packed == []
        assert len(rt.trace.events(RUN)) == 1 + 6 * 1500


def test_simple_calls_leave_nothing_for_the_garbage_collector_to_walk() -> None:
    with _runtime() as rt:
        calls = [_openai("add", {"a": i, "b": 2}, f"c{i}") for i in range(1100)]
        _play(rt, calls)  # past what the run's flow state remembers
        grown = []
        for _ in range(3):  # the least of three: threads other tests left running allocate too
            gc.collect()
            before = len(gc.get_objects())
            _play(rt, calls)
            gc.collect()
            grown.append(len(gc.get_objects()) - before)
        assert min(grown) < 200, grown  # ~6,600 events more a round if events were tracked objects


def test_events_numbered_around_another_threads_events_keep_their_numbers() -> None:
    """A run's numbers taken by another thread mid-call: the call's events keep the ones it got."""
    results: dict[bool, list[Any]] = {}
    for fast in (True, False):
        with _runtime(fast=fast) as rt:
            call = _openai("add", {"a": 1, "b": 2}, "c1")
            _play(rt, [call])
            state = rt.engine.run(RUN)
            state.seq = itertools.count(state.seq.__next__(), 2)  # every other number is taken
            results[fast] = _play(rt, [call, call])
    assert results[True] == results[False]
    numbers = [e[0] for e in results[True][-12:]]
    assert numbers == list(range(numbers[0], numbers[0] + 24, 2))


def test_a_recorder_keeps_one_compact_record_per_call_in_event_order() -> None:
    with _runtime() as rt:
        call = _openai("add", {"a": 1, "b": 2}, "c1")
        _play(rt, [call, call])
        run = rt.engine.run(RUN)
        shape = next(iter(rt.engine.fast._entries.values())).shape
        first = next(run.seq)
        for _ in range(3):
            next(run.seq)
        rec = Recorder(run, "x")
        rec.add_call((first, 1.0, "x", shape, None, "add", None, "n9", -1, 1.0, None))
        rec.add("attempt", {"attempt": 1})
        later = first + 5
        rec.add_call((later, 2.0, "y", shape, None, "add", None, "n10", later + 4, 2.0, "h"))
        sunk: list[EventRecord] = []
        rec.flush(lambda run_id, records: sunk.extend(records))  # a plain sink: all expanded
        assert rec.records == [] and rec.call is None
        assert [(q, k, c) for q, k, _, c, _ in sunk] == [
            (first, "parsed", None),
            (first + 1, "authorized", "x"),
            (first + 2, "validated", "x"),
            (first + 3, "dispatched", "x"),
            (first + 4, "attempt", "x"),
            (later, "parsed", None),
            (later + 1, "authorized", "y"),
            (later + 2, "validated", "y"),
            (later + 3, "dispatched", "y"),
            (later + 4, "observation", "y"),
        ]
        assert sunk[-1][4] == {"status": "ok", "tool": "add", "version": "1", "content_hash": "h"}


def test_a_sink_that_refuses_a_flush_leaves_the_records_to_retry_and_count() -> None:
    """A store raising (a repeated seq, a closed file) writes nothing: the recorder keeps what it
    handed over, so the engine can renumber and retry, and say how many events were refused."""
    with _runtime() as rt:
        run = rt.engine.run(rt.new_run())
        rec = Recorder(run, "x")
        rec.add("attempt", {"attempt": 1})
        rec.add("attempt", {"attempt": 2})
        held = list(rec.records)

        def refuse(run_id: str, records: Sequence[EventRecord]) -> None:
            raise ValueError("an event repeats a (run_id, seq) already stored")

        with pytest.raises(ValueError):
            rec.flush(refuse)
        assert rec.records == held
        sunk: list[EventRecord] = []
        rec.flush(lambda run_id, records: sunk.extend(records))
        assert sunk == held and rec.records == []
