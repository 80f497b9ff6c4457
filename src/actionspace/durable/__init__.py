"""Plans as durable workflows on DBOS Transact over PostgreSQL (``rt.run_plan(plan, backend="dbos")``).

* :func:`launch` / :func:`shutdown` — this process's backend, bound to one Runtime.
* :class:`PlanClient` — submit plans to the workers of a store and read their results.
* :class:`DurableConfig` — queues, concurrency, polling, failure detection.
* ``actionspace worker --store postgresql://… --tools module:function`` — a worker process.
"""

from actionspace.durable.backend import PlanClient, arun_plan_durable
from actionspace.durable.config import DurableConfig
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
