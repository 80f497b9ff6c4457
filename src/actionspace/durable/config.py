"""Settings of the DBOS plan backend: queues, concurrency, polling and failure detection."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from actionspace.errors import ConfigurationError

__all__ = ["NODE_QUEUE", "PLAN_QUEUE", "DurableConfig", "tool_queue"]

PLAN_QUEUE = "actionspace_plans"
"""The DBOS queue plan workflows are submitted to; every worker takes from it."""

NODE_QUEUE = "actionspace_nodes"
"""The DBOS queue of node workflows when ``node_concurrency`` caps plan nodes over every process."""


def tool_queue(tool: str) -> str:
    """The DBOS queue of the node workflows of ``tool`` when it has a cluster-wide limit."""
    return f"actionspace_tool_{tool}"


@dataclass(frozen=True, kw_only=True, slots=True)
class DurableConfig:
    """How a process takes part in running plans on DBOS Transact.

    Every process of one deployment should use the same ``app_name``, ``system_schema``,
    ``node_concurrency`` and ``tool_limits`` (queues are stored in the database; the last process
    to start writes their limits).
    """

    app_name: str = "actionspace"
    """DBOS application name (default ``"actionspace"``)."""
    system_schema: str = "dbos"
    """Schema of the DBOS system tables in the store's database (default ``"dbos"``)."""
    executor_id: str | None = None
    """This process's DBOS executor id; None (the default) makes a unique one per process start."""
    worker_concurrency: int = 8
    """Plan nodes this process runs at once, over all its plans (default 8)."""
    plan_concurrency: int = 64
    """Plan workflows this process drives at once (default 64); they mostly wait."""
    node_concurrency: int | None = None
    """Plan nodes running at once over every process (default None: no cluster-wide cap).

    With a cap, every node goes through the node queue as a workflow of its own (slower); without
    one, a plan's ready nodes run as steps of the plan's workflow."""
    tool_limits: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    """Per tool name, nodes of that tool running at once over every process (default none).

    The nodes of a limited tool go through that tool's queue as workflows of their own."""
    queue_poll_s: float = 0.05
    """Seconds between two looks at a queue for work (default 0.05)."""
    wait_poll_s: float = 5.0
    """Seconds a plan waits for a node workflow's message before checking on them (default 5)."""
    approval_poll_s: float = 2.0
    """First wait (seconds) between two looks at a pending approval; doubles each time (default 2)."""
    approval_poll_max_s: float = 60.0
    """Longest wait (seconds) between two looks at a pending approval (default 60)."""
    heartbeat_s: float = 0.5
    """Seconds between two heartbeats of this process (default 0.5)."""
    dead_after_s: float = 10.0
    """A process without a heartbeat for this long is dead; its workflows move to others (default 10).

    Too short and a worker that merely paused (a loaded host) is taken over while it still runs:
    safe (DBOS fences it, the ledger settles its actions) but wasteful."""
    checkpoint_fsync: bool = False
    """True: every DBOS checkpoint waits for its own fsync. False (the default): checkpoints
    commit without waiting (PostgreSQL ``synchronous_commit = off``) and are made durable by the
    next synchronous commit in the cluster — the ledger's, which comes before any effect — since
    WAL is flushed in order. A database crash can then lose only checkpoints that no effect
    depends on; the workflow runs those parts again and the ledger settles them."""
    sys_db_pool_size: int = 10
    """Connections of DBOS to its system tables, per process (default 10)."""
    log_level: str = "WARNING"
    """DBOS log level (default ``"WARNING"``)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "tool_limits", MappingProxyType(dict(self.tool_limits)))
        for name, value in (
            ("worker_concurrency", self.worker_concurrency),
            ("plan_concurrency", self.plan_concurrency),
            ("sys_db_pool_size", self.sys_db_pool_size),
            *((f"tool_limits[{k!r}]", v) for k, v in self.tool_limits.items()),
        ):
            if type(value) is not int or value < 1:
                raise ConfigurationError(f"DurableConfig.{name} must be a positive integer, got {value!r}")
        if self.node_concurrency is not None and self.node_concurrency < 1:
            raise ConfigurationError("DurableConfig.node_concurrency must be positive or None")
        for name in ("queue_poll_s", "wait_poll_s", "approval_poll_s", "approval_poll_max_s", "heartbeat_s"):
            if getattr(self, name) <= 0:
                raise ConfigurationError(f"DurableConfig.{name} must be positive")
        if self.dead_after_s <= 2 * self.heartbeat_s:
            raise ConfigurationError("DurableConfig.dead_after_s must exceed two heartbeats")
