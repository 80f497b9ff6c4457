"""Another tenant's run is refused on what names its tenant alone, never read whole.

A 404 for another tenant's run must cost what a 404 for no run costs: reading its every event
first would let a client make the server read any run it can name (the run id namespace is shared,
and a 409 tells an id exists), and would tell by the time taken how large another tenant's run is.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from actionspace import Principal
from tests.service.apptools import TOKENS, bearer, served

_TOKENS = {
    **TOKENS,
    "tenant-a": Principal(id="ann", tenant="a", scopes=("runs:*", "read:*")),
    "tenant-b": Principal(id="bob", tenant="b", scopes=("runs:*", "read:*")),
}


@pytest.mark.parametrize("route", ["/api/runs/{run}", "/api/runs/{run}/events"])
def test_another_tenants_run_is_answered_404_without_reading_its_events(route: str, tmp_path: Path) -> None:
    """On SQLite, whose trace reads a run's head events alone (PostgreSQL's reads them all)."""
    with served(f"sqlite:///{tmp_path / 's.db'}", tokens=_TOKENS) as (_client, rt, _world, _signalling, app):
        client = TestClient(app, raise_server_exceptions=False)
        calls = [{"name": "lookup", "arguments": {"city": f"c{n}"}} for n in range(20)]
        started = client.post(
            "/api/runs", headers=bearer("tenant-a"), json={"run_id": "a_big", "calls": calls}
        )
        assert started.status_code == 202
        assert app.state.runner.wait("a_big", timeout=30) == "ok"
        read: Counter[str] = Counter()
        real = rt.trace.events

        def counted(run_id: str, *args: Any, **kwargs: Any) -> Any:
            read[run_id] += 1
            return real(run_id, *args, **kwargs)

        rt.trace.events = counted  # type: ignore[method-assign]
        try:
            foreign = client.get(route.format(run="a_big"), headers=bearer("tenant-b"))
            missing = client.get(route.format(run="no_such_run"), headers=bearer("tenant-b"))
            own = client.get(route.format(run="a_big"), headers=bearer("tenant-a"))
        finally:
            rt.trace.events = real  # type: ignore[method-assign]
        assert foreign.status_code == missing.status_code == 404
        assert foreign.json()["error"]["message"].replace("a_big", "X") == missing.json()["error"][
            "message"
        ].replace("no_such_run", "X")
        assert own.status_code == 200
        assert read["a_big"] == 1, read  # the owner's read only: the other tenant's 404 read no event
