"""Plans as durable workflows on DBOS Transact over PostgreSQL (``rt.run_plan(plan, backend="dbos")``).

* :func:`launch` / :func:`shutdown` — this process's backend, bound to one Runtime.
* :class:`PlanClient` — submit plans to the workers of a store and read their results.
* :class:`DurableConfig` — queues, concurrency, polling, failure detection.
* ``actionspace worker --store postgresql://… --tools module:function`` — a worker process.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from actionspace.durable.config import DurableConfig

if TYPE_CHECKING:
    from actionspace.durable.backend import PlanClient, arun_plan_durable
    from actionspace.durable.engine import launch, node_workflow_id, plan_workflow_id, shutdown

__all__ = [
    "DurableConfig",
    "PlanClient",
    "arun_plan_durable",
    "launch",
    "node_workflow_id",
    "plan_workflow_id",
    "shutdown",
]

_LAZY = {
    "PlanClient": "backend",
    "arun_plan_durable": "backend",
    "launch": "engine",
    "node_workflow_id": "engine",
    "plan_workflow_id": "engine",
    "shutdown": "engine",
}
"""Imported on first use, so that ``actionspace.durable.worker`` (the CLI's ``worker`` command) and
the config do not load the engine and the runtime with them."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
