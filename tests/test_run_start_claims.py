"""``POST /api/runs`` with a run id accepts it once even when two service processes (two runtimes
with stores of their own on one SQLite file or one PostgreSQL database) start it at one moment."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from actionspace import Runtime
from actionspace.service import RunnerConfig, create_app
from actionspace.trace.events import TraceStore
from tests.pg import fresh_schema
from tests.service.apptools import TOKENS, World, bearer, build_runtime

AGENT = bearer("agent-token")


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'shared.db'}"
    else:
        yield from fresh_schema(request.getfixturevalue("pg_url"))


def _hold_after_free(store: TraceStore, run_id: str, checked: threading.Barrier) -> None:
    """Make ``store.next_seq`` wait, once it found ``run_id`` free, until the other service did too."""
    original = store.next_seq

    def next_seq(asked: str) -> int:
        seq = original(asked)
        if asked == run_id and seq == 0:
            with contextlib.suppress(threading.BrokenBarrierError):
                checked.wait()
        return seq

    store.next_seq = next_seq  # type: ignore[method-assign,assignment]


def test_two_services_on_one_store_starting_one_run_id_accept_it_once(url: str) -> None:
    checked = threading.Barrier(2, timeout=1.0)
    with ExitStack() as stack:
        services: list[tuple[Runtime, FastAPI, TestClient]] = []
        for _ in range(2):
            rt, _approvals = build_runtime(World(), url)
            stack.callback(rt.close)
            app = create_app(rt, tokens=TOKENS, runner=RunnerConfig(approval_poll_s=0.05))
            stack.callback(app.state.runner.close)
            client = stack.enter_context(TestClient(app, raise_server_exceptions=False))
            _hold_after_free(rt.trace, "shared", checked)
            services.append((rt, app, client))
        body = {"calls": [{"name": "lookup", "arguments": {"city": "Oslo"}}], "run_id": "shared"}
        statuses: dict[int, int] = {}

        def start(index: int) -> None:
            statuses[index] = services[index][2].post("/api/runs", json=body, headers=AGENT).status_code

        threads = [threading.Thread(target=start, args=(i,)) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert sorted(statuses.values()) == [202, 409]
        winner = next(i for i, status in statuses.items() if status == 202)
        rt, app, _ = services[winner]
        assert app.state.runner.wait("shared", timeout=10) == "ok"
        kinds = [e.kind for e in rt.trace.events("shared")]
    assert kinds.count("run_started") == 1 and kinds.count("observation") == 1


def test_a_run_id_recorded_by_another_service_is_taken(url: str) -> None:
    with ExitStack() as stack:
        rt, _approvals = build_runtime(World(), url)
        stack.callback(rt.close)
        rt.new_run("elsewhere")
        app = create_app(rt, tokens=TOKENS, runner=RunnerConfig(approval_poll_s=0.05))
        stack.callback(app.state.runner.close)
        client = stack.enter_context(TestClient(app))
        again = client.post("/api/runs", json={"calls": [], "run_id": "elsewhere"}, headers=AGENT)
        fresh = client.post("/api/runs", json={"calls": [], "run_id": "new-one"}, headers=AGENT)
    assert again.status_code == 409 and again.json()["error"]["category"] == "conflict"
    assert fresh.status_code == 202
