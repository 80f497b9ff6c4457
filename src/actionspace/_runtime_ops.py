"""The Runtime's plan and budget methods (a mixin, to keep the facade's module readable)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Iterable, Mapping
from typing import TYPE_CHECKING, Any, cast

from actionspace._crash import point
from actionspace._pipeline import Recorder, RunState
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
from actionspace.policy.labels import PUBLIC_TRUSTED, Label
from actionspace.policy.principal import Principal
from actionspace.types import Observation, ToolCall

if TYPE_CHECKING:
    from actionspace.adapters.mcp_client import McpServer, McpToolset
    from actionspace.catalog.registry import Catalog
    from actionspace.catalog.spec import ToolSpec
    from actionspace.discovery import Discovery
    from actionspace.ledger.entries import LedgerStore
    from actionspace.runtime import Runtime
    from actionspace.trace.events import TraceStore

__all__ = ["DEFAULT_RETENTION_S", "Operations"]

DEFAULT_RETENTION_S = 24 * 3600.0
"""Ledger records live at least this long: longer than any retry window."""


class Operations:
    """Streaming, offers, plans, budgets and ledger operations of :class:`~actionspace.runtime.Runtime`."""

    if TYPE_CHECKING:
        catalog: Catalog
        discovery: Discovery
        trace: TraceStore
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

    # ------------------------------------------------------------------ information flow
    def user_input(self, run_id: str, text: str, *, label: Label = PUBLIC_TRUSTED) -> None:
        """Record the user's request (or a later message) in a run: trusted content by default.

        It joins the run's context label, and ``sources={"arg": ["user"]}`` on a later call binds
        an argument to it (the value must occur in the text). Traced as ``user_input``.
        """
        run = self._run(run_id, None)
        run.flow.add_user_input(text, label)
        rec = Recorder(run, None)
        rec.add("user_input", {"text": text[:2000], "chars": len(text), "input_label": label.to_dict()})
        self._flush(rec)

    def context_label(self, run_id: str) -> Label:
        """The join of everything the model was shown in ``run_id`` (see policy/flow.py)."""
        return self._run(run_id, None).flow.context

    # ------------------------------------------------------------------ offers
    def offer(
        self,
        names: Iterable[str] | None = None,
        *,
        run_id: str | None = None,
        principal: Principal | None = None,
        query: str | None = None,
        limit: int | None = None,
        phase: str | None = None,
        capabilities: Iterable[str] | None = None,
        errors: Iterable[str] = (),
        disclosure: bool | None = None,
    ) -> list[dict[str, Any]]:
        """Fix the tools a run may call and return their definitions, best first.

        The set is built by :mod:`actionspace.discovery.candidates`: not retired, among ``names``
        (default: every tool), in ``phase``, needing only ``capabilities`` (None: all present),
        recovery tools only after their error occurred in the run (or is named in ``errors``),
        ranked against ``query`` (BM25, plus embeddings when configured), then — always after
        ranking — only tools the principal (default: the run's) holds every scope of, and at most
        ``limit`` of them (default: the configured limit when a query is given).

        ``disclosure`` (default: the runtime's setting) returns short definitions (name, summary,
        effect, risk) plus ``describe_tool``; a tool must then be described before it is called.
        Otherwise each tool's full ``ToolSpec.describe()``. Records ``candidates_offered`` with
        the full set, the offered set and the reason each other tool was left out.
        """
        from actionspace.discovery import DESCRIBE_TOOL, errors_in_trace, request_of, short_definition

        run = self._run(run_id, principal)
        who = principal or run.principal
        config = self.discovery.config
        disclose = config.disclosure if disclosure is None else disclosure
        seen = errors_in_trace(self.trace.events(run.run_id)) | set(errors)
        caps = None if capabilities is None else frozenset(capabilities)  # read twice below
        if limit is None and query:
            limit = config.limit
        request = request_of(
            who,
            query=query,
            limit=limit,
            phase=phase,
            capabilities=caps,
            errors=seen,
            names=names,
        )
        selection = self.discovery.index(self.catalog).select(request)
        offered = list(selection.offered)
        describer = self._describer() if disclose and config.describe_tool else None
        if describer is not None:
            offered.append(describer)
        before = run.pins
        run.pins = {s.name: (s.version, s.schema_hash) for s in offered}
        run.resolved.clear()
        run.explicit_offer = True
        run.disclosure = disclose
        # A definition read earlier stays read only while the same version is offered.
        run.described = {n for n in run.described if n in run.pins and before.get(n) == run.pins[n]}
        if describer is not None:
            run.described.add(DESCRIBE_TOOL)
        event = selection.event()
        if describer is not None:
            event["offered"].append({"name": describer.name, "version": describer.version})
        event.update(
            principal=who.id,
            query=None if query is None else query[:500],
            limit=limit,
            phase=phase,
            capabilities=None if caps is None else sorted(caps),
            errors_seen=sorted(seen),
            disclosure=disclose,
        )
        rec = Recorder(run, None)
        rec.add("candidates_offered", event)
        self._flush(rec)
        if disclose:  # the describe tool itself comes whole: the model needs its schema to use it
            return [s.describe() if s is describer else short_definition(s) for s in offered]
        return [s.describe() for s in offered]

    def _describer(self) -> ToolSpec:
        """``describe_tool``, registered at the first disclosure offer (other runtimes never see it)."""
        from actionspace.discovery.disclosure import DESCRIBE_TOOL, describe_tool
        from actionspace.errors import DuplicateToolError

        found = self.catalog.current(DESCRIBE_TOOL)
        if found is not None:
            return found
        try:
            return self.catalog.register(describe_tool(self.catalog.find, self._runs.get, self.record))
        except DuplicateToolError:  # another thread registered it first
            return self.catalog.get(DESCRIBE_TOOL)

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
        backend: str | None = None,
    ) -> PlanResult:
        """Check and run a plan (a :class:`Plan` or its JSON form); one observation per node.

        ``tool_limits``: per tool name, the most concurrent calls (an int) or a :class:`ToolLimit`.
        ``cancel``: a :class:`CancelScope` to stop the plan or some nodes. ``retry_of``: an earlier
        result of the same plan and run; its ok nodes are reused, the others run again (writes
        through the ledger, with their original keys).
        A malformed or unsafe plan is a result with ``status="error"`` and ``error`` set (nothing ran).
        ``backend``: ``"inprocess"`` or ``"dbos"`` (a durable workflow; see :mod:`actionspace.durable`,
        which takes no ``tool_limits``, ``cancel`` or ``retry_of``); default: the Runtime's ``plan_backend``.
        """
        from actionspace.plan.run import arun_plan

        chosen = backend or getattr(self, "plan_backend", "inprocess")
        if chosen == "dbos":
            if tool_limits or cancel is not None or retry_of is not None:
                raise ConfigurationError(
                    "the dbos backend takes tool limits from DurableConfig and has no cancel or retry_of"
                )
            from actionspace.durable.backend import arun_plan_durable

            return await arun_plan_durable(
                cast("Runtime", self),
                plan,
                run_id=run_id,
                principal=principal,
                max_concurrency=max_concurrency,
                config=getattr(self, "durable", None),
            )
        if chosen != "inprocess":
            raise ConfigurationError(f"backend must be 'inprocess' or 'dbos', got {chosen!r}")

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

    # ------------------------------------------------------------------ MCP servers
    def add_mcp_server(self, server: McpServer) -> McpToolset:
        """Connect an MCP server and register its tools; the runtime closes it on ``close()``.

        See :mod:`actionspace.adapters.mcp_client` for trust, versions and errors. Raises
        ConfigurationError when the server cannot be reached.
        """
        from actionspace.adapters.mcp_client import McpToolset

        toolset = McpToolset(server)
        toolset.register(cast("Runtime", self))
        self._mcp_toolsets().append(toolset)
        return toolset

    async def aadd_mcp_server(self, server: McpServer) -> McpToolset:
        """Async :meth:`add_mcp_server`."""
        from actionspace.adapters.mcp_client import McpToolset

        toolset = McpToolset(server)
        await toolset.aregister(cast("Runtime", self))
        self._mcp_toolsets().append(toolset)
        return toolset

    def _mcp_toolsets(self) -> list[McpToolset]:
        found: list[McpToolset] = self.__dict__.setdefault("_mcp", [])
        return found

    def _close_mcp(self) -> None:
        for toolset in self.__dict__.pop("_mcp", []):
            toolset.close()

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
