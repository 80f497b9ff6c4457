"""What one ``/api/metrics`` request may cost: how many runs it reads, how often, how many at once.

Each run it reads is read whole; ``max_runs`` went up to 100,000, and every request read again, so
a client (or a dashboard polled by many) could hold a worker thread and the events of 100,000 runs
per request, as often as it asked.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient

from actionspace import Principal
from actionspace.service import RunnerConfig, create_app
from tests.service.apptools import TOKENS, World, bearer, build_runtime

_TOKENS = {
    **TOKENS,
    "t2-reader": Principal(id="reader", tenant="t2", scopes=("metrics:read", "runs:read")),
    "reader2-token": Principal(id="reader2", scopes=("metrics:read",)),
}


@contextmanager
def _app(**options: Any) -> Iterator[tuple[TestClient, FastAPI, Any]]:
    rt, _signalling = build_runtime(World())
    app = create_app(rt, tokens=_TOKENS, runner=RunnerConfig(approval_poll_s=0.02), **options)
    try:
        with TestClient(app, raise_server_exceptions=False) as client:
            yield client, app, rt
    finally:
        app.state.runner.close()
        rt.close()


def _metrics(client: TestClient, token: str, **query: Any) -> Any:
    return client.get("/api/metrics", headers=bearer(token), params=query)


def _lookups(rt: Any, *run_ids: str) -> None:
    for run_id in run_ids:
        assert rt.call({"name": "lookup", "arguments": {"city": "Oslo"}}, run_id=run_id).status == "ok"


def test_a_request_for_more_runs_than_the_service_reads_at_once_is_422_typed() -> None:
    with _app() as (client, app, rt):
        _lookups(rt, "r1")
        refused = _metrics(client, "reader-token", max_runs=100_000)
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"]["category"] == "invalid_arguments"
        assert _metrics(client, "reader-token", max_runs=10_000).status_code == 200
        spec = app.openapi()["paths"]["/api/metrics"]["get"]["parameters"]
        bound = next(p for p in spec if p["name"] == "max_runs")["schema"]
        assert bound["maximum"] == 10_000
        assert bound["default"] == 1000


def test_the_bound_is_configured_and_the_default_follows_it_down() -> None:
    with _app(metrics_max_runs=2) as (client, _served, rt):
        _lookups(rt, "r1", "r2", "r3")
        assert _metrics(client, "reader-token", max_runs=3).status_code == 422
        answer = _metrics(client, "reader-token")
        assert answer.status_code == 200, answer.text
        assert answer.json()["runs"] == 2  # the newest two: the default is the bound when smaller


def test_an_answer_is_kept_a_few_seconds_for_the_same_principal_and_question_and_never_another() -> None:
    from actionspace.service.metrics_answers import MetricsAnswers

    now = [100.0]
    with _app() as (client, app, rt):
        app.state.metrics = MetricsAnswers(ttl_s=5.0, clock=lambda: now[0])
        _lookups(rt, "r1")
        assert _metrics(client, "reader-token").json()["runs"] == 1
        _lookups(rt, "r2")
        assert _metrics(client, "reader-token").json()["runs"] == 1  # kept: not read again
        assert _metrics(client, "reader-token", max_runs=50).json()["runs"] == 2  # another question
        assert _metrics(client, "reader2-token").json()["runs"] == 2  # another principal: its own
        assert _metrics(client, "t2-reader").json()["runs"] == 0  # another tenant sees none of them
        now[0] += 5.0
        assert _metrics(client, "reader-token").json()["runs"] == 2  # stale: read again


class _SlowTrace:
    """The runtime's trace store, each run's events read only once ``gate`` is set."""

    def __init__(self, inner: Any, gate: threading.Event, reading: threading.Event) -> None:
        self._inner = inner
        self._gate = gate
        self._reading = reading

    def events(self, run_id: str) -> Any:
        self._reading.set()
        assert self._gate.wait(30), "the gate was never opened"
        return self._inner.events(run_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_one_read_at_a_time_per_tenant_the_same_question_waits_another_is_429_other_tenants_go_on() -> None:
    with _app() as (client, _served, rt):
        _lookups(rt, "r1")
        gate, reading = threading.Event(), threading.Event()
        inner = rt.trace
        rt.trace = _SlowTrace(inner, gate, reading)
        answers: dict[str, Any] = {}

        def ask(name: str, token: str, **query: Any) -> threading.Thread:
            thread = threading.Thread(
                target=lambda: answers.__setitem__(name, _metrics(client, token, **query))
            )
            thread.start()
            return thread

        try:
            first = ask("first", "reader-token", max_runs=10)
            assert reading.wait(30)
            same = ask("same", "reader-token", max_runs=10)  # the same question: waits for that read
            refused = _metrics(client, "reader2-token", max_runs=10)  # same tenant, another question
            assert refused.status_code == 429, refused.text
            assert refused.json()["error"]["category"] == "rate_limited"
            assert int(refused.headers["Retry-After"]) >= 1
            other = _metrics(client, "t2-reader", max_runs=11)  # another tenant is not held up
            assert other.status_code == 200, other.text
        finally:
            gate.set()
        first.join(30)
        same.join(30)
        rt.trace = inner
        for name in ("first", "same"):
            assert answers[name].status_code == 200, answers[name].text
            assert answers[name].json()["runs"] == 1
