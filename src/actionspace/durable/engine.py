"""The DBOS backend of a process: launch DBOS over the store's database, bound to one Runtime.

DBOS Transact is a process-wide singleton, so one Runtime per process runs durable plans. Its
workflows (:mod:`actionspace.durable.workflows`) find that Runtime here. Processes that launch
the backend over the same PostgreSQL database share the work: plan workflows on
:data:`~actionspace.durable.config.PLAN_QUEUE` (each runs its plan's nodes as its own steps), and
the node workflows of capped tools on the node queues.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import parse_qs, urlsplit

from actionspace.durable.config import NODE_QUEUE, PLAN_QUEUE, DurableConfig, tool_queue
from actionspace.errors import ActionError, ConfigurationError
from actionspace.plan.model import PlanResult
from actionspace.types import Observation

if TYPE_CHECKING:
    from actionspace.durable.executors import Heartbeat
    from actionspace.runtime import Runtime

__all__ = [
    "Engine",
    "bound",
    "launch",
    "launched_for",
    "legacy_node_workflow_id",
    "node_workflow_id",
    "plan_result",
    "plan_workflow_id",
    "shutdown",
    "system_url",
]

_PREFIX: Final = "as-plan:"
_NODE_PREFIX: Final = "as-node:"
_lock = threading.Lock()
_engine: Engine | None = None


def plan_workflow_id(run_id: str) -> str:
    """The DBOS workflow id of the plan of ``run_id``: a run has at most one durable plan."""
    return f"{_PREFIX}{run_id}"


def node_workflow_id(run_id: str, node_id: str) -> str:
    """The DBOS workflow id of one node of the plan of ``run_id``.

    ``%`` and ``/`` of both ids are escaped (``%25``, ``%2F``), so the one ``/`` left parts them:
    two (run, node) pairs never share an id. Its own prefix keeps it apart from every plan id.
    """
    return f"{_NODE_PREFIX}{_escaped(run_id)}/{_escaped(node_id)}"


def legacy_node_workflow_id(run_id: str, node_id: str) -> str:
    """The earlier form of node workflow ids, ``as-plan:<run>/<node>`` (run ``r/x`` node ``y`` and
    run ``r`` node ``x/y`` shared one; a plan id could be one too): looked up for a node workflow
    begun under it, never given to a new one."""
    return f"{_PREFIX}{run_id}/{node_id}"


def _escaped(text: str) -> str:
    return text.replace("%", "%25").replace("/", "%2F")


def system_url(store_url: str) -> str:
    """The DBOS system database URL for an actionspace store URL (the same PostgreSQL database)."""
    scheme = store_url.partition("://")[0].lower()
    if scheme not in ("postgresql", "postgres"):
        raise ConfigurationError(
            f"the dbos plan backend needs a postgresql:// store shared by its workers, got {store_url!r}"
        )
    return "postgresql://" + store_url.partition("://")[2]


@dataclass(slots=True)
class Engine:
    """The launched backend of this process."""

    runtime: Runtime
    config: DurableConfig
    executor_id: str
    heartbeat: Heartbeat

    def queue_of(self, tool: str) -> str:
        return tool_queue(tool) if tool in self.config.tool_limits else NODE_QUEUE

    def queued(self, tool: str) -> bool:
        """True when nodes of ``tool`` go through a queue: a cluster-wide limit applies to them."""
        return tool in self.config.tool_limits or self.config.node_concurrency is not None


def bound() -> Engine:
    """The engine of this process; raises ConfigurationError when none was launched."""
    engine = _engine
    if engine is None:
        raise ConfigurationError("no durable backend in this process; call actionspace.durable.launch(rt)")
    return engine


def launched_for(rt: Runtime) -> bool:
    """True when this process's backend is launched for ``rt`` (``launch`` would do nothing)."""
    engine = _engine
    return engine is not None and engine.runtime is rt


def launch(rt: Runtime, config: DurableConfig | None = None) -> Engine:
    """Launch DBOS in this process for ``rt`` (idempotent for the same Runtime).

    Creates the DBOS system tables in ``config.system_schema`` of the store's database, registers
    the queues, and starts the heartbeat that hands a dead worker's workflows to the live ones.
    Raises ConfigurationError for a non-PostgreSQL store or when another Runtime holds the backend.
    """
    global _engine
    url = system_url(rt.store_url)
    with _lock:
        if _engine is not None:
            if _engine.runtime is rt:
                return _engine
            raise ConfigurationError("this process's durable backend is bound to another Runtime")
        config = config or DurableConfig()
        from dbos import DBOS, DBOSConfig

        from actionspace.durable import workflows
        from actionspace.durable.executors import Heartbeat

        workflows.register()
        executor_id = config.executor_id or f"as-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        dbos_config: DBOSConfig = {
            "name": config.app_name,
            "system_database_url": url,
            "dbos_system_schema": config.system_schema,
            "executor_id": executor_id,
            "application_version": f"actionspace-{_version()}",
            "log_level": config.log_level,
            "notification_listener_polling_interval_sec": 0.05,
            "sys_db_pool_size": config.sys_db_pool_size,
        }
        if not config.checkpoint_fsync:
            dbos_config["db_engine_kwargs"] = {"connect_args": _async_commit_args(url)}
        heartbeat = Heartbeat(
            rt.store_url,
            executor_id,
            every_s=config.heartbeat_s,
            dead_after_s=config.dead_after_s,
            recover=_recover_executor,
        )
        # Bound before launch: DBOS may start queued or recovered workflows during launch itself.
        _engine = Engine(runtime=rt, config=config, executor_id=executor_id, heartbeat=heartbeat)
        try:
            heartbeat.open()
            DBOS(config=dbos_config)
            DBOS.launch()
            _register_queues(config)
            heartbeat.start()
        except BaseException:
            _engine = None
            heartbeat.stop(hand_over=False)
            DBOS.destroy()
            raise
        return _engine


def shutdown(*, hand_over: bool = True) -> None:
    """Stop this process's backend (DBOS destroyed); ``hand_over`` lets others resume its workflows."""
    global _engine
    with _lock:
        engine, _engine = _engine, None
        if engine is None:
            return
        from dbos import DBOS

        engine.heartbeat.stop(hand_over=hand_over)
        DBOS.destroy()


def _async_commit_args(url: str) -> dict[str, Any]:
    """Connection arguments of DBOS's engine: ``synchronous_commit = off`` on top of the URL's own
    ``options`` (a keyword argument replaces the URL's value, so both go in it)."""
    own = parse_qs(urlsplit(url).query).get("options", [""])[0]
    return {
        "application_name": "dbos_transact",
        "options": f"{own} -c synchronous_commit=off".strip(),
    }


def _register_queues(config: DurableConfig) -> None:
    from dbos import DBOS

    common: dict[str, Any] = {"polling_interval_sec": config.queue_poll_s, "on_conflict": "always_update"}
    DBOS.register_queue(PLAN_QUEUE, worker_concurrency=config.plan_concurrency, **common)
    DBOS.register_queue(
        NODE_QUEUE,
        worker_concurrency=config.worker_concurrency,
        global_concurrency=config.node_concurrency,
        **common,
    )
    for tool, limit in config.tool_limits.items():
        DBOS.register_queue(
            tool_queue(tool),
            worker_concurrency=min(limit, config.worker_concurrency),
            global_concurrency=limit,
            **common,
        )


def _recover_executor(executor_id: str) -> int:
    from dbos import DBOS

    return len(DBOS._recover_pending_workflows([executor_id]))


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("actionspace")
    except PackageNotFoundError:
        return "0"


def plan_result(data: Mapping[str, Any]) -> PlanResult:
    """A :class:`PlanResult` from what a plan workflow returns (``PlanResult.to_dict`` form)."""
    error = data.get("error")
    return PlanResult(
        run_id=data["run_id"],
        status=data["status"],
        nodes={k: Observation.from_dict(v) for k, v in data.get("nodes", {}).items()},
        error=ActionError.from_dict(error) if error is not None else None,
        edges=[(a, b) for a, b in data.get("edges", [])],
        added_edges=list(data.get("added_edges", [])),
        stats=dict(data.get("stats", {})),
    )
