"""The Runtime's plan and budget methods (a mixin, to keep the facade's module readable)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Iterable, Mapping
from typing import TYPE_CHECKING, Any, cast

from actionspace._crash import point
from actionspace._pipeline import Recorder, RunState
from actionspace.catalog.spec import ToolSpec
from actionspace.errors import ConfigurationError
from actionspace.execution.streaming import StreamPolicy
from actionspace.execution.streaming import astream as _astream
from actionspace.ledger.entries import LedgerEntry
from actionspace.ledger.recover import RecoveryReport, recover, resolve_by_hand
from actionspace.parse import parse
from actionspace.plan.control import CancelScope, ToolLimit
from actionspace.plan.groups import Environment, SpecsWithGroups
from actionspace.plan.model import Plan, PlanResult
from actionspace.policy.budget import Meter, Usage
from actionspace.policy.budget import estimate as estimate_usage
from actionspace.policy.principal import Principal
from actionspace.types import Observation, ToolCall

if TYPE_CHECKING:
    from actionspace.catalog.registry import Catalog
    from actionspace.ledger.entries import LedgerStore
    from actionspace.runtime import Runtime

__all__ = ["DEFAULT_RETENTION_S", "Operations"]

DEFAULT_RETENTION_S = 24 * 3600.0
"""Ledger records live at least this long: longer than any retry window."""


class Operations:
    """Streaming, offers, plans, budgets and ledger operations of :class:`~actionspace.runtime.Runtime`."""

    if TYPE_CHECKING:
        catalog: Catalog
        meter: Meter | None
        principal: Principal
        _runs: dict[str, RunState]
        _environments: dict[str, Environment]
        ledger: LedgerStore

        def _run(self, run_id: str | None, principal: Principal | None) -> RunState: ...
        def _flush(self, rec: Recorder) -> None: ...
        def record(
            self, run_id: str, kind: str, data: Mapping[str, Any], *, call_id: str | None = None
        ) -> None: ...

    # ------------------------------------------------------------------ streaming
    def astream(
        self,
        raw: Any,
        *,
        run_id: str | None = None,
        node_id: str | None = None,
        principal: Principal | None = None,
        policy: StreamPolicy | None = None,
    ) -> AsyncGenerator[Observation, None]:
        """Run ``raw``'s calls, yielding a streaming tool's provisional observations as they come.

        Each call ends with exactly one final observation (``provisional=False``); only that one
        may feed another action. ``policy`` sets how often provisional observations come (see
        :class:`~actionspace.execution.streaming.StreamPolicy`).
        """
        return _astream(
            cast("Runtime", self),
            raw,
            run_id=run_id,
            node_id=node_id,
            principal=principal,
            policy=policy or StreamPolicy(),
        )

    # ------------------------------------------------------------------ offers
    def offer(
        self,
        names: Iterable[str] | None = None,
        *,
        run_id: str | None = None,
        principal: Principal | None = None,
    ) -> list[dict[str, Any]]:
        """Fix the tools a run may call (default: every tool not retired) and return their definitions.

        Records ``candidates_offered`` with the full set, the offered set and why others were left out.
        """
        run = self._run(run_id, principal)
        wanted = set(names) if names is not None else None
        offered: list[ToolSpec] = []
        left_out: list[dict[str, str]] = []
        for spec in self.catalog.offerable():
            if wanted is not None and spec.name not in wanted:
                left_out.append({"name": spec.name, "reason": "not requested"})
                continue
            offered.append(spec)
        for spec in self.catalog:
            if spec.lifecycle == "retired":
                left_out.append({"name": spec.key, "reason": "retired"})
        run.pins = {s.name: (s.version, s.schema_hash) for s in offered}
        run.resolved.clear()
        run.explicit_offer = True
        rec = Recorder(run, None)
        rec.add(
            "candidates_offered",
            {
                "offered": [
                    {"name": s.name, "version": s.version, "schema_hash": s.schema_hash} for s in offered
                ],
                "left_out": left_out,
            },
        )
        self._flush(rec)
        return [s.describe() for s in offered]

    # ------------------------------------------------------------------ plans
    def environment(self, name: str, env: Environment) -> None:
        """Register a transactional environment that atomic plan groups can use (``ToolSpec.transaction``).

        ``env`` speaks :class:`actionspace.plan.groups.Environment`: ``mode`` (``"transaction"`` or
        ``"switch"``), ``begin(key)`` and ``committed(key)``.
        """
        if not isinstance(env, Environment):
            raise ConfigurationError(f"environment {name!r} must have mode, begin(key) and committed(key)")
        self._environments[name] = env

    async def arun_plan(
        self,
        plan: Plan | Mapping[str, Any],
        *,
        run_id: str | None = None,
        principal: Principal | None = None,
        max_concurrency: int | None = None,
        tool_limits: Mapping[str, int | ToolLimit] | None = None,
        cancel: CancelScope | None = None,
        retry_of: PlanResult | None = None,
    ) -> PlanResult:
        """Check and run a plan (a :class:`Plan` or its JSON form); one observation per node.

        ``tool_limits``: per tool name, the most concurrent calls (an int) or a :class:`ToolLimit`.
        ``cancel``: a :class:`CancelScope` to stop the plan or some nodes. ``retry_of``: an earlier
        result of the same plan and run; its ok nodes are reused, the others run again (writes
        through the ledger, with their original keys).
        A malformed or unsafe plan is a result with ``status="error"`` and ``error`` set (nothing ran).
        """
        from actionspace.plan.run import arun_plan

        return await arun_plan(
            cast("Runtime", self),
            plan,
            run_id=run_id,
            principal=principal,
            max_concurrency=max_concurrency,
            tool_limits=tool_limits,
            cancel=cancel,
            retry_of=retry_of,
        )

    def run_plan(self, plan: Plan | Mapping[str, Any], **options: Any) -> PlanResult:
        """Sync :meth:`arun_plan` (runs its own event loop; from async code use ``arun_plan``)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.arun_plan(plan, **options))
        raise ConfigurationError("run_plan was called inside a running event loop; await rt.arun_plan(...)")

    def budget(self, *, run_id: str | None = None, principal: Principal | None = None) -> dict[str, float]:
        """What the budgets still allow, per limited unit (the least over every applicable budget).

        Per-run budgets count only when ``run_id`` is given; ``principal`` defaults to the run's
        (or the runtime's) principal. Empty when no budgets are configured.
        """
        if self.meter is None:
            return {}
        run = self._runs.get(run_id) if run_id is not None else None
        who = principal or (run.principal if run is not None else self.principal)
        return self.meter.remaining(run_id, (who.id, who.tenant))

    def estimate(
        self, raw: Any, *, run_id: str | None = None, principal: Principal | None = None
    ) -> dict[str, Any]:
        """``{"estimate", "remaining", "fits"}`` for the calls in ``raw``, before running them.

        The estimate is the most the calls can use (see :func:`actionspace.policy.budget.estimate`),
        summed over every call; tool names resolve to their current version. Nothing is recorded.
        Raises ``UnknownToolError`` for a tool that is not registered.
        """
        calls = [raw] if isinstance(raw, ToolCall) else list(parse(raw).calls)
        total = Usage()
        for call in calls:
            name, _, version = call.name.partition("@")
            total += estimate_usage(self.catalog.get(name, version or None), call.arguments)
        remaining = self.budget(run_id=run_id, principal=principal)
        fits = all(getattr(total, unit) <= left for unit, left in remaining.items())
        return {"estimate": total.to_dict(), "remaining": remaining, "fits": fits}

    # ------------------------------------------------------------------ the ledger
    def recover(self, *, min_age_s: float = 0.0) -> RecoveryReport:
        """Settle every ``dispatched`` / ``unknown`` ledger entry through its status query (sends nothing).

        ``min_age_s`` leaves alone entries touched more recently (another live process may hold
        them); the runtime's own start-up recovery uses 30 s.
        """
        specs = SpecsWithGroups(self.catalog, self._environments) if self._environments else self.catalog
        return recover(self.ledger, specs, self.record, min_age_s=min_age_s)

    def purge(self, *, retention_s: float = DEFAULT_RETENTION_S) -> int:
        """Delete settled ledger entries older than ``retention_s`` (default 24 h); never unresolved ones."""
        point("during_purge")
        return self.ledger.purge(older_than=time.time() - retention_s)

    def resolve(self, key: str, *, outcome: str, by: str, reason: str) -> LedgerEntry:
        """Reconcile an ``unknown_commit`` by hand (``committed`` or ``failed``); the decision is traced."""
        return resolve_by_hand(self.ledger, key, outcome=outcome, by=by, reason=reason, record=self.record)
