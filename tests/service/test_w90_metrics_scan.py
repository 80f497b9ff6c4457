"""``/api/metrics`` for one tenant reads that tenant's runs, not the listing of every tenant's.

The runs a tenant's answer counts were found by reading the newest runs of the whole store, four
times more each read, with each one's head events, until enough of the tenant's were among them: a
quiet tenant behind a busy one had every run of the store read (and read again) per request.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Principal, Runtime
from actionspace.service import RunnerConfig, create_app
from actionspace.trace.events import TraceEvent
from actionspace.types import ToolCall

_TOKENS = {
    "quiet-token": Principal(id="reader", tenant="quiet", scopes=("metrics:read",)),
    "busy-token": Principal(id="reader", tenant="busy", scopes=("metrics:read",)),
    "admin-token": Principal(id="admin", scopes=("*",)),
}


_BASE = time.time() - 10_000


class _Counted:
    """Counts the rows the trace store's listings and head reads return (the rows a request reads)."""

    def __init__(self, store: Any) -> None:
        self.rows: Counter[str] = Counter()
        for name in ("runs", "runs_after", "tenant_runs", "heads_many"):
            if hasattr(store, name):
                setattr(store, name, self._counting(name, getattr(store, name)))

    def _counting(self, name: str, read: Any) -> Any:
        def counted(*args: Any, **kwargs: Any) -> Any:
            found = read(*args, **kwargs)
            self.rows[name] += len(found)
            return found

        return counted


def _world(path: Path, quiet: int, busy: int, base: float = _BASE) -> None:
    """``quiet`` runs of tenant quiet, then ``busy`` newer runs of tenant busy, at ``base`` + their
    number in seconds (and each tenant's first run, now): three calls each."""
    rt = Runtime(f"sqlite:///{path}", principal=Principal(id="svc", scopes=("*",)), recover_on_start=False)

    @rt.tool(effect="read")
    def lookup(city: str) -> dict[str, str]:
        """Weather of a city.

        Args:
            city: City name.
        """
        return {"city": city}

    models = {}
    for tenant in ("quiet", "busy"):
        run = rt.new_run(f"model_{tenant}", principal=Principal(id="agent", tenant=tenant, scopes=("*",)))
        for n, city in enumerate(("Oslo", "Lima", 7)):
            rt.call(ToolCall(name="lookup", arguments={"city": city}), run_id=run, node_id=f"n{n}")
        rt.finish(run)
        models[tenant] = rt.trace.events(run)
    events = []
    for n, tenant in enumerate(["quiet"] * quiet + ["busy"] * busy):
        run_id = f"{tenant}_{n:05d}"
        events += [
            TraceEvent(run_id=run_id, seq=e.seq, kind=e.kind, ts=base + n, data=e.data, call_id=e.call_id)
            for e in models[tenant]
        ]
    rt.trace.append_many(events)
    rt.close()


@contextmanager
def _served(path: Path) -> Iterator[tuple[TestClient, _Counted]]:
    rt = Runtime(f"sqlite:///{path}", principal=Principal(id="svc", scopes=("*",)), recover_on_start=False)
    app = create_app(rt, tokens=_TOKENS, runner=RunnerConfig(resume_orphans=False))
    counted = _Counted(rt.trace)
    try:
        yield TestClient(app), counted
    finally:
        app.state.runner.close()
        rt.close()


def _metrics(client: TestClient, token: str, query: str = "") -> dict[str, Any]:
    got = client.get(f"/api/metrics{query}", headers={"Authorization": f"Bearer {token}"})
    assert got.status_code == 200, got.text
    answer: dict[str, Any] = got.json()
    return answer


def test_a_quiet_tenants_metrics_read_its_own_runs_however_many_newer_runs_another_has(
    tmp_path: Path,
) -> None:
    _world(tmp_path / "store.db", quiet=12, busy=3000)
    with _served(tmp_path / "store.db") as (client, counted):
        answer = _metrics(client, "quiet-token", "?max_runs=1000")
        assert answer["runs"] == 13 and answer["calls"] == 39  # its model run and 12 more, 3 calls each
        # the rows listed and the heads read are the tenant's own (a page of them), not the store's
        assert sum(counted.rows.values()) <= 4 * 13, counted.rows
        counted.rows.clear()
        busy = _metrics(client, "busy-token", "?max_runs=100")
        assert busy["runs"] == 100
        assert sum(counted.rows.values()) <= 4 * 100, counted.rows


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    quiet=st.integers(0, 30),
    busy=st.integers(0, 60),
    max_runs=st.integers(1, 40),
    since_back=st.none() | st.integers(0, 100),
)
def test_a_tenants_metrics_count_its_newest_runs_since_a_time_reading_about_a_page_of_rows(
    tmp_path_factory: Any, quiet: int, busy: int, max_runs: int, since_back: int | None
) -> None:
    path = tmp_path_factory.mktemp("metrics") / "store.db"
    _world(path, quiet=quiet, busy=busy)
    with _served(path) as (client, counted):
        since = None if since_back is None else int(_BASE) + 1 + quiet + busy - since_back
        query = f"?max_runs={max_runs}" + ("" if since is None else f"&since={since}")
        answer = _metrics(client, "quiet-token", query)
        # the tenant's runs active since then: its first run (now) and the numbered ones
        own = 1 + sum(1 for n in range(quiet) if since is None or _BASE + n >= since)
        assert answer["runs"] == min(max_runs, own)
        assert sum(counted.rows.values()) <= 2 * max_runs + 2, counted.rows
