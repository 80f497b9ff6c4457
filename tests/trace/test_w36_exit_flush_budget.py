"""The flush run at process exit waits at most its budget in all, however many runtimes emit
spans to a collector that hangs."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from actionspace import Runtime
from actionspace.trace import otel_live
from actionspace.trace.otel_live import instrument

_SINKS = 4
_BUDGET = 0.3


class _HungCollector(SpanExporter):
    """Blocks every export until released; counts who entered."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Semaphore(0)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.entered.release()
        self.release.wait(30.0)
        return SpanExportResult.SUCCESS


def test_flushing_every_live_sink_keeps_to_one_budget_while_the_collector_hangs() -> None:
    collector = _HungCollector()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(collector))
    sinks = []
    try:
        for i in range(_SINKS):
            rt = Runtime("memory://", recover_on_start=False)
            rt.add_tool(name="ping", input_schema={"type": "object"}, fn=lambda: "pong", effect="read")
            sinks.append(instrument(rt.engine, tracer_provider=provider))
            assert rt.call({"name": "ping", "arguments": {}}, run_id=f"r{i}").ok
        for _ in range(_SINKS):  # every worker is stuck in the collector
            assert collector.entered.acquire(timeout=10.0)
        started = time.monotonic()
        assert otel_live.flush(_BUDGET) is False
        elapsed = time.monotonic() - started
        assert elapsed < _BUDGET * 2, elapsed  # one budget, not one per sink
    finally:
        collector.release.set()
    assert all(live.flush(10.0) for live in sinks)
