"""A live exporter whose collector is slow or down never slows a call down nor fails it."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from actionspace import Runtime
from actionspace.trace.otel import tracer_of
from actionspace.trace.otel_live import LiveSpans, instrument

_STALL_SECONDS = 3.0


class _StalledCollector(SpanExporter):
    """Blocks every export until released (or ``_STALL_SECONDS`` pass), then fails it."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if not self.release.wait(_STALL_SECONDS):
            raise ConnectionError("collector down")
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS


def _runtime(collector: _StalledCollector) -> tuple[Runtime, TracerProvider]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(collector))
    rt = Runtime("memory://")
    rt.add_tool(name="ping", input_schema={"type": "object"}, fn=lambda: "pong", effect="read")
    return rt, provider


def test_a_call_returns_at_once_while_the_collector_hangs() -> None:
    collector = _StalledCollector()
    rt, provider = _runtime(collector)
    instrument(rt.engine, tracer_provider=provider)
    started = time.monotonic()
    obs = rt.call({"name": "ping", "arguments": {}}, run_id="r1")
    elapsed = time.monotonic() - started
    collector.release.set()
    assert obs.ok
    assert elapsed < _STALL_SECONDS / 3


def test_a_full_queue_drops_spans_with_a_count_and_every_call_still_succeeds() -> None:
    collector = _StalledCollector()
    rt, provider = _runtime(collector)
    live = LiveSpans(rt.engine.sink, tracer_of(provider), queue_size=2)
    rt.engine.sink = live
    started = time.monotonic()
    results = [rt.call({"name": "ping", "arguments": {}, "id": f"c{i}"}, run_id="r1") for i in range(8)]
    elapsed = time.monotonic() - started
    assert all(obs.ok for obs in results)
    assert elapsed < _STALL_SECONDS / 3
    assert 8 - 1 - 2 <= live.dropped <= 8 - 2  # one in the worker's hands, two queued
    collector.release.set()
    assert live.flush(timeout=10.0)
    assert len(collector.spans) == 8 - live.dropped
