"""Settings and entry points of the durable backend that need no database."""

from __future__ import annotations

from pathlib import Path

import pytest

from actionspace import Runtime
from actionspace.durable import DurableConfig, node_workflow_id, plan_workflow_id
from actionspace.durable.backend import plan_request
from actionspace.durable.config import NODE_QUEUE, tool_queue
from actionspace.durable.engine import Engine, system_url
from actionspace.durable.worker import load_tools
from actionspace.errors import ConfigurationError
from actionspace.plan.model import Plan
from actionspace.validation.verdicts import Accepted


@pytest.mark.parametrize(
    "changes",
    [
        {"worker_concurrency": 0},
        {"plan_concurrency": -1},
        {"tool_limits": {"charge": 0}},
        {"node_concurrency": 0},
        {"queue_poll_s": 0.0},
        {"approval_poll_max_s": -1.0},
        {"heartbeat_s": 1.0, "dead_after_s": 1.5},
    ],
)
def test_nonsensical_durable_settings_are_configuration_errors(changes: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        DurableConfig(**changes)  # type: ignore[arg-type]


def test_tool_limits_are_frozen_and_choose_the_queue_of_a_node() -> None:
    limits = {"charge": 2}
    config = DurableConfig(tool_limits=limits)
    limits["charge"] = 99
    assert config.tool_limits == {"charge": 2}
    engine = Engine(runtime=None, config=config, executor_id="e", heartbeat=None)  # type: ignore[arg-type]
    assert engine.queue_of("charge") == tool_queue("charge")
    assert engine.queue_of("refund") == NODE_QUEUE


def test_workflow_ids_derive_from_the_run_id() -> None:
    assert plan_workflow_id("run_1") == "as-plan:run_1"
    assert node_workflow_id("run_1", "n3") == "as-node:run_1/n3"


def test_only_a_postgresql_store_can_hold_the_dbos_system_tables() -> None:
    assert system_url("postgres://u@h/db?x=1") == "postgresql://u@h/db?x=1"
    for url in ("sqlite:///tmp/a.db", "memory://"):
        with pytest.raises(ConfigurationError, match="postgresql"):
            system_url(url)


def test_plans_with_verifier_callables_cannot_cross_into_a_workflow() -> None:
    plan = Plan.from_dict(
        {"nodes": [{"id": "n", "tool": "t", "arguments": {}}]}, verify={"n": lambda obs: Accepted()}
    )
    with pytest.raises(ConfigurationError, match="verifiers"):
        plan_request(plan, run_id="r")
    request = plan_request({"nodes": [{"id": "n", "tool": "t", "arguments": {}}]}, run_id="r")
    assert request == {
        "run_id": "r",
        "plan": {"nodes": [{"id": "n", "tool": "t", "arguments": {}}]},
        "principal": None,
        "max_concurrency": None,
    }


def test_the_dbos_backend_refuses_in_process_only_options() -> None:
    with Runtime(store="memory://") as rt, pytest.raises(ConfigurationError, match="tool limits"):
        plan = {"nodes": [{"id": "n", "tool": "t", "arguments": {}}]}
        rt.run_plan(plan, backend="dbos", tool_limits={"t": 1})


@pytest.mark.parametrize("target", ["no_colon", "actionspace.nowhere:f", "actionspace.durable:missing"])
def test_a_worker_tools_target_that_cannot_load_is_a_configuration_error(target: str) -> None:
    with pytest.raises(ConfigurationError):
        load_tools(target)


def test_a_worker_tools_function_may_register_or_return_tools() -> None:
    with Runtime(store="memory://") as rt:
        load_tools("tests.durable.test_config:_returns_tools")(rt)
        assert rt.describe("double")["name"] == "double"


def _returns_tools(rt: Runtime) -> list[object]:
    from actionspace import tool

    @tool(effect="none")
    def double(x: int) -> int:
        """Twice x."""
        return 2 * x

    return [double]


def test_the_dbos_backend_needs_a_postgresql_store(tmp_path: Path) -> None:
    with Runtime(store=f"sqlite:///{tmp_path}/s.db", plan_backend="dbos") as local:
        local.add_tool(name="noop", fn=lambda: 1, effect="none", input_schema={"type": "object"})
        with pytest.raises(ConfigurationError, match="postgresql"):
            local.run_plan({"nodes": [{"id": "n", "tool": "noop", "arguments": {}}]})


def _figures(inprocess_ms: float, dbos_ms: float) -> dict[str, object]:
    def row(ms: float) -> dict[str, float]:
        return {
            "sequential_plans_per_s": round(100 / ms, 2),
            "sequential_ms_per_node": ms,
            "concurrent_plans_per_s": 1.0,
            "concurrent_ms_per_node": ms,
        }

    return {
        "plans": 20,
        "nodes_per_plan": 10,
        "dbos_launch_s": 1.0,
        "inprocess": row(inprocess_ms),
        "dbos": row(dbos_ms),
        "dbos_overhead_ms_per_node": round(dbos_ms - inprocess_ms, 2),
        "sequential_ratio": 1.0,
        "concurrent_ratio": 1.0,
    }


@pytest.mark.parametrize(("dbos_ms", "status"), [(12.9, "PASS"), (13.1, "FAIL")])
def test_the_dbos_bench_prints_its_per_node_overhead_target_as_pass_or_fail(
    dbos_ms: float, status: str
) -> None:
    from actionspace.bench._dbos import render_dbos

    last = render_dbos(_figures(8.0, dbos_ms)).splitlines()[-1]
    assert last.startswith(f"{status}  DBOS per-node overhead ≤ 5 ms over in-process: ")
    assert f"{round(dbos_ms - 8.0, 2)} ms per node" in last
