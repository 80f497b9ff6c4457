"""OpenTelemetry export of a run whose model reuses a call id: each call keeps its own events."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from actionspace import Principal, Runtime
from actionspace.trace.otel import export_run


def _call(name: str, arguments: dict[str, int]) -> str:
    return json.dumps(
        {"id": "call_1", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
    )


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    yield InMemorySpanExporter()


def test_the_next_call_reusing_an_id_takes_its_authorization_into_its_own_span(
    exporter: InMemorySpanExporter,
) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    rt = Runtime("memory://", recover_on_start=False, principal=Principal(id="u", scopes=("read:*",)))

    @rt.tool(effect="read")
    def look(x: int) -> int:
        """Read a number."""
        return x

    @rt.tool(effect="write", scopes=("write:numbers",))
    def store(x: int) -> int:
        """Write a number (needs a scope the principal lacks)."""
        return x

    run = rt.new_run()
    assert rt.call(_call("look", {"x": 1}), run_id=run).ok
    denied = rt.call(_call("store", {"x": 2}), run_id=run)
    assert denied.error is not None and denied.error.category == "permission_denied"
    events = rt.trace.events(run)
    first_observation = next(e for e in events if e.kind == "observation")

    assert export_run(rt.trace, run, tracer_provider=provider) == 3
    look_span, store_span = (s for s in exporter.get_finished_spans() if s.parent is not None)
    assert look_span.name == "execute_tool look" and store_span.name == "execute_tool store"
    assert (look_span.attributes or {})["actionspace.authorization.verdict"] == "allowed"
    assert (store_span.attributes or {})["actionspace.authorization.verdict"] == "denied"
    assert [e.name for e in look_span.events][-1] == "actionspace.observation"
    assert next(e.name for e in store_span.events) == "actionspace.authorized"
    assert look_span.end_time == round(first_observation.ts * 1_000_000_000)
    provider.shutdown()
