"""A plan node fed a secret by ``$ref`` and refused before its flow check (held for approval, its
arguments rejected) records its events marked: no read view, export or span shows its values."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from typer.testing import CliRunner

from actionspace import ActionError, Labels, Plan, Principal, Rejected, Runtime
from actionspace.policy import redact_events
from actionspace.service import create_app
from actionspace.trace.cli import trace_app
from actionspace.trace.otel import export_run
from actionspace.trace.otel_live import instrument

SECRET = "hunter2-w36-node"
OUTSIDER = Principal(id="bob", scopes=("runs:read",))
CLEARED = Principal(id="ops", scopes=("runs:read", "labels:secret"))


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield tracer_provider
    tracer_provider.shutdown()


def _quoting(ctx: Any, args: dict[str, Any]) -> Rejected:
    return Rejected(ActionError.of("invalid_arguments", f"no such account: {args['account']}"))


def _runtime(url: str = "memory://") -> Runtime:
    rt = Runtime(url, recover_on_start=False)

    @rt.tool(effect="read", labels=Labels(confidentiality="secret"))
    def vault(name: str) -> str:
        """Read a stored secret."""
        return SECRET

    @rt.tool(effect="write", requires_approval=True)
    def store_note(text: str) -> str:
        """Write a note a person approves first."""
        return "stored"

    rt.add_tool(
        name="lookup",
        input_schema={"type": "object", "properties": {"account": {"type": "string"}}},
        fn=lambda account: account,
        effect="read",
        validators=(_quoting,),
    )
    return rt


def _plan_run(rt: Runtime) -> str:
    run = rt.new_run()
    result = rt.run_plan(
        Plan.from_dict(
            {
                "nodes": [
                    {"id": "pw", "tool": "vault", "arguments": {"name": "db"}},
                    {"id": "note", "tool": "store_note", "arguments": {"text": {"$ref": "pw.data"}}},
                    {"id": "find", "tool": "lookup", "arguments": {"account": {"$ref": "pw.data"}}},
                ]
            }
        ),
        run_id=run,
    )
    held, refused = result.nodes["note"], result.nodes["find"]
    assert held.error is not None and held.error.category == "needs_approval"
    assert refused.error is not None and SECRET in refused.error.message  # the model gave it: sees it
    return run


def _span_text(span: ReadableSpan) -> str:
    return json.dumps(
        {
            "attributes": dict(span.attributes or {}),
            "status": span.status.description,
            "events": [dict(event.attributes or {}) for event in span.events],
        }
    )


def test_the_events_of_refused_nodes_fed_a_secret_are_redacted_for_a_viewer_not_cleared() -> None:
    rt = _runtime()
    run = _plan_run(rt)
    events = rt.trace.events(run)
    refused = [e for e in events if e.call_id in (f"{run}:note", f"{run}:find")]
    assert {e.kind for e in refused} >= {"proposed", "observation", "validated"}
    assert [e.kind for e in refused if "label" not in e.data] == []
    assert [e.kind for e in redact_events(events, OUTSIDER) if SECRET in str(e.data)] == []
    assert any(SECRET in str(e.data) for e in redact_events(events, CLEARED))


def test_the_runs_api_shows_refused_nodes_fed_a_secret_only_to_a_cleared_token() -> None:
    rt = _runtime()
    run = _plan_run(rt)
    app = create_app(rt, tokens={"bob": OUTSIDER, "ops": CLEARED})
    try:
        with TestClient(app) as client:
            seen = {
                token: client.get(f"/api/runs/{run}/events", headers={"Authorization": f"Bearer {token}"})
                for token in ("bob", "ops")
            }
    finally:
        app.state.runner.close()
        rt.close()
    assert seen["bob"].status_code == seen["ops"].status_code == 200
    assert SECRET not in seen["bob"].text
    assert SECRET in seen["ops"].text


def test_trace_show_redacts_refused_nodes_fed_a_secret(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'trace.db'}"
    rt = _runtime(url)
    run = _plan_run(rt)
    rt.close()
    for extra in ((), ("--json",)):
        shown = CliRunner().invoke(trace_app, ["show", run, "--store", url, *extra], env={"COLUMNS": "300"})
        assert shown.exit_code == 0, shown.output
        assert SECRET not in shown.stdout


def test_spans_of_refused_nodes_fed_a_secret_carry_no_secret_live_or_exported(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    rt = _runtime()
    live = instrument(rt.engine, tracer_provider=provider)
    run = _plan_run(rt)
    assert live.flush()
    live_spans = exporter.get_finished_spans()
    assert {s.name for s in live_spans} == {
        "execute_tool vault",
        "execute_tool store_note",
        "execute_tool lookup",
    }
    exporter.clear()
    assert export_run(rt.trace, run, tracer_provider=provider) == 4
    exported = exporter.get_finished_spans()
    assert [s.name for s in (*live_spans, *exported) if SECRET in _span_text(s)] == []
    refused = next(s for s in exported if s.name == "execute_tool lookup")
    assert (refused.attributes or {})["error.type"] == "invalid_arguments"
