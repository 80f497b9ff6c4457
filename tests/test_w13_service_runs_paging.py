"""``GET /api/runs?before=`` pages: passing the last row's ``last_at`` gives the next page, however
many runs are newer than that row. Paging through a store of more than ten thousand runs lists
every run once, in order, the oldest included, for a token that sees all and for one of a tenant."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from actionspace import Principal, Runtime
from actionspace.service import create_app
from actionspace.trace.events import TraceEvent

RUNS = 10_150
BASE = 1_700_000_000.0
TOKENS = {
    "admin-token": Principal(id="admin", scopes=("*",)),
    "t1-token": Principal(id="t1-reader", scopes=("runs:read",), tenant="t1"),
}


def _started(i: int) -> TraceEvent:
    data: dict[str, Any] = {"principal": f"p{i % 7}"}
    if i % 50 == 0:
        data["tenant"] = "t1"  # one run in fifty is the tenant's
    return TraceEvent(run_id=f"run-{i:05d}", seq=0, kind="run_started", ts=BASE + i, data=data)


@contextmanager
def _served(store: str) -> Iterator[TestClient]:
    rt = Runtime(store, recover_on_start=False)
    rt.trace.append_many([_started(i) for i in range(RUNS)])
    app = create_app(rt, tokens=TOKENS)
    try:
        with TestClient(app) as client:
            yield client
    finally:
        app.state.runner.close()
        rt.close()


def _walk(client: TestClient, token: str, limit: int) -> list[str]:
    seen: list[str] = []
    before = None
    for _ in range(RUNS // limit + 3):
        params: dict[str, Any] = {"limit": limit, **({"before": before} if before else {})}
        answer = client.get("/api/runs", params=params, headers={"Authorization": f"Bearer {token}"})
        assert answer.status_code == 200, answer.text
        rows = answer.json()
        if not rows:
            return seen
        seen.extend(row["run_id"] for row in rows)
        before = rows[-1]["last_at"]
    raise AssertionError("the paging did not end")


def test_paging_by_before_lists_every_run_once_past_ten_thousand_newer_runs(tmp_path: Path) -> None:
    with _served(f"sqlite:///{tmp_path / 'runs.db'}") as client:
        newest_first = [f"run-{i:05d}" for i in reversed(range(RUNS))]
        assert _walk(client, "admin-token", 500) == newest_first
        assert _walk(client, "t1-token", 50) == [r for r in newest_first if int(r[4:]) % 50 == 0]


def test_a_page_of_the_memory_store_past_ten_thousand_newer_runs_is_found() -> None:
    with _served("memory://") as client:
        cursor = "2023-11-14T22:13:50Z"  # BASE + 30: the thirty runs before it are older
        answer = client.get(
            "/api/runs", params={"before": cursor}, headers={"Authorization": "Bearer admin-token"}
        )
        assert answer.status_code == 200, answer.text
        assert [row["run_id"] for row in answer.json()] == [f"run-{i:05d}" for i in reversed(range(30))]
