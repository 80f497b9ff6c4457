"""What a durable plan asks of PostgreSQL, counted: its checkpoints, its write transactions, and the
DBOS statements that name its workflow (the bench's plan shape: 10 nodes in two waves)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from actionspace import Runtime
from actionspace.durable import DurableConfig, launch, plan_workflow_id, shutdown
from tests.pg import fresh_schema

NODES = 10
SYSTEM_SCHEMA = f"dbos_{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def module_store(pg_url: str) -> Iterator[str]:
    yield from fresh_schema(pg_url)


@pytest.fixture(scope="module")
def rt(module_store: str) -> Iterator[Runtime]:
    # heartbeats seldom: a beat inside a measured plan would count as that plan's transactions
    durable = DurableConfig(system_schema=SYSTEM_SCHEMA, heartbeat_s=60.0, dead_after_s=600.0)
    runtime = Runtime(store=module_store, plan_backend="dbos", durable=durable, recover_on_start=False)
    done: dict[str, dict[str, Any]] = {}
    lock = threading.Lock()

    def write(ref: str, value: int, idempotency_key: str) -> dict[str, Any]:
        with lock:
            return done.setdefault(idempotency_key, {"ref": ref, "value": value + 1})

    runtime.add_tool(
        name="write",
        fn=write,
        effect="write",
        idempotency="native",
        writes=["w:{ref}"],
        input_schema={
            "type": "object",
            "properties": {"ref": {"type": "string"}, "value": {"type": "integer"}},
            "required": ["ref", "value"],
        },
    )
    launch(runtime, durable)
    try:
        yield runtime
    finally:
        shutdown()
        runtime.close()


def _plan(run_id: str) -> dict[str, Any]:
    """The bench's plan: the odd nodes take the value of the node before, the even ones stand alone."""
    nodes = []
    for i in range(NODES):
        value: Any = {"$ref": f"n{i - 1}.data.value"} if i % 2 else i
        nodes.append({"id": f"n{i}", "tool": "write", "arguments": {"ref": f"{run_id}/n{i}", "value": value}})
    return {"nodes": nodes}


def _xid(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT pg_current_xact_id()::text::bigint").fetchone()
    assert row is not None
    return int(row[0])


def _writes(rt: Runtime, backend: str) -> int:
    """The write transactions (transaction ids given out) of one plan on ``backend``: the fewest of
    three plans, so a heartbeat or a trace batch split by timing inside one does not count."""
    counts = []
    for _ in range(3):
        run_id = f"w94-{backend}-{uuid.uuid4().hex[:8]}"
        before = _xid(rt.store_url)
        result = rt.run_plan(_plan(run_id), run_id=run_id, backend=backend)
        counts.append(_xid(rt.store_url) - before - 1)  # the second look takes one itself
        assert result.status == "ok", result.failed
    return min(counts)


def _dbos_engine() -> sa.Engine:
    from dbos._dbos import _get_dbos_instance

    return _get_dbos_instance()._sys_db.engine


def test_a_durable_plan_of_two_waves_records_one_checkpoint_per_wave_and_nothing_else(rt: Runtime) -> None:
    run_id = f"w94-ckpt-{uuid.uuid4().hex[:8]}"
    result = rt.run_plan(_plan(run_id), run_id=run_id, backend="dbos")
    assert result.status == "ok", result.failed
    assert result.stats["waves"] == 2
    with psycopg.connect(rt.store_url, autocommit=True) as conn:
        rows = conn.execute(
            f"SELECT function_name FROM {SYSTEM_SCHEMA}.operation_outputs WHERE workflow_uuid = %s"
            " ORDER BY function_id",
            (plan_workflow_id(run_id),),
        ).fetchall()
    assert [name for (name,) in rows] == ["actionspace.plan.wave"] * result.stats["waves"]


def test_a_durable_plan_adds_at_most_two_write_transactions_per_wave_and_two_for_its_workflow(
    rt: Runtime,
) -> None:
    waves = 2
    # the workflow's start and end; per wave its checkpoint and the statement noting its attempts
    assert _writes(rt, "dbos") - _writes(rt, "inprocess") <= 2 + 2 * waves


def test_the_dbos_statements_naming_a_plan_workflow_are_at_most_twelve(rt: Runtime) -> None:
    run_id = f"w94-stmt-{uuid.uuid4().hex[:8]}"
    workflow_id = plan_workflow_id(run_id)
    seen: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool) -> None:
        values = parameters.values() if isinstance(parameters, dict) else parameters or ()
        if workflow_id in [v for v in values if isinstance(v, str)]:
            seen.append(statement)

    engine = _dbos_engine()
    sa.event.listen(engine, "before_cursor_execute", count)
    try:
        result = rt.run_plan(_plan(run_id), run_id=run_id, backend="dbos")
    finally:
        sa.event.remove(engine, "before_cursor_execute", count)
    assert result.status == "ok", result.failed
    # its start (status, input), per wave the step's look at its checkpoint and its record, its end
    assert len(seen) <= 12, [s.split("\n")[0][:80] for s in seen]
