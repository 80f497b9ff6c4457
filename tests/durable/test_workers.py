"""Worker processes on one PostgreSQL: SIGKILLs at random moments, and approvals across restarts."""

from __future__ import annotations

import random
import uuid
from pathlib import Path

import psycopg
import pytest

from actionspace import Runtime
from actionspace.durable import DurableConfig, PlanClient
from actionspace.durable import sweep_tools as tools
from actionspace.durable.sweep import WORKER_START_S, Workers, make_plan, run_sweep
from tests.durable.support import pending_request

pytestmark = pytest.mark.slow


def test_three_workers_killed_at_random_moments_finish_every_plan_exactly_once(store: str) -> None:
    report = run_sweep(
        store, plans=30, kills=4, workers=3, seed=7, concurrency=8, dead_after_s=5.0, timeout_s=600
    )
    assert 1 <= report.kills <= 4  # the last kills are skipped when every plan is already done
    assert report.completed == 30
    assert report.duplicates == 0
    assert report.lost == 0
    assert report.unreported_ambiguities == 0
    assert report.ran_while_blocked == 0
    assert report.unexpected == []
    assert report.takeovers >= 1  # some killed worker's workflows were taken over by another
    assert report.unknown_commit >= report.injected_none_faults > 0


def test_a_plan_waiting_for_approval_survives_the_restart_of_every_worker(store: str, tmp_path: Path) -> None:
    tools.prepare(store)
    schema = f"dbos_{uuid.uuid4().hex[:8]}"
    run_id = next(
        f"appr{i}" for i in range(10_000) if not any(tools.fault(f"appr{i}/{k}") for k in ("a", "c"))
    )
    plan = {
        "nodes": [
            {"id": "a", "tool": "native_write", "arguments": {"ref": f"{run_id}/a", "value": 1}},
            {
                "id": "b",
                "tool": "approved_write",
                "arguments": {"ref": f"{run_id}/b", "value": {"$ref": "a.data.value"}},
            },
            {
                "id": "c",
                "tool": "query_write",
                "arguments": {"ref": f"{run_id}/c", "value": {"$ref": "b.data.value"}},
            },
        ]
    }
    workers = Workers(
        store,
        2,
        schema=schema,
        concurrency=4,
        dead_after_s=2.0,
        logs=tmp_path,
        extra=["--approval-poll-max", "1"],
    )
    rt = Runtime(store=store, recover_on_start=False)
    try:
        first = workers.wait_live(2, WORKER_START_S)
        with PlanClient(store, config=DurableConfig(system_schema=schema)) as client:
            client.submit(plan, run_id=run_id)
            request = pending_request(rt, run_id, deadline_s=120.0)
            assert request.node_id == "b"
            for i in range(2):  # every worker dies while the plan waits
                workers.kill(i)
            for i in range(2):
                workers.restart(i)
            workers.wait_live(2, WORKER_START_S, exclude=first)
            # still waiting, neither finished nor failed: a restarted worker that takes the plan over
            # puts it back on its queue (ENQUEUED) until it dequeues it again (PENDING)
            assert client.status(run_id) in ("PENDING", "ENQUEUED")
            rt.approvals.approve(request.id, by="alice", reason="checked")  # as the CLI and console do
            result = client.result(run_id)
    finally:
        workers.stop()
        rt.close()
    assert result.status == "ok"
    assert [result.nodes[k].data["value"] for k in "abc"] == [2, 3, 4]
    with psycopg.connect(store) as conn:
        rows = conn.execute("SELECT ref, count(*) FROM sweep_effects GROUP BY ref ORDER BY ref").fetchall()
    assert rows == [(f"{run_id}/a", 1), (f"{run_id}/b", 1), (f"{run_id}/c", 1)]


def test_generated_plans_have_5_to_20_nodes_of_every_kind() -> None:
    rng = random.Random(1)
    plans = [make_plan(f"r{i}", rng) for i in range(50)]
    sizes = [len(p["nodes"]) for p in plans]
    assert min(sizes) >= 5 and max(sizes) <= 20
    used = {n["tool"] for p in plans for n in p["nodes"]}
    assert used == set(tools.TOOLS.values())
