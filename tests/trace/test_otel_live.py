"""Live OpenTelemetry spans: each call and plan node is an ``execute_tool`` span under the caller's span."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from actionspace import Plan, Runtime
from actionspace.trace.otel_live import LiveSpans, flush, instrument


def _setup() -> tuple[Runtime, TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    rt = Runtime("memory://")

    @rt.tool(effect="write", writes=["note:{key}"])
    def note(key: str) -> str:
        """Write a note."""
        return key

    instrument(rt.engine, tracer_provider=provider)
    return rt, provider, exporter


def _tools(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    assert flush()  # spans are emitted by a background thread
    return [s for s in exporter.get_finished_spans() if s.name.startswith("execute_tool")]


def test_a_call_inside_a_user_span_is_its_child_execute_tool_span() -> None:
    rt, provider, exporter = _setup()
    with provider.get_tracer("app").start_as_current_span("handle request") as parent:
        obs = rt.call({"name": "note", "arguments": {"key": "a"}, "id": "call_1"}, run_id="r1")
        [span] = _tools(exporter)  # emitted while the user's span is still open
    assert obs.ok
    assert span.name == "execute_tool note"
    assert span.parent is not None and span.parent.span_id == parent.get_span_context().span_id
    assert span.context is not None and span.context.trace_id == parent.get_span_context().trace_id
    attrs = dict(span.attributes or {})
    assert attrs["gen_ai.operation.name"] == "execute_tool"
    assert attrs["gen_ai.tool.name"] == "note" and attrs["gen_ai.tool.call.id"] == obs.call_id
    assert "error.type" not in attrs


def test_a_rejected_call_carries_its_category_as_error_type() -> None:
    rt, provider, exporter = _setup()
    with provider.get_tracer("app").start_as_current_span("handle request"):
        rt.call({"name": "note", "arguments": {"key": 7}}, run_id="r1")
    [span] = _tools(exporter)
    assert dict(span.attributes or {})["error.type"] == "invalid_arguments"


def test_an_async_call_nests_under_the_span_current_in_its_task() -> None:
    rt, provider, exporter = _setup()

    async def handler() -> str:
        with provider.get_tracer("app").start_as_current_span("async request") as parent:
            await rt.acall({"name": "note", "arguments": {"key": "b"}}, run_id="r1")
            return format(parent.get_span_context().span_id, "x")

    parent_id = asyncio.run(handler())
    [span] = _tools(exporter)
    assert span.parent is not None and format(span.parent.span_id, "x") == parent_id


def test_each_plan_node_is_a_span_under_the_caller() -> None:
    rt, provider, exporter = _setup()
    plan = Plan.from_dict(
        {
            "nodes": [
                {"id": "n1", "tool": "note", "arguments": {"key": "x"}},
                {"id": "n2", "tool": "note", "arguments": {"key": "y"}},
            ]
        }
    )
    with provider.get_tracer("app").start_as_current_span("run plan") as parent:
        assert rt.run_plan(plan, run_id="p1").status == "ok"
    spans = _tools(exporter)
    assert sorted(str(dict(s.attributes or {})["actionspace.plan.node_id"]) for s in spans) == ["n1", "n2"]
    assert {s.parent.span_id for s in spans if s.parent} == {parent.get_span_context().span_id}


def test_instrumenting_twice_never_doubles_spans() -> None:
    rt, provider, exporter = _setup()
    instrument(rt.engine, tracer_provider=provider)
    rt.call({"name": "note", "arguments": {"key": "a"}}, run_id="r1")
    assert len(_tools(exporter)) == 1


def test_a_runtime_made_after_configuring_opentelemetry_emits_spans_without_being_told() -> None:
    script = (
        "from opentelemetry import trace\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from opentelemetry.sdk.trace.export import SimpleSpanProcessor\n"
        "from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter\n"
        "exporter = InMemorySpanExporter(); provider = TracerProvider()\n"
        "provider.add_span_processor(SimpleSpanProcessor(exporter)); trace.set_tracer_provider(provider)\n"
        "from actionspace import Runtime\n"
        "rt = Runtime()\n"
        "rt.add_tool(name='ping', input_schema={'type': 'object'}, fn=lambda: 'pong', effect='read')\n"
        "rt.call({'name': 'ping', 'arguments': {}})\n"
        "from actionspace.trace.otel_live import flush; flush()\n"
        "print([s.name for s in exporter.get_finished_spans()])\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert "execute_tool ping" in done.stdout, done.stderr


def test_without_opentelemetry_configured_the_engine_keeps_the_plain_sink() -> None:
    script = (
        "from actionspace import Runtime\n"
        "import sys\n"
        "rt = Runtime()\n"
        "print(type(rt.engine.sink).__name__, 'opentelemetry' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["method", "False"], done.stderr
    assert LiveSpans.__name__ not in done.stdout
