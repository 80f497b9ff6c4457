"""The planner a Runtime composes: its transactional environments and where its plans run."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from actionspace.errors import ConfigurationError
from actionspace.plan.backends import load_backend
from actionspace.plan.control import CancelScope, ToolLimit
from actionspace.plan.engine import PlanEngine
from actionspace.plan.groups import Environment
from actionspace.plan.model import Plan, PlanResult
from actionspace.plan.run import arun_plan
from actionspace.policy.principal import Principal

__all__ = ["Planner"]


class Planner:
    """Runs plans in process (the scheduler, over the engine) or on an installed backend (``dbos``)."""

    def __init__(self, engine: PlanEngine, *, backend: str, config: Any, owner: Any) -> None:
        if backend != "inprocess":
            load_backend(backend)  # a backend that is not installed is a configuration error now
        self.engine = engine
        self.backend = backend
        self.config = config
        """The backend's configuration (a ``DurableConfig`` for ``dbos``; None: its defaults)."""
        self.owner = owner
        """The Runtime handed to another backend (it runs nodes through the runtime's public API)."""
        self.environments: dict[str, Environment] = {}

    def environment(self, name: str, env: Environment) -> None:
        """Register a transactional environment for atomic groups (see :class:`Environment`)."""
        if not isinstance(env, Environment):
            raise ConfigurationError(f"environment {name!r} must have mode, begin(key) and committed(key)")
        self.environments[name] = env

    async def arun(
        self,
        plan: Plan | Mapping[str, Any],
        *,
        run_id: str | None,
        principal: Principal | None = None,
        max_concurrency: int | None = None,
        tool_limits: Mapping[str, int | ToolLimit] | None = None,
        cancel: CancelScope | None = None,
        retry_of: PlanResult | None = None,
        backend: str | None = None,
    ) -> PlanResult:
        """Check and run ``plan`` on ``backend`` (default: the planner's); see ``Runtime.arun_plan``.

        In process ``run_id`` names an open run; another backend may take None (it opens one).
        """
        chosen = backend or self.backend
        if chosen == "inprocess":
            if run_id is None:
                raise ConfigurationError("an in-process plan runs in an open run: give run_id")
            return await arun_plan(
                self.engine,
                plan,
                run_id=run_id,
                principal=principal,
                environments=self.environments,
                max_concurrency=max_concurrency,
                tool_limits=tool_limits,
                cancel=cancel,
                retry_of=retry_of,
            )
        run_elsewhere = load_backend(chosen)
        if tool_limits or retry_of is not None:
            raise ConfigurationError(
                f"the {chosen} backend takes tool limits from its config and has no retry_of"
            )
        scoped: dict[str, CancelScope] = {}
        if cancel is not None:  # passed only when given: a backend may not know the keyword
            if not _takes(run_elsewhere, "cancel"):
                raise ConfigurationError(f"the {chosen} backend cannot be cancelled through a CancelScope")
            scoped["cancel"] = cancel
        return await run_elsewhere(
            self.owner,
            plan,
            run_id=run_id,
            principal=principal,
            max_concurrency=max_concurrency,
            config=self.config,
            **scoped,
        )


def _takes(fn: Any, keyword: str) -> bool:
    """True when ``fn`` accepts ``keyword`` as a keyword argument."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == keyword or p.kind is p.VAR_KEYWORD for p in parameters)
