"""``dry_run`` is a declared event kind, and every reader of a trace tells a dry run from a call
that ran: the timeline, the OpenTelemetry spans, the JSON Lines round trip and every store."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from typer.testing import CliRunner

from actionspace import Runtime
from actionspace.trace import EVENT_KINDS
from actionspace.trace.cli import trace_app
from actionspace.trace.events import TraceEvent
from actionspace.trace.export import export_jsonl, import_jsonl
from actionspace.trace.memory import MemoryTraceStore
from actionspace.trace.otel import export_run
from actionspace.trace.render import event_outcome, summarize_event
from actionspace.trace.replay import replay_events
from actionspace.trace.sqlite import SqliteTraceStore


def _runtime(url: str = "memory://") -> Runtime:
    rt = Runtime(url, recover_on_start=False)

    @rt.tool(effect="write", writes=["file:{name}"])
    def put(name: str) -> dict[str, Any]:
        """Write a file."""
        return {"written": name}

    def preview(name: str) -> dict[str, Any]:
        return {"would_delete": name}

    @rt.tool(effect="write", writes=["file:{name}"], preview=preview)
    def drop(name: str) -> dict[str, Any]:
        """Delete a file."""
        return {"deleted": name}

    return rt


def _dry_then_real(rt: Runtime, run_id: str) -> list[TraceEvent]:
    rt.new_run(run_id)
    rt.call({"id": "c1", "name": "put", "arguments": {"name": "a"}}, run_id=run_id, dry_run=True)
    rt.call({"id": "c1", "name": "put", "arguments": {"name": "a"}}, run_id=run_id)
    rt.call({"id": "c2", "name": "drop", "arguments": {"name": "a"}}, run_id=run_id, dry_run=True)
    rt.finish(run_id)
    return rt.trace.events(run_id)


@pytest.fixture
def recorded() -> Iterator[tuple[Runtime, list[TraceEvent]]]:
    rt = _runtime()
    try:
        yield rt, _dry_then_real(rt, "dry")
    finally:
        rt.close()


def test_a_dry_run_records_only_declared_kinds(recorded: tuple[Runtime, list[TraceEvent]]) -> None:
    _, events = recorded
    kinds = [e.kind for e in events]
    assert "dry_run" in kinds
    assert set(kinds) <= set(EVENT_KINDS), f"undeclared: {sorted(set(kinds) - set(EVENT_KINDS))}"


def test_the_timeline_says_a_dry_run_dispatched_nothing(recorded: tuple[Runtime, list[TraceEvent]]) -> None:
    _, events = recorded
    described, previewed = [e for e in events if e.kind == "dry_run"]
    line = summarize_event(described)
    assert "put@1" in line and "not dispatched" in line and "no preview" in line
    assert event_outcome(described) == "info"
    line = summarize_event(previewed)
    assert "drop@1" in line and "not dispatched" in line and "no preview" not in line


def test_a_hostile_dry_run_payload_renders_on_one_line() -> None:
    odd = TraceEvent(run_id="r", seq=1, kind="dry_run", ts=0.0, data={"tool": ["x"] * 50, "preview": "yes\n"})
    line = summarize_event(odd)
    assert "\n" not in line and len(line) <= 160


def test_trace_show_lists_the_dry_run(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/t.db"
    rt = _runtime(url)
    try:
        _dry_then_real(rt, "shown")
    finally:
        rt.close()
    result = CliRunner().invoke(trace_app, ["show", "shown", "--store", url, "--json"])
    assert result.exit_code == 0, result.output
    assert '"dry_run"' in result.output


def test_the_span_of_a_dry_run_says_so_and_the_real_call_does_not(
    recorded: tuple[Runtime, list[TraceEvent]],
) -> None:
    rt, _ = recorded
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    try:
        export_run(rt.trace, "dry", tracer_provider=provider)
    finally:
        provider.shutdown()
    calls = [s for s in exporter.get_finished_spans() if s.name.startswith("execute_tool")]
    assert len(calls) == 3
    dry, real, previewed = sorted(calls, key=lambda s: s.start_time or 0)
    assert dry.attributes is not None and dry.attributes.get("actionspace.dry_run") is True
    assert real.attributes is not None and "actionspace.dry_run" not in real.attributes
    assert "actionspace.idempotency_key" in real.attributes
    assert (
        previewed.attributes is not None and previewed.attributes.get("actionspace.dry_run.preview") is True
    )


def test_a_dry_run_survives_export_and_import_into_every_store(
    recorded: tuple[Runtime, list[TraceEvent]], tmp_path: Path
) -> None:
    _, events = recorded
    out = io.StringIO()
    source = MemoryTraceStore()
    source.append_many(events)
    export_jsonl(source, out, run_id="dry")
    for store in (MemoryTraceStore(), SqliteTraceStore(tmp_path / "imported.db")):
        try:
            import_jsonl(store, out.getvalue().splitlines())
            back = store.events("dry")
        finally:
            store.close()
        assert [(e.seq, e.kind, e.call_id, dict(e.data)) for e in back] == [
            (e.seq, e.kind, e.call_id, json.loads(json.dumps(e.data))) for e in events
        ]


def test_a_replay_of_a_run_with_a_dry_run_reproduces_every_decision(
    recorded: tuple[Runtime, list[TraceEvent]],
) -> None:
    _, events = recorded
    fresh = _runtime()
    try:
        replayed = replay_events("dry", events, fresh)
    finally:
        fresh.close()
    assert replayed.problems == ()
    assert all(d.recorded == d.replayed for d in replayed.decisions)
