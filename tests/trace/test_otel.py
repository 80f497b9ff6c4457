"""OpenTelemetry export of runs as GenAI semantic-convention spans."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from actionspace import Runtime
from actionspace.trace.events import TraceEvent
from actionspace.trace.memory import MemoryTraceStore
from actionspace.trace.otel import TRACER_NAME, export_run, export_runs


def _call(name: str, args: dict[str, Any], call_id: str) -> str:
    return json.dumps(
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
    )


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield tracer_provider
    tracer_provider.shutdown()


@pytest.fixture
def rt() -> Runtime:
    runtime = Runtime("memory://")

    @runtime.tool(effect="none")
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @runtime.tool(effect="write")
    def boom(x: int) -> int:
        """Always fails."""
        raise RuntimeError(f"tool broke on {x}")

    return runtime


@pytest.fixture
def run(rt: Runtime) -> str:
    """One run: an ok call, a call rejected for its arguments, and a call whose tool raises."""
    run_id = rt.new_run()
    assert rt.call(_call("add", {"a": 1, "b": 2}, "c1"), run_id=run_id).status == "ok"
    rejected = rt.call(_call("add", {"a": "x"}, "c2"), run_id=run_id)
    assert rejected.error is not None and rejected.error.category == "invalid_arguments"
    assert rt.call(_call("boom", {"x": 1}, "c3"), run_id=run_id).status == "error"
    rt.finish(run_id)
    return run_id


def _exported(
    rt: Runtime, run_id: str, provider: TracerProvider, exporter: InMemorySpanExporter
) -> list[ReadableSpan]:
    assert export_run(rt.trace, run_id, tracer_provider=provider) == 4
    return list(exporter.get_finished_spans())


def _by_call(spans: list[ReadableSpan]) -> dict[str, ReadableSpan]:
    return {str((s.attributes or {})["gen_ai.tool.call.id"]): s for s in spans if s.parent is not None}


def _ns(seconds: float) -> int:
    return round(seconds * 1_000_000_000)


def test_a_run_becomes_an_invoke_agent_span_with_one_execute_tool_child_per_call(
    rt: Runtime, run: str, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    spans = _exported(rt, run, provider, exporter)
    assert [s.name for s in spans] == [
        "execute_tool add",
        "execute_tool add",
        "execute_tool boom",
        "invoke_agent",
    ]
    root = spans[-1]
    assert root.parent is None
    assert root.attributes is not None
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["gen_ai.conversation.id"] == run
    assert root.attributes["actionspace.run.calls"] == 3
    assert root.attributes["actionspace.run.finished"] is True
    assert root.status.status_code is StatusCode.UNSET
    for child in spans[:-1]:
        assert child.parent is not None and root.context is not None and child.context is not None
        assert child.parent.span_id == root.context.span_id
        assert child.context.trace_id == root.context.trace_id
    assert {s.instrumentation_scope.name for s in spans if s.instrumentation_scope} == {TRACER_NAME}


def test_every_tool_span_names_its_tool_call_id_and_type(
    rt: Runtime, run: str, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    calls = _by_call(_exported(rt, run, provider, exporter))
    assert sorted(calls) == ["c1", "c2", "c3"]
    for call_id, span in calls.items():
        attrs = span.attributes or {}
        assert attrs["gen_ai.operation.name"] == "execute_tool"
        assert attrs["gen_ai.tool.type"] == "function"
        assert span.name == "execute_tool " + str(attrs["gen_ai.tool.name"])
        assert attrs["gen_ai.tool.call.id"] == call_id
    assert [(calls[c].attributes or {})["gen_ai.tool.name"] for c in ("c1", "c2", "c3")] == [
        "add",
        "add",
        "boom",
    ]


def test_an_ok_call_has_no_error_type_and_an_unset_status(
    rt: Runtime, run: str, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    ok = _by_call(_exported(rt, run, provider, exporter))["c1"]
    attrs = ok.attributes or {}
    assert "error.type" not in attrs
    assert ok.status.status_code is StatusCode.UNSET
    assert attrs["actionspace.status"] == "ok"
    assert attrs["actionspace.validation.verdict"] == "accepted"
    assert attrs["actionspace.authorization.verdict"] == "allowed"
    assert attrs["actionspace.plan.node_id"] == "n1"
    assert attrs["actionspace.tool.version"] == "1"


def test_a_rejected_call_is_an_error_span_typed_by_its_category(
    rt: Runtime, run: str, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    rejected = _by_call(_exported(rt, run, provider, exporter))["c2"]
    attrs = rejected.attributes or {}
    assert rejected.status.status_code is StatusCode.ERROR
    assert rejected.status.description == "arguments do not match the tool's schema"
    assert attrs["error.type"] == "invalid_arguments"
    assert attrs["actionspace.error.category"] == "invalid_arguments"
    assert attrs["actionspace.error.recovery"] == ("change_arguments",)
    assert attrs["actionspace.validation.verdict"] == "rejected"
    paths = attrs["actionspace.validation.field_paths"]
    assert isinstance(paths, tuple) and sorted(map(str, paths)) == ["/a", "/b"]
    assert "actionspace.plan.node_id" not in attrs  # never dispatched


def test_a_failing_tool_reports_its_error_type_ledger_state_and_idempotency_key(
    rt: Runtime, run: str, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    failed = _by_call(_exported(rt, run, provider, exporter))["c3"]
    attrs = failed.attributes or {}
    assert failed.status.status_code is StatusCode.ERROR
    assert "RuntimeError: tool broke on 1" in (failed.status.description or "")
    assert attrs["error.type"] == "unclassified"
    assert attrs["actionspace.ledger.state"] == "failed"
    key = attrs["actionspace.idempotency_key"]
    ledger = [e for e in rt.trace.events(run) if e.kind == "ledger"]
    assert ledger and all(e.data["key"] == key for e in ledger)


def test_span_times_are_the_trace_event_times_in_nanoseconds(
    rt: Runtime, run: str, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    events = rt.trace.events(run)
    spans = _exported(rt, run, provider, exporter)
    root, calls = spans[-1], _by_call(spans)
    assert (root.start_time, root.end_time) == (_ns(events[0].ts), _ns(events[-1].ts))
    for call_id, span in calls.items():
        own = [e for e in events if e.call_id == call_id]
        parsed = next(e for e in events if e.kind == "parsed" and e.data["calls"][0]["id"] == call_id)
        assert (span.start_time, span.end_time) == (_ns(parsed.ts), _ns(own[-1].ts))
        assert [ev.name for ev in span.events] == [f"actionspace.{e.kind}" for e in own]
    starts = [calls[c].start_time or 0 for c in ("c1", "c2", "c3")]
    assert starts == sorted(starts) and starts[0] >= (root.start_time or 0)
    assert max(s.end_time or 0 for s in calls.values()) <= (root.end_time or 0)


def test_raw_model_output_is_not_copied_into_span_events(
    rt: Runtime, run: str, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    root = _exported(rt, run, provider, exporter)[-1]
    outputs = [ev for ev in root.events if ev.name == "actionspace.model_output"]
    assert len(outputs) == 3
    assert all("actionspace.raw" not in (ev.attributes or {}) for ev in outputs)


def test_an_unknown_run_exports_no_span(provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    assert export_run(MemoryTraceStore(), "nope", tracer_provider=provider) == 0
    assert exporter.get_finished_spans() == ()


def test_export_runs_exports_every_stored_run_by_default(
    rt: Runtime, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    first, second = rt.new_run("run-a"), rt.new_run("run-b")
    rt.call(_call("add", {"a": 1, "b": 1}, "c1"), run_id=first)
    rt.call(_call("add", {"a": 2, "b": 2}, "c1"), run_id=second)
    assert export_runs(rt.trace, tracer_provider=provider) == 4
    roots = [s for s in exporter.get_finished_spans() if s.parent is None]
    assert [(r.attributes or {})["gen_ai.conversation.id"] for r in roots] == ["run-a", "run-b"]
    exporter.clear()
    assert export_runs(rt.trace, ["run-b", "missing"], tracer_provider=provider) == 2


def test_a_call_id_reused_in_a_later_turn_becomes_a_second_span(
    rt: Runtime, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    run_id = rt.new_run()
    rt.call(_call("add", {"a": 1, "b": 2}, "call_1"), run_id=run_id)
    rt.call(_call("boom", {"x": 2}, "call_1"), run_id=run_id)
    assert export_run(rt.trace, run_id, tracer_provider=provider) == 3
    names = [s.name for s in exporter.get_finished_spans()]
    assert names == ["execute_tool add", "execute_tool boom", "invoke_agent"]


def test_trimming_rule_and_a_failed_run_status_are_exported(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    store = MemoryTraceStore()
    trimming = {"rule": "head_items", "rule_version": "3", "kept": 10, "total": 400}
    store.append_many(
        [
            TraceEvent(run_id="r", seq=0, kind="run_started", ts=10.0, data={"principal": "p"}),
            TraceEvent(run_id="r", seq=1, kind="validated", ts=10.5, call_id="k", data={"tool": "ls"}),
            TraceEvent(
                run_id="r",
                seq=2,
                kind="observation",
                ts=11.0,
                call_id="k",
                data={"status": "ok", "tool": "ls", "trimming": trimming},
            ),
            TraceEvent(run_id="r", seq=3, kind="run_finished", ts=12.0, data={"status": "budget_exhausted"}),
        ]
    )
    assert export_run(store, "r", tracer_provider=provider) == 2
    tool_span, root = exporter.get_finished_spans()
    attrs = tool_span.attributes or {}
    assert (attrs["actionspace.trimming.rule"], attrs["actionspace.trimming.rule_version"]) == (
        "head_items",
        "3",
    )
    assert (tool_span.start_time, tool_span.end_time) == (10_500_000_000, 11_000_000_000)
    assert root.status.status_code is StatusCode.ERROR
    assert (root.attributes or {})["error.type"] == "budget_exhausted"
    assert (root.attributes or {})["actionspace.principal"] == "p"
