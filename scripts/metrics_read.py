"""Time ``GET /api/metrics`` over a SQLite store of many runs, old code against new, in alternation.

``python scripts/metrics_read.py build FILE [RUNS]`` writes a store of RUNS runs (default 10,000;
three calls each, two tenants taking turns);
``python scripts/metrics_read.py time FILE [ROUNDS] [admin|tenant]`` answers
``/api/metrics?max_runs=10000`` for that token (default a tenant's, which holds half the runs) and
prints the wall and CPU seconds of each answer. Run ``time`` with the code under test
and with ``PYTHONPATH`` naming another checkout's ``src``, in turns (CPU seconds are the figure
to compare on a loaded machine).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from actionspace import Principal, Runtime
from actionspace.trace.events import TraceEvent
from actionspace.types import ToolCall


def build(path: Path, runs: int) -> None:
    rt = Runtime(f"sqlite:///{path}", principal=Principal(id="svc", scopes=("*",)), recover_on_start=False)

    @rt.tool(effect="read")
    def lookup(city: str) -> dict[str, str]:
        """Weather of a city.

        Args:
            city: City name.
        """
        return {"city": city, "sky": "clear"}

    models = {}
    for tenant in ("t1", "t2"):
        run = rt.new_run(f"model_{tenant}", principal=Principal(id="agent", tenant=tenant, scopes=("*",)))
        for n, city in enumerate(("Oslo", "Lima", 7)):
            rt.call(ToolCall(name="lookup", arguments={"city": city}), run_id=run, node_id=f"n{n}")
        rt.finish(run)
        models[tenant] = rt.trace.events(run)
    batch: list[TraceEvent] = []
    now = time.time()
    for n in range(runs):
        model = models["t1" if n % 2 else "t2"]
        run_id = f"run_{n:06d}"
        batch += [
            TraceEvent(
                run_id=run_id, seq=e.seq, kind=e.kind, ts=now - runs + n, data=e.data, call_id=e.call_id
            )
            for e in model
        ]
        if len(batch) > 5000:
            rt.trace.append_many(batch)
            batch = []
    rt.trace.append_many(batch)
    rt.close()


def answer_times(path: Path, rounds: int, token: str) -> None:
    from fastapi.testclient import TestClient

    from actionspace.service import create_app

    tokens = {
        "admin": Principal(id="admin", scopes=("*",)),
        "tenant": Principal(id="reader", tenant="t1", scopes=("metrics:read",)),
    }
    rt = Runtime(f"sqlite:///{path}", principal=Principal(id="svc", scopes=("*",)), recover_on_start=False)
    app = create_app(rt, tokens=tokens)
    client = TestClient(app)
    for _ in range(rounds):
        app.state.metrics.__init__()  # no answer kept from the round before
        wall, cpu = time.perf_counter(), time.process_time()
        got = client.get("/api/metrics?max_runs=10000", headers={"Authorization": f"Bearer {token}"})
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        assert got.status_code == 200, got.text
        print(token, "wall_s", round(wall, 3), "cpu_s", round(cpu, 3), "runs", got.json()["runs"], flush=True)
    app.state.runner.close()
    rt.close()


if __name__ == "__main__":
    if sys.argv[1] == "build":
        build(Path(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 10_000)
    else:
        token = sys.argv[4] if len(sys.argv) > 4 else "tenant"
        answer_times(Path(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 1, token)
