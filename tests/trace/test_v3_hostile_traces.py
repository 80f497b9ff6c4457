"""Hostile traces: OpenTelemetry export, JSON Lines import and the timeline never pass them on raw."""

from __future__ import annotations

import io
import math
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from rich.console import Console

from actionspace.trace.events import TraceEvent
from actionspace.trace.export import dumps_event, export_jsonl, import_jsonl
from actionspace.trace.memory import MemoryTraceStore
from actionspace.trace.otel import export_run
from actionspace.trace.render import timeline_rows, timeline_table

_HUGE = "x" * 100_000
_ODD_KEYS: dict[str, Any] = {"\ud801key": "v", "big": -(2**70), "k" * 5000: 1}


def _ev(seq: int, kind: str, call_id: str | None = None, ts: float = 1.0, **data: Any) -> TraceEvent:
    return TraceEvent(run_id="r", seq=seq, kind=kind, ts=ts, call_id=call_id, data=data)


def _hostile_run() -> list[TraceEvent]:
    return [
        _ev(0, "run_started", principal="\ud800alice"),
        _ev(1, "parsed", calls=7),
        _ev(2, "validated", "c1", ts=5.0, tool=_HUGE, verdict="ok", field_errors=5),
        _ev(3, "dispatched", "c1", ts=2.0, idempotency_key=_HUGE, attempt=2**80, node_id=math.nan),
        _ev(4, "validated", "c1", ts=1.0, tool="t", field_errors=[{"path": "\udfff" + _HUGE}]),
        _ev(5, "observation", "c1", status="error", category={"x": 1}, recovery=["\ud800" + _HUGE] * 500),
        TraceEvent(run_id="r", seq=6, kind="observation", ts=1.0, call_id="c2", data=_ODD_KEYS),
    ]


def _all_attribute_values(exporter: InMemorySpanExporter) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for span in exporter.get_finished_spans():
        out.extend(dict(span.attributes or {}).items())
        out.append(("name", span.name))
        for event in span.events:
            out.extend(dict(event.attributes or {}).items())
    return out


def test_a_hostile_run_exports_with_utf8_text_bounded_values_and_int64_numbers() -> None:
    store = MemoryTraceStore()
    store.append_many(_hostile_run())
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    assert export_run(store, "r", tracer_provider=provider) == 4  # run, c1, reused c1, c2
    for key, value in _all_attribute_values(exporter):
        key.encode("utf-8")
        assert len(key) <= 300
        values = value if isinstance(value, tuple | list) else [value]
        assert len(values) <= 128
        for item in values:
            if isinstance(item, str):
                item.encode("utf-8")
                assert len(item) <= 1024, key
            elif isinstance(item, int) and not isinstance(item, bool):
                assert -(2**63) <= item < 2**63, key


def test_a_bad_line_on_import_writes_nothing_and_names_its_line() -> None:
    good = [dumps_event(_ev(i, "attempt", "c", attempt=i)) for i in range(5)]
    lines = [*good[:3], '{"run_id": "r", "seq": -1, "kind": "x", "ts": 1.0}', *good[3:]]
    store = MemoryTraceStore()
    with pytest.raises(ValueError, match=r"^line 4: "):
        import_jsonl(store, iter(lines), batch_size=1)
    assert store.events("r") == []


def test_export_then_import_keeps_every_hostile_event_exactly() -> None:
    events = [
        _ev(0, "run_started", principal="\ud800", n=math.inf, big=2**90, nested={"\udfff": [None, 1.5]}),
        _ev(3, "observation", "c\u2028", ts=1e-9, text="line\nbreak\x1b[2J", nan=math.nan),
    ]
    source, target = MemoryTraceStore(), MemoryTraceStore()
    source.append_many(events)
    out = io.StringIO()
    assert export_jsonl(source, out) == 2
    result = import_jsonl(target, io.StringIO(out.getvalue()))
    assert (result.read, result.written) == (2, 2)
    again = io.StringIO()
    export_jsonl(target, again)
    assert again.getvalue() == out.getvalue()
    [first, second] = target.events("r")
    assert (first.seq, first.kind, second.seq, second.call_id) == (0, "run_started", 3, "c\u2028")
    # written as every other store keeps them: JSON any reader takes, read back as that text
    assert (second.data["nan"], first.data["n"]) == ("NaN", "Infinity")
    assert first.data["nested"] == {"\udfff": [None, 1.5]}
    assert "NaN" not in out.getvalue().replace('"NaN"', "")


def _shown(events: list[TraceEvent]) -> str:
    console = Console(width=80, record=True, force_terminal=False)
    with console.capture() as captured:
        console.print(timeline_table(events))
    return captured.get()


@pytest.mark.parametrize("evil", ["\x1b[31mred\x1b]0;title\x07", "\x9b2J", "a\x00b\x7f", "\x1bc"])
def test_control_characters_in_tool_names_arguments_and_results_never_reach_the_terminal(evil: str) -> None:
    shown = _shown(
        [
            _ev(0, "validated", evil, tool=evil, verdict="ok"),
            _ev(1, "dispatched", "c", tool=evil, arguments={evil: evil}),
            _ev(2, "observation", "c", status="ok", content=evil),
            _ev(3, evil, "c", result=evil),
        ]
    )
    for bad in ("\x1b", "\x9b", "\x00", "\x7f", "\x07"):
        assert bad not in shown
    assert "\\x1b" in shown or "\\x9b" in shown or "\\x00" in shown


def test_very_long_call_ids_and_kinds_are_cut_with_a_marker() -> None:
    [row] = timeline_rows([_ev(0, "k" * 5000, "c" * 5000, note="v" * 5000)])
    for value in (row.kind, row.call_id, row.summary):
        assert value.endswith("…") and len(value) <= 160
