"""``actionspace worker``: a process that runs durable plans and their nodes from a shared store.

Start several, on one host or many, with the same ``--store postgresql://…`` and the same tools:
they take plan and node workflows from the DBOS queues in that database. When one dies (even by
SIGKILL), another takes its workflows over after ``--dead-after`` seconds; a restarted one simply
joins again. SIGTERM or Ctrl-C stops a worker in order and hands its workflows over at once.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Annotated, Any

import typer

from actionspace._loader import load_callable
from actionspace.durable.config import DurableConfig
from actionspace.errors import ConfigurationError

if TYPE_CHECKING:
    from actionspace.runtime import Runtime

__all__ = ["load_tools", "main", "run_worker", "worker_command"]


def load_tools(target: str) -> Callable[[Runtime], Any]:
    """``module:function``: a function that registers tools on the Runtime it is given.

    A function that returns tools (functions marked with ``@tool`` or ToolSpecs) instead has them
    registered. Raises ConfigurationError when the target cannot be imported.
    """
    fn = load_callable(target, option="--tools")

    def install(rt: Runtime) -> None:
        made = fn(rt)
        if isinstance(made, Iterable) and not isinstance(made, str | bytes):
            for item in made:
                rt.register(item)

    return install


def run_worker(
    store: str,
    tools: Callable[[Runtime], Any],
    *,
    config: DurableConfig,
    stop: threading.Event,
    ready: Callable[[str], None] | None = None,
) -> None:
    """Run until ``stop`` is set: launch the backend for a Runtime on ``store`` with ``tools``."""
    from actionspace.durable.engine import launch, shutdown
    from actionspace.runtime import Runtime

    # Start-up ledger recovery is left to the plan workflows: each node settles its own interrupted
    # action before it runs again.
    rt = Runtime(store=store, recover_on_start=False)
    try:
        tools(rt)
        engine = launch(rt, config)
        if ready is not None:
            ready(engine.executor_id)
        stop.wait()
    finally:
        shutdown(hand_over=True)
        rt.close()


def worker_command(
    store: Annotated[str, typer.Option("--store", help="postgresql:// URL shared by every worker.")],
    tools: Annotated[
        str, typer.Option("--tools", help="module:function that registers the tools on a Runtime.")
    ],
    concurrency: Annotated[
        int, typer.Option("--concurrency", min=1, help="Plan nodes this worker runs at once.")
    ] = 8,
    executor_id: Annotated[
        str | None, typer.Option("--executor-id", help="DBOS executor id (default: unique per start).")
    ] = None,
    dead_after: Annotated[
        float, typer.Option("--dead-after", help="Seconds without heartbeat before a worker counts as dead.")
    ] = 10.0,
    schema: Annotated[str, typer.Option("--schema", help="Schema of the DBOS system tables.")] = "dbos",
    approval_poll_max: Annotated[
        float,
        typer.Option("--approval-poll-max", help="Longest wait (s) between two looks at a pending approval."),
    ] = 60.0,
) -> None:
    """Run durable plans (rt.run_plan(..., backend="dbos") and PlanClient.submit) from a shared store."""
    from actionspace._cli_tables import one_line
    from actionspace._extras import require

    try:
        require("dbos", "durable", "actionspace worker")
        install = load_tools(tools)
    except ConfigurationError as exc:
        typer.echo(one_line(str(exc)), err=True)
        raise typer.Exit(1) from exc
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    config = DurableConfig(
        worker_concurrency=concurrency,
        executor_id=executor_id,
        dead_after_s=dead_after,
        system_schema=schema,
        approval_poll_s=min(2.0, approval_poll_max),
        approval_poll_max_s=approval_poll_max,
    )
    run_worker(
        store,
        install,
        config=config,
        stop=stop,
        ready=lambda eid: typer.echo(f"worker {eid} ready", err=True),
    )


def main() -> None:
    typer.run(worker_command)


if __name__ == "__main__":
    main()
