"""An event whose ``label`` mark is no label (a trace imported from elsewhere) is shown as the most
restricted data, never raised on: the read views, the ledger listing, the CLI and the exporter."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from typer.testing import CliRunner

from actionspace import Principal, Runtime
from actionspace.policy.labels import Label, may_read
from actionspace.policy.redaction import REDACTED, redact_event
from actionspace.service import create_app
from actionspace.trace.cli import trace_app
from actionspace.trace.export import import_jsonl
from actionspace.trace.otel import export_run
from actionspace.trace.redact_ledger import hidden_runs

SECRET = "hunter2-w36-mark"
OUTSIDER = Principal(id="bob", scopes=("runs:read", "ledger:read"))
CLEARED = Principal(id="ops", scopes=("runs:read", "ledger:read", "labels:secret"))
HOSTILE_MARKS: list[Any] = [
    {"readers": 5},
    {"readers": "bob"},
    {"readers": [{"id": "bob"}]},
    {"confidentiality": ["secret"]},
    {"confidentiality": "SECRET"},
    {"confidentiality": None},
    {"integrity": 7},
    "secret",
    ["secret"],
    None,
    3,
]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=3),
    max_leaves=8,
)
label_like = st.fixed_dictionaries(
    {},
    optional={
        "confidentiality": st.sampled_from(["public", "internal", "secret", "SECRET", ""]) | json_values,
        "integrity": st.sampled_from(["trusted", "untrusted"]) | json_values,
        "readers": st.none() | st.lists(st.sampled_from(["bob", "alice"]), max_size=2) | json_values,
    },
)


def _valid(mark: Any) -> Label | None:
    """The label a well-formed mark names (confidentiality and integrity known, readers ids)."""
    if not isinstance(mark, Mapping):
        return None
    readers = mark.get("readers")
    if readers is not None and not (isinstance(readers, list) and all(isinstance(r, str) for r in readers)):
        return None
    if mark.get("confidentiality", "public") not in ("public", "internal", "secret"):
        return None
    if mark.get("integrity", "trusted") not in ("trusted", "untrusted"):
        return None
    return Label.from_dict(mark)


@settings(max_examples=400, deadline=None)
@given(mark=label_like | json_values, viewer=st.sampled_from([None, OUTSIDER, CLEARED]))
def test_a_mark_shows_its_values_only_when_it_is_a_label_the_viewer_may_read(
    mark: Any, viewer: Principal | None
) -> None:
    shown = redact_event({"label": mark, "message": SECRET, "tool": "t"}, viewer)
    label = _valid(mark)
    readable = may_read(label, viewer) if label is not None else viewer is CLEARED
    assert shown["message"] == (SECRET if readable else REDACTED)
    assert shown["tool"] == "t"


def _hostile_store(rt: Runtime, run: str, mark: Any) -> None:
    lines = [
        {
            "run_id": run,
            "seq": 0,
            "kind": "run_started",
            "ts": 1.0,
            "call_id": None,
            "data": {"principal": "p"},
        },
        {
            "run_id": run,
            "seq": 1,
            "kind": "observation",
            "ts": 2.0,
            "call_id": f"{run}:c1",
            "data": {
                "status": "error",
                "tool": "t",
                "category": "permanent",
                "message": SECRET,
                "label": mark,
            },
        },
    ]
    import_jsonl(rt.trace, io.StringIO("\n".join(json.dumps(line) for line in lines)))


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield tracer_provider
    tracer_provider.shutdown()


@pytest.mark.parametrize("mark", HOSTILE_MARKS, ids=repr)
def test_exporting_a_run_with_a_hostile_mark_emits_its_spans_without_the_value(
    mark: Any, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    rt = Runtime("memory://", recover_on_start=False)
    _hostile_store(rt, "run_hostile", mark)
    assert export_run(rt.trace, "run_hostile", tracer_provider=provider) == 2
    [span] = [s for s in exporter.get_finished_spans() if s.name == "execute_tool t"]
    assert (span.attributes or {})["error.type"] == "permanent"
    assert SECRET not in json.dumps(
        [span.status.description, [dict(e.attributes or {}) for e in span.events]]
    )


def test_the_api_answers_runs_events_and_ledger_of_hostile_marks_redacted() -> None:
    rt = Runtime("memory://", recover_on_start=False)
    runs = [f"run_hostile_{i}" for i in range(len(HOSTILE_MARKS))]
    for run, mark in zip(runs, HOSTILE_MARKS, strict=True):
        _hostile_store(rt, run, mark)
    assert hidden_runs(rt.trace, runs, OUTSIDER) == set(runs)
    assert hidden_runs(rt.trace, runs, CLEARED) == set()
    app = create_app(rt, tokens={"bob": OUTSIDER, "ops": CLEARED})
    try:
        with TestClient(app) as client:
            for token, sees in (("bob", False), ("ops", True)):
                auth = {"Authorization": f"Bearer {token}"}
                listed = client.get("/api/runs", headers=auth)
                assert listed.status_code == 200, listed.text
                assert client.get("/api/ledger", headers=auth).status_code == 200
                for run in runs:
                    answer = client.get(f"/api/runs/{run}/events", headers=auth)
                    assert answer.status_code == 200, (run, answer.text)
                    assert (SECRET in answer.text) is sees
                    assert client.get(f"/api/runs/{run}", headers=auth).status_code == 200
    finally:
        app.state.runner.close()
        rt.close()


@pytest.mark.parametrize("mark", [{"readers": 5}, {"confidentiality": ["secret"]}, "secret"], ids=repr)
def test_trace_show_prints_a_run_with_a_hostile_mark_redacted(mark: Any, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'trace.db'}"
    rt = Runtime(url, recover_on_start=False)
    _hostile_store(rt, "run_hostile", mark)
    rt.close()
    for extra in ((), ("--json",)):
        shown = CliRunner().invoke(trace_app, ["show", "run_hostile", "--store", url, *extra])
        assert shown.exit_code == 0, shown.output
        assert SECRET not in shown.stdout and "permanent" in shown.stdout
