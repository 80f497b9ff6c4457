"""Workers SIGKILLed at chosen moments of a plan: taken over, nothing sent twice, ambiguity reported.

The tools of :mod:`tests.durable.crash_tools` kill their own worker once: after storing their
effect (the ledger holds the action ``dispatched``, the other nodes of the wave are committed, the
wave's checkpoint is not written), or as their call begins in a later wave (the earlier waves'
checkpoints are written).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest

from actionspace import Runtime
from actionspace.durable import DurableConfig, PlanClient
from actionspace.durable import sweep_tools as tools
from actionspace.durable.sweep import WORKER_START_S, Workers
from actionspace.plan.model import PlanResult
from tests.durable import crash_tools

pytestmark = pytest.mark.slow

TOOLS = "tests.durable.crash_tools:register"


def _node(run_id: str, k: str, tool: str, value: Any) -> dict[str, Any]:
    return {"id": k, "tool": tool, "arguments": {"ref": f"{run_id}/{k}", "value": value}}


def _clean(prefix: str, nodes: str) -> str:
    """A run id none of whose sweep-tool ``nodes`` draws a lost response."""
    return next(
        f"{prefix}{i}" for i in range(10_000) if not any(tools.fault(f"{prefix}{i}/{k}") for k in nodes)
    )


def _effects(url: str, run_id: str) -> dict[str, int]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT ref, count(*) FROM sweep_effects WHERE ref LIKE %s GROUP BY ref", (f"{run_id}/%",)
        ).fetchall()
    return {str(ref).rpartition("/")[2]: int(n) for ref, n in rows}


def _attempts(url: str, run_id: str) -> dict[str, int]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT node_id, count(*) FROM actionspace_node_attempts WHERE run_id = %s GROUP BY node_id",
            (run_id,),
        ).fetchall()
    return {str(k): int(n) for k, n in rows}


def _outcome(result: PlanResult) -> dict[str, Any]:
    return {k: o.data["value"] if o.error is None else o.error.category for k, o in result.nodes.items()}


@contextmanager
def _workers(store: str, tmp_path: Path, count: int, *, restart: bool) -> Iterator[Workers]:
    """``count`` workers with the crash tools; with ``restart``, a worker that died is started again."""
    crash_tools.prepare(store)
    pool = Workers(
        store, count, schema=f"dbos_{uuid.uuid4().hex[:8]}", concurrency=4, dead_after_s=2.0, logs=tmp_path,
        tools=TOOLS,
    )  # fmt: skip
    done = threading.Event()

    def keep_up() -> None:
        while not done.wait(0.2):
            for i, proc in enumerate(pool.procs):
                if proc.poll() is not None:
                    pool.restart(i)

    keeper = threading.Thread(target=keep_up, daemon=True)
    try:
        pool.wait_live(count, WORKER_START_S)
        if restart:
            keeper.start()
        yield pool
    finally:
        done.set()
        if keeper.is_alive():
            keeper.join()
        pool.stop()


def test_a_worker_killed_before_its_wave_checkpoint_is_taken_over_by_a_live_one_sending_nothing_twice(
    store: str, tmp_path: Path
) -> None:
    run_id = _clean("takeover", "abc")
    plan = {
        "nodes": [
            _node(run_id, "a", "native_write", 1),
            _node(run_id, "q", "crash_query", 10),  # stores its effect, then its worker dies
            _node(run_id, "b", "query_write", {"$ref": "a.data.value"}),
            _node(run_id, "c", "native_write", {"$ref": "q.data.value"}),
        ]
    }
    with _workers(store, tmp_path, 2, restart=False) as pool:
        with PlanClient(store, config=DurableConfig(system_schema=pool.schema)) as client:
            client.submit(plan, run_id=run_id)
            result = client.result(run_id)
        exits = [p.returncode for p in pool.procs if p.poll() is not None]
    assert exits == [-9]  # one worker died; the other, still alive, finished the plan
    assert result.status == "ok"
    assert _outcome(result) == {"a": 2, "q": 11, "b": 3, "c": 12}  # as an uninterrupted run
    assert _effects(store, run_id) == {"a": 1, "q": 1, "b": 1, "c": 1}
    assert _attempts(store, run_id)["a"] == 2  # its wave ran again: a was found committed


def test_a_restarted_worker_continues_a_plan_killed_twice_and_reports_what_it_cannot_know(
    store: str, tmp_path: Path
) -> None:
    run_id = _clean("restart", "amg")
    plan = {
        "nodes": [
            _node(run_id, "a", "native_write", 1),
            # first kill: n's effect stored, its wave not checkpointed
            _node(run_id, "n", "crash_none", 7),
            _node(run_id, "m", "native_write", {"$ref": "n.data.value"}),
            # second kill: in wave 2, as f's call begins (wave 1 checkpointed)
            _node(run_id, "f", "crash_first", {"$ref": "a.data.value"}),
            _node(run_id, "g", "query_write", {"$ref": "f.data.value"}),
        ]
    }
    rt = Runtime(store=store, recover_on_start=False)
    try:
        with _workers(store, tmp_path, 1, restart=True) as pool:
            with PlanClient(store, config=DurableConfig(system_schema=pool.schema)) as client:
                client.submit(plan, run_id=run_id)
                result = client.result(run_id)
            restarts = pool.started - 1
        n = rt.ledger.get_node(run_id, "n")
    finally:
        rt.close()
    assert restarts >= 2  # one per kill (more only if a worker failed to start for another reason)
    assert _outcome(result) == {
        "a": 2,
        "n": "unknown_commit",  # a none tool cut short: never sent again, never claimed done
        "m": "cancelled",
        "f": 3,
        "g": 4,
    }
    m = result.nodes["m"].error
    assert m is not None and m.details["blocked_by"] == "n"
    assert n is not None and n.state == "unknown_commit"
    assert _effects(store, run_id) == {"a": 1, "n": 1, "f": 1, "g": 1}
    attempts = _attempts(store, run_id)
    # wave 1 ran twice (cut before its checkpoint), then was replayed from it: never a third time
    assert attempts["a"] == attempts["n"] == 2
    assert attempts["f"] == 2 and attempts["g"] == 1


def _requests(rt: Runtime, run_id: str) -> list[Any]:
    return [r for r in rt.approvals.list(status=None, limit=1000) if r.run_id == run_id]


def test_an_approval_decided_while_no_worker_lives_and_expired_meanwhile_is_asked_again_and_runs_once(
    store: str, tmp_path: Path
) -> None:
    from tests.durable.support import pending_request

    run_id = _clean("lapsed", "ac")
    plan = {
        "nodes": [
            _node(run_id, "a", "native_write", 1),
            _node(run_id, "b", "approved_write", {"$ref": "a.data.value"}),
            _node(run_id, "c", "query_write", {"$ref": "b.data.value"}),
        ]
    }
    rt = Runtime(store=store, recover_on_start=False)
    try:
        with (
            _workers(store, tmp_path, 2, restart=False) as pool,
            PlanClient(store, config=DurableConfig(system_schema=pool.schema)) as client,
        ):
            client.submit(plan, run_id=run_id)
            first = pending_request(rt, run_id, deadline_s=120.0)
            for i in range(2):
                pool.kill(i)
            # decided while no worker lives, and expired before one is back
            rt.approvals.approve(first.id, by="alice", ttl_s=0.01)
            with pytest.raises(ValueError, match="not pending"):
                rt.approvals.deny(first.id, by="bob")  # a second decision is refused
            for i in range(2):
                pool.restart(i)
            second = pending_request(rt, run_id, deadline_s=120.0)  # the lapsed approval is not used
            assert second.id != first.id and second.node_id == "b"
            assert _effects(store, run_id) == {"a": 1}
            rt.approvals.approve(second.id, by="alice")
            result = client.result(run_id)
        statuses = sorted(r.status for r in _requests(rt, run_id))
    finally:
        rt.close()
    assert _outcome(result) == {"a": 2, "b": 3, "c": 4}
    assert _effects(store, run_id) == {"a": 1, "b": 1, "c": 1}
    assert statuses == ["approved", "consumed"]  # the lapsed one stays unused
