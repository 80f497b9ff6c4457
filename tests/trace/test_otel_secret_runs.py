"""OpenTelemetry spans of a run that read a secret carry its events redacted, exported or live."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from actionspace import Labels, Runtime, ToolError
from actionspace.policy import Principal, redact_events
from actionspace.trace.otel import export_run
from actionspace.trace.otel_live import instrument

SECRET = "hunter2"


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield tracer_provider
    tracer_provider.shutdown()


def _runtime() -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="read", labels=Labels(confidentiality="secret"))
    def vault(name: str) -> str:
        """Read a stored secret."""
        return SECRET

    @rt.tool(effect="read")
    def lookup(code: str) -> str:
        """Look a code up; the error names the code."""
        raise ToolError("permanent", f"no record for {code}")

    return rt


def _secret_run(rt: Runtime) -> str:
    run = rt.new_run()
    assert rt.call({"name": "vault", "arguments": {"name": "db"}}, run_id=run).data == SECRET
    failed = rt.call({"name": "lookup", "arguments": {"code": SECRET}}, run_id=run)
    assert failed.error is not None and SECRET in failed.error.message
    rt.user_input(run, f"the code {SECRET} did not work")
    return run


def _text(span: ReadableSpan) -> str:
    return json.dumps(
        {
            "attributes": dict(span.attributes or {}),
            "status": span.status.description,
            "events": [dict(event.attributes or {}) for event in span.events],
        }
    )


def test_an_exported_secret_run_shows_no_secret_value_but_keeps_the_error_type(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    rt = _runtime()
    run = _secret_run(rt)
    cleared = redact_events(rt.trace.events(run), Principal(id="ops", scopes=("labels:secret",)))
    assert any(SECRET in str(e.data) for e in cleared)  # the store itself keeps the values

    assert export_run(rt.trace, run, tracer_provider=provider) == 3
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans if SECRET in _text(s)] == []
    failed = next(s for s in spans if s.name == "execute_tool lookup")
    assert (failed.attributes or {})["error.type"] == "permanent"


def test_live_spans_of_a_secret_run_show_no_secret_value(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    rt = _runtime()
    live = instrument(rt.engine, tracer_provider=provider)
    _secret_run(rt)
    assert live.flush()
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == ["execute_tool vault", "execute_tool lookup"]
    assert [s.name for s in spans if SECRET in _text(s)] == []
    assert (spans[1].attributes or {})["error.type"] == "permanent"
