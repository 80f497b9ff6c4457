"""How soon a killed worker's plan moves on, and that a claimed worker still alive is waited for."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from actionspace.durable import DurableConfig, PlanClient
from actionspace.durable import sweep_tools as tools
from actionspace.durable.executors import Heartbeat
from actionspace.durable.sweep import WORKER_START_S, Workers
from tests.durable import crash_tools

TOOLS = "tests.durable.crash_tools:register"
DEAD_AFTER_S = 2.0
TAKEOVER_S = 7.0
"""A killed worker's interrupted node is settled by another this soon after the kill: the claim
(``DEAD_AFTER_S`` of silence, a heartbeat late at most) and the rest of the plan. Before a claim
stopped counting as a heartbeat, it took the 10 s guard more (about 12 s)."""


def _node(run_id: str, k: str, tool: str, value: Any) -> dict[str, Any]:
    return {"id": k, "tool": tool, "arguments": {"ref": f"{run_id}/{k}", "value": value}}


def _clean(prefix: str, nodes: str) -> str:
    return next(
        f"{prefix}{i}" for i in range(10_000) if not any(tools.fault(f"{prefix}{i}/{k}") for k in nodes)
    )


@pytest.mark.slow
def test_a_killed_workers_interrupted_node_is_settled_by_another_soon_after_the_claim(
    store: str, tmp_path: Path
) -> None:
    crash_tools.prepare(store)
    run_id = _clean(f"t3-takeover-{uuid.uuid4().hex[:4]}-", "ac")
    plan = {
        "nodes": [
            _node(run_id, "a", "native_write", 1),
            _node(run_id, "q", "crash_query", 10),  # stores its effect, then its worker dies
            _node(run_id, "c", "native_write", {"$ref": "q.data.value"}),
        ]
    }
    pool = Workers(
        store, 2, schema=f"dbos_{uuid.uuid4().hex[:8]}", concurrency=4, dead_after_s=DEAD_AFTER_S,
        logs=tmp_path, tools=TOOLS,
    )  # fmt: skip
    try:
        pool.wait_live(2, WORKER_START_S)
        with PlanClient(store, config=DurableConfig(system_schema=pool.schema)) as client:
            client.submit(plan, run_id=run_id)
            end = time.monotonic() + 60.0
            while all(p.poll() is None for p in pool.procs) and time.monotonic() < end:
                time.sleep(0.02)
            killed_at = time.monotonic()
            result = client.result(run_id)
            took_s = time.monotonic() - killed_at
        exits = [p.returncode for p in pool.procs if p.poll() is not None]
    finally:
        pool.stop()
    assert exits == [-9]
    assert result.status == "ok"
    assert {k: o.data["value"] for k, o in result.nodes.items()} == {"a": 2, "q": 11, "c": 12}
    assert took_s < TAKEOVER_S, f"the plan was finished {took_s:.1f} s after the kill"


# ---------------------------------------------------------------------- liveness of a claimed executor
@pytest.fixture
def beats(store: str) -> Iterator[list[Heartbeat]]:
    made: list[Heartbeat] = []
    yield made
    for hb in made:
        hb.stop(hand_over=False)


def _heartbeat(store: str, made: list[Heartbeat], executor_id: str) -> Heartbeat:
    hb = Heartbeat(store, executor_id, every_s=0.05, dead_after_s=0.5, recover=lambda _: 0)
    made.append(hb)
    hb.open()
    return hb


def _claim(store: str, executor_id: str) -> None:
    """What a claimant's heartbeat does to a silent executor: the lease, and then ``gone``."""
    with psycopg.connect(store, autocommit=True) as conn:
        conn.execute(
            "UPDATE actionspace_executors SET state = 'recovering', beat_at = %s WHERE executor_id = %s",
            (time.time(), executor_id),
        )


def test_a_claimed_executor_whose_process_is_gone_is_not_alive_at_once(
    store: str, beats: list[Heartbeat]
) -> None:
    watcher = _heartbeat(store, beats, "t3-watcher")
    dead = _heartbeat(store, beats, "t3-dead")
    assert watcher.is_alive("t3-dead", within_s=10.0)
    dead.stop(hand_over=False)  # its sessions end, as a killed process's do
    assert watcher.is_alive("t3-dead", within_s=10.0)  # not claimed yet: its last beat counts
    _claim(store, "t3-dead")
    assert not watcher.is_alive("t3-dead", within_s=10.0)


def test_a_claimed_executor_whose_process_still_runs_stays_alive_for_the_guard(
    store: str, beats: list[Heartbeat]
) -> None:
    watcher = _heartbeat(store, beats, "t3-watcher")
    _heartbeat(store, beats, "t3-paused")  # registered, never beating: a paused process
    _claim(store, "t3-paused")
    assert watcher.is_alive("t3-paused", within_s=10.0)
    assert not watcher.is_alive("t3-unknown", within_s=10.0)


def test_two_executors_claiming_each_other_leave_the_watcher_reading_both_as_their_sessions_say(
    store: str, beats: list[Heartbeat]
) -> None:
    watcher = _heartbeat(store, beats, "t3-w")
    ids = [f"t3-x{i}" for i in range(4)]
    made = [_heartbeat(store, beats, i) for i in ids]
    made[1].stop(hand_over=False)
    made[3].stop(hand_over=False)
    threads = [threading.Thread(target=_claim, args=(store, i)) for i in ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [watcher.is_alive(i, within_s=10.0) for i in ids] == [True, False, True, False]
