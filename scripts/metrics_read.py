"""Time ``GET /api/metrics`` over a SQLite store of many runs, old code against new, in alternation.

``python scripts/metrics_read.py build FILE [RUNS]`` writes a store of RUNS runs (default 10,000;
three calls each, two tenants taking turns);
``python scripts/metrics_read.py time FILE [ROUNDS] [admin|tenant]`` answers
``/api/metrics?max_runs=10000`` for that token (default a tenant's, which holds half the runs) and
prints the wall and CPU seconds of each answer. Run ``time`` with the code under test
and with ``PYTHONPATH`` naming another checkout's ``src``, in turns (CPU seconds are the figure
to compare on a loaded machine).
``python scripts/metrics_read.py ab FILE [BLOCKS] [admin|tenant]`` answers it in one process with
the runs' events read in one statement (``on``) and run by run (``off``, each run's ``events``),
the order swapped each block, and prints each answer's seconds, then the medians and the blocks
in which ``on`` was lower.
``python scripts/metrics_read.py ab-monitor FILE RUNS BLOCKS [sqlite|postgres]`` does the same for
``monitor`` alone over the file's RUNS newest runs, or over a copy of them in a throwaway PostgreSQL
cluster (``actionspace.pgcluster``).
"""

from __future__ import annotations

import importlib
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


def _one_by_one(store: Any, run_ids: list[str], **_: object) -> Iterator[tuple[str, list[TraceEvent]]]:
    return ((run_id, store.events(run_id)) for run_id in run_ids)


def alternated(path: Path, blocks: int, token: str) -> None:
    """The answer with the batch read on and off, alternated in one process (see the docstring)."""
    from fastapi.testclient import TestClient

    from actionspace.service import create_app

    monitor_module = importlib.import_module("actionspace.evaluation.monitor")
    batch = monitor_module.events_of_runs
    tokens = {
        "admin": Principal(id="admin", scopes=("*",)),
        "tenant": Principal(id="reader", tenant="t1", scopes=("metrics:read",)),
    }
    rt = Runtime(f"sqlite:///{path}", principal=Principal(id="svc", scopes=("*",)), recover_on_start=False)
    app = create_app(rt, tokens=tokens)
    client = TestClient(app)
    seconds: dict[str, list[tuple[float, float]]] = {"on": [], "off": []}
    answers: dict[str, Any] = {}
    for block in range(blocks):
        for variant in ("on", "off") if block % 2 == 0 else ("off", "on"):
            monitor_module.events_of_runs = batch if variant == "on" else _one_by_one
            app.state.metrics.__init__()  # no answer kept from the round before
            wall, cpu = time.perf_counter(), time.process_time()
            got = client.get("/api/metrics?max_runs=10000", headers={"Authorization": f"Bearer {token}"})
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            assert got.status_code == 200, got.text
            answers[variant] = got.json()
            seconds[variant].append((wall, cpu))
            print(block, variant, "wall_s", round(wall, 3), "cpu_s", round(cpu, 3), flush=True)
    monitor_module.events_of_runs = batch
    assert answers["on"] == answers["off"], "the answers differ"
    _medians(seconds, blocks)
    app.state.runner.close()
    rt.close()


def monitor_alternated(path: Path, runs: int, blocks: int, kind: str) -> None:
    """``monitor`` with the batch read on and off, alternated in one process (see the docstring)."""
    from contextlib import ExitStack

    from actionspace.pgcluster import throwaway_cluster
    from actionspace.trace.sqlite import SqliteTraceStore

    monitor_module = importlib.import_module("actionspace.evaluation.monitor")
    batch = monitor_module.events_of_runs
    with ExitStack() as stack:
        source = stack.enter_context(SqliteTraceStore(path))
        ids = [s.run_id for s in source.runs(limit=runs)]
        store: Any = source
        if kind == "postgres":
            from actionspace.trace.postgres import PostgresTraceStore

            store = stack.enter_context(PostgresTraceStore(stack.enter_context(throwaway_cluster("metrics"))))
            events = [e for run_id in ids for e in source.events(run_id)]
            for start in range(0, len(events), 5000):
                store.append_many(events[start : start + 5000])
        seconds: dict[str, list[tuple[float, float]]] = {"on": [], "off": []}
        reports: dict[str, Any] = {}
        for block in range(blocks):
            for variant in ("on", "off") if block % 2 == 0 else ("off", "on"):
                monitor_module.events_of_runs = batch if variant == "on" else _one_by_one
                wall, cpu = time.perf_counter(), time.process_time()
                reports[variant] = monitor_module.monitor(store, run_ids=ids).to_dict()
                seconds[variant].append((time.perf_counter() - wall, time.process_time() - cpu))
        monitor_module.events_of_runs = batch
        assert reports["on"] == reports["off"], "the reports differ"
        _medians(seconds, blocks)


def _medians(seconds: dict[str, list[tuple[float, float]]], blocks: int) -> None:
    for n, what in enumerate(("wall_s", "cpu_s")):
        on = [s[n] for s in seconds["on"]]
        off = [s[n] for s in seconds["off"]]
        lower = sum(a < b for a, b in zip(on, off, strict=True))
        print(
            what,
            "median on",
            round(statistics.median(on), 3),
            "off",
            round(statistics.median(off), 3),
            "on lower in",
            lower,
            "of",
            blocks,
        )


if __name__ == "__main__":
    if sys.argv[1] == "ab-monitor":
        monitor_alternated(
            Path(sys.argv[2]),
            int(sys.argv[3]),
            int(sys.argv[4]),
            sys.argv[5] if len(sys.argv) > 5 else "sqlite",
        )
    elif sys.argv[1] == "ab":
        alternated(
            Path(sys.argv[2]),
            int(sys.argv[3]) if len(sys.argv) > 3 else 4,
            sys.argv[4] if len(sys.argv) > 4 else "admin",
        )
    elif sys.argv[1] == "build":
        build(Path(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 10_000)
    else:
        token = sys.argv[4] if len(sys.argv) > 4 else "tenant"
        answer_times(Path(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 1, token)
