"""``/api/metrics`` reads the runs' events in one statement, not one per run.

An admin's answer over 10,000 runs read each run with ``events(run_id)``: 10,000 statements, each a
query and a decode, most of the answer's time. The monitor now reads them through the store's batch
read (``trace/_runs_events.py``). Held here: the SQL statements reading ``trace_events`` during an
answer are as many for 80 runs as for 5 (counted on every SQLite connection, not timed), and the
answer is the one the run-by-run read gives, for an admin and for a tenant.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from actionspace import Principal, Runtime
from actionspace.service import RunnerConfig, create_app
from actionspace.service.api_catalog import _FieldsAsSeen
from tests.service.test_w90_metrics_scan import _TOKENS, _world


class _Statements:
    """SELECTs naming ``trace_events`` run on every SQLite connection opened meanwhile."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        opened = sqlite3.connect

        def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
            conn: sqlite3.Connection = opened(*args, **kwargs)
            conn.set_trace_callback(self._traced)
            return conn

        monkeypatch.setattr(sqlite3, "connect", connect)

    def _traced(self, sql: str) -> None:
        if "trace_events" in sql and sql.lstrip().upper().startswith("SELECT"):
            self.count += 1


_READ_ONE_BY_ONE: list[int] = []


def _one_by_one(store: _FieldsAsSeen, run_ids: list[str]) -> Iterator[tuple[str, list[Any]]]:
    _READ_ONE_BY_ONE.append(len(run_ids))
    return ((run_id, store.events(run_id)) for run_id in run_ids)


@contextmanager
def _served(path: Path) -> Iterator[tuple[TestClient, Any]]:
    rt = Runtime(f"sqlite:///{path}", principal=Principal(id="svc", scopes=("*",)), recover_on_start=False)
    app = create_app(rt, tokens=_TOKENS, runner=RunnerConfig(resume_orphans=False))
    try:
        yield TestClient(app), app
    finally:
        app.state.runner.close()
        rt.close()


def _answer(client: TestClient, app: Any, token: str, max_runs: int) -> dict[str, Any]:
    app.state.metrics.__init__()  # no answer kept from a request before
    got = client.get(f"/api/metrics?max_runs={max_runs}", headers={"Authorization": f"Bearer {token}"})
    assert got.status_code == 200, got.text
    answer: dict[str, Any] = got.json()
    return answer


@pytest.fixture(scope="module")
def store_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("w91") / "store.db"
    _world(path, quiet=30, busy=60)
    return path


@pytest.mark.parametrize(("token", "few", "many"), [("admin-token", 5, 80), ("quiet-token", 3, 25)])
def test_an_answers_statements_do_not_grow_with_the_runs_it_reads(
    store_file: Path, monkeypatch: pytest.MonkeyPatch, token: str, few: int, many: int
) -> None:
    counts: list[int] = []
    for max_runs in (few, many):
        with monkeypatch.context() as patched:
            counted = _Statements(patched)
            with _served(store_file) as (client, app):
                counted.count = 0
                answer = _answer(client, app, token, max_runs)
            assert answer["runs"] == max_runs
            counts.append(counted.count)
    assert counts[0] >= 1
    assert counts[1] == counts[0], counts


@pytest.mark.parametrize("token", ["admin-token", "quiet-token", "busy-token"])
def test_the_answer_is_the_run_by_run_one(
    store_file: Path, monkeypatch: pytest.MonkeyPatch, token: str
) -> None:
    with _served(store_file) as (client, app):
        batch = _answer(client, app, token, 1000)
        # the monitor reads each run's events, through the view's ``events``
        monkeypatch.setattr(sys.modules["actionspace.evaluation.monitor"], "events_of_runs", _one_by_one)
        _READ_ONE_BY_ONE.clear()
        one_by_one = _answer(client, app, token, 1000)
        assert len(_READ_ONE_BY_ONE) == 1 and _READ_ONE_BY_ONE[0] >= one_by_one["runs"]
    assert batch == one_by_one
    assert batch["runs"] > 10 and batch["calls"] == 3 * batch["runs"]
    assert any(tool["rejects"] for tool in batch["tools"])  # the call with a field error counted
