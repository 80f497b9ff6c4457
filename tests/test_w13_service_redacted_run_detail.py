"""``GET /api/runs/{run_id}`` for a token that may not read the run's labels: the run's plan and
counts are structure a redacted view keeps, so the detail answers 200 with them (its values stay
hidden), never a 500; and whatever a recorded ``plan_started`` holds (a trace imported from
elsewhere), the detail still answers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Labels, Principal, Runtime
from actionspace.service import create_app

PASSWORD = "hunter2-correct-horse"
TOKENS = {
    "reader": Principal(id="reader", scopes=("runs:read",)),
    "cleared": Principal(id="cleared", scopes=("runs:read", "labels:secret")),
}


def _runtime() -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="read", labels=Labels(confidentiality="secret"))
    def read_password() -> str:
        """Read the stored password."""
        return PASSWORD

    @rt.tool(effect="none")
    def shout(text: str) -> str:
        """Upper-case a text.

        Args:
            text: Any text.
        """
        return text.upper()

    return rt


@contextmanager
def _client(rt: Runtime) -> Iterator[TestClient]:
    app = create_app(rt, tokens={f"{name}-token": p for name, p in TOKENS.items()})
    try:
        with TestClient(app, raise_server_exceptions=False) as client:
            yield client
    finally:
        app.state.runner.close()
        rt.close()


def _get(client: TestClient, who: str, path: str) -> Any:
    answer = client.get(path, headers={"Authorization": f"Bearer {who}-token"})
    assert answer.status_code == 200, (who, answer.status_code, answer.text)
    return answer.json()


def test_a_plan_started_after_a_secret_read_shows_its_graph_to_a_reader_without_its_values() -> None:
    rt = _runtime()
    run = rt.new_run()
    assert rt.call({"name": "read_password", "arguments": {}}, run_id=run).error is None
    plan = {
        "nodes": [
            {"id": "loud", "tool": "shout", "arguments": {"text": PASSWORD}},
            {"id": "louder", "tool": "shout", "arguments": {"text": "x"}, "depends_on": ["loud"]},
        ]
    }
    assert rt.run_plan(plan, run_id=run).status == "ok"
    with _client(rt) as client:
        shown = _get(client, "reader", f"/api/runs/{run}")
        cleared = _get(client, "cleared", f"/api/runs/{run}")
        listed = {row["run_id"]: row for row in _get(client, "reader", "/api/runs")}
    assert PASSWORD not in json.dumps(shown)
    assert shown["plan"] == cleared["plan"]
    assert [(n["id"], n["status"]) for n in shown["plan"]["nodes"]] == [("loud", "ok"), ("louder", "ok")]
    assert shown["plan"]["edges"] == [["loud", "louder"]]
    # the same counts as the listing shows this reader, and as a cleared reader sees
    counts = ("calls", "errors", "events", "status")
    assert {k: shown[k] for k in counts} == {k: listed[run][k] for k in counts}
    assert {k: shown[k] for k in counts} == {k: cleared[k] for k in counts}


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
_NODE = st.fixed_dictionaries({}, optional={"id": _JSON, "tool": _JSON, "arguments": _JSON})


@settings(
    max_examples=40,
    deadline=timedelta(seconds=60),  # a hang, not a slow machine, is what fails
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    nodes=_JSON | st.lists(_NODE | _JSON, max_size=4),
    edges=_JSON | st.lists(st.lists(_JSON, max_size=3) | _JSON, max_size=4),
    secret=st.booleans(),
)
def test_any_recorded_plan_started_leaves_the_run_detail_answering(
    nodes: Any, edges: Any, secret: bool
) -> None:
    rt = _runtime()
    run = rt.new_run()
    if secret:
        assert rt.call({"name": "read_password", "arguments": {}}, run_id=run).error is None
    rt.record(run, "plan_started", {"nodes": nodes, "edges": edges})
    with _client(rt) as client:
        for who in TOKENS:
            plan = _get(client, who, f"/api/runs/{run}")["plan"]
            assert plan is not None
            assert all(isinstance(n["id"], str) and isinstance(n["tool"], str) for n in plan["nodes"])
            assert all(len(edge) == 2 for edge in plan["edges"])
