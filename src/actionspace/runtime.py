"""Runtime: composes the catalog, the stores, the call engine, discovery and the planner.

Every call goes through :class:`~actionspace.pipeline.Engine` (``rt.engine``); the methods here
open runs, offer tools, run plans and settle the ledger, and their sync forms run the engine in
the calling thread. :meth:`Runtime.session` is the documented way to drive a model loop.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar, overload

from actionspace._crash import point
from actionspace.approval.gate import Approvals
from actionspace.catalog.functions import TOOL_ATTRIBUTE, TS, Toolset, ToolSource, spec_from_function, tool
from actionspace.catalog.registry import Catalog
from actionspace.catalog.spec import ToolSpec
from actionspace.discovery.config import Discovery, DiscoveryConfig, errors_in_trace
from actionspace.discovery.disclosure import describe_event, described_spec, full_definition
from actionspace.discovery.offer import describer, offer
from actionspace.discovery.runs import RunState
from actionspace.errors import ConfigurationError
from actionspace.execution.cache import ReadCache, cacheable
from actionspace.execution.errors import map_exception
from actionspace.execution.executor import Executor
from actionspace.execution.guarded import Guard
from actionspace.execution.loop import new_event_loop
from actionspace.execution.streaming import StreamPolicy
from actionspace.ledger.budget_store import open_meter
from actionspace.ledger.entries import LedgerEntry
from actionspace.ledger.recover import RecoveryReport, recover, resolve_by_hand
from actionspace.ledger.run_state import open_run_states
from actionspace.observation import ArtifactStore, FolderArtifactStore, Shaped, shape
from actionspace.parse import parse
from actionspace.pipeline.calls import group
from actionspace.pipeline.engine import Engine
from actionspace.pipeline.stages import Compiler, Stage, Stages
from actionspace.pipeline.stores import open_ledger_stores, open_stores
from actionspace.pipeline.streaming import astream
from actionspace.plan.control import CancelScope, ToolLimit
from actionspace.plan.groups import Environment, SpecsWithGroups
from actionspace.plan.model import Plan, PlanResult
from actionspace.plan.planner import Planner
from actionspace.policy.budget import Budget, Budgets, Meter, Usage
from actionspace.policy.budget import estimate as estimate_usage
from actionspace.policy.flow import DEFAULT_FLOW_POLICY, FlowPolicy
from actionspace.policy.labels import PUBLIC_TRUSTED, Label
from actionspace.policy.principal import Principal
from actionspace.session import Provider, Session
from actionspace.trace.otel_live import live_sink
from actionspace.trace.recorder import Recorder, record_sink
from actionspace.types import SYSTEM_CLOCK, Clock, Observation, ToolCall
from actionspace.validation.validator import ValidationContext

__all__ = ["DEFAULT_PRINCIPAL", "DEFAULT_RETENTION_S", "TOOL_ATTRIBUTE", "Runtime", "tool"]

F = TypeVar("F", bound=Callable[..., Any])

STARTUP_RECOVERY_AGE_S = 30.0
"""Start-up recovery leaves entries younger than this to the live process that may hold them."""

DEFAULT_RETENTION_S = 24 * 3600.0
"""Ledger records live at least this long: longer than any retry window."""

DEFAULT_PRINCIPAL = Principal(id="local", scopes=("*",))
"""Used when neither the call nor the Runtime names a principal: may call every tool."""


class Runtime:
    """Stands between a model and its tools. Thread-safe; usable from sync and async code.

    ``store``: ``"memory://"`` (the default), ``"sqlite:///relative.db"`` /
    ``"sqlite:////abs/path.db"`` (SQLAlchemy's convention) or ``"postgresql://…"``. ``principal``: the default
    principal of calls that name none. ``state``: handles to live services that business
    validators read (``ctx.state``). ``budgets``: limits every call must fit (a Budget, several
    combined with ``&``, or a list; all apply). ``cache``: the read cache for tools with
    ``cache_ttl`` / ``cache_static`` (default: a 1024-entry in-memory LRU, made when first needed).
    ``plan_backend``: how ``run_plan`` runs plans by default, ``"inprocess"`` (the default) or
    ``"dbos"`` (durable workflows, :mod:`actionspace.durable`; needs a ``postgresql://`` store).
    ``durable``: the ``DurableConfig`` of the dbos backend (default: its defaults).
    ``flow_policy``: the information-flow policy of the authorize stage (default
    ``DEFAULT_FLOW_POLICY``; None checks nothing but still labels observations).
    ``discovery``: how offers are built (progressive disclosure, availability, rank cut,
    embeddings; see :class:`~actionspace.discovery.DiscoveryConfig`). ``stages``: extra stages
    (see :mod:`actionspace.pipeline.stages`), run after validation and before the gates. ``clock``:
    where approval expiry reads the time (default the system clock; tests pass a ``ManualClock``).
    """

    def __init__(
        self,
        store: str | None = None,
        *,
        principal: Principal | None = None,
        artifacts: ArtifactStore | str | Path | None = None,
        state: Mapping[str, Any] | None = None,
        tools: Iterable[ToolSpec | Callable[..., Any]] = (),
        max_threads: int = 32,
        recover_on_start: bool = True,
        budgets: Budget | Budgets | Iterable[Budget] | None = None,
        cache: ReadCache | None = None,
        plan_backend: str = "inprocess",
        durable: Any = None,
        flow_policy: FlowPolicy | None = DEFAULT_FLOW_POLICY,
        discovery: DiscoveryConfig | None = None,
        stages: Iterable[Stage] = (),
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        store = store or "memory://"
        self.clock = clock
        self.store_url = store
        self.trace, default_artifacts = open_stores(store)
        self.ledger, approval_store = open_ledger_stores(store)
        if isinstance(artifacts, str | Path):
            artifacts = FolderArtifactStore(Path(artifacts))
        self.artifacts: ArtifactStore = artifacts if artifacts is not None else default_artifacts
        self.catalog = Catalog()
        self.state: dict[str, Any] = dict(state or {})
        budget_set = Budgets.of(budgets)
        # usage lives where the store is: every process sharing it shares the budgets
        self.meter: Meter | None = open_meter(store, budget_set) if budget_set else None
        self._cache = cache
        self._resource_versions: dict[str, Callable[[str], str | None]] = {}
        self._default_run: str | None = None
        self._mcp: list[Toolset] = []
        compiler = Compiler()
        self.approvals = Approvals(approval_store, lambda *a, **k: self.record(*a, **k), clock=clock)
        self.engine = Engine(
            catalog=self.catalog,
            ledger=self.ledger,
            artifacts=self.artifacts,
            executor=Executor(max_threads=max_threads, map_error=map_exception),
            trace=self.trace,
            sink=live_sink(record_sink(self.trace)),  # live OTel spans only when OTel is configured
            stages=Stages(
                catalog=self.catalog,
                compiler=compiler,
                ctx_factory=self._context,
                approvals=self.approvals,
                flow_policy=flow_policy,
                guard=None if self.meter is None else Guard(meter=self.meter, cache=cache),
            ),
            default_principal=principal or DEFAULT_PRINCIPAL,
            run_states=open_run_states(store),
            on_first_run=(lambda: self.recover(min_age_s=STARTUP_RECOVERY_AGE_S))
            if recover_on_start
            else None,
        )
        self.planner = Planner(self.engine, backend=plan_backend, config=durable, owner=self)
        for stage in stages:
            self.engine.add_stage(stage)
        self._compiler = compiler
        self.catalog.on_change(compiler.forget)
        self.catalog.on_change(self._enable_cache)
        for item in tools:
            self.register(item)
        self.discovery = Discovery(discovery or DiscoveryConfig())

    # ------------------------------------------------------------------ tools
    @overload
    def tool(self, fn: F, /) -> F: ...
    @overload
    def tool(self, fn: None = None, /, **spec: Any) -> Callable[[F], F]: ...

    def tool(self, fn: F | None = None, /, **spec: Any) -> F | Callable[[F], F]:
        """Register a typed function as a tool: ``@rt.tool(effect="read")``.

        The input schema comes from the type hints and the docstring's ``Args:`` section. Keyword
        options are ToolSpec fields; ``effect`` is required.
        """

        def register(f: F) -> F:
            self.register(spec_from_function(f, **spec))
            return f

        return register(fn) if fn is not None else register

    def add_tool(
        self, *, name: str, input_schema: Mapping[str, Any], fn: Callable[..., Any], **spec: Any
    ) -> ToolSpec:
        """Register a tool known by its JSON Schema (MCP, OpenAPI, BFCL); ``effect`` is required."""
        if "effect" not in spec:
            raise ConfigurationError(f"{name}: declare effect= ('none', 'read', 'write' or 'external')")
        return self.register(ToolSpec(name=name, input_schema=dict(input_schema), fn=fn, **spec))

    def register(self, spec: ToolSpec | Callable[..., Any]) -> ToolSpec:
        """Register a ToolSpec, or a function decorated with :func:`actionspace.tool`.

        The schema is compiled now, so a bad schema raises here, not at the first call.
        """
        if not isinstance(spec, ToolSpec):
            options = getattr(spec, TOOL_ATTRIBUTE, None)
            if options is None:
                raise ConfigurationError(f"{spec!r} is neither a ToolSpec nor decorated with @tool")
            spec = spec_from_function(spec, **options)
        if spec.fn is None:
            raise ConfigurationError(f"{spec.key}: a tool needs an implementation (fn=)")
        self._compiler.get(spec)
        return self.catalog.register(spec)

    @property
    def principal(self) -> Principal:
        """The principal of calls and runs that name none."""
        return self.engine.default_principal

    @principal.setter
    def principal(self, principal: Principal) -> None:
        self.engine.default_principal = principal

    @property
    def flow_policy(self) -> FlowPolicy | None:
        """The information-flow policy of the flow stage (None: labels are stamped, nothing blocked)."""
        return self.engine.stages.flow_policy

    @flow_policy.setter
    def flow_policy(self, policy: FlowPolicy | None) -> None:
        self.engine.stages.flow_policy = policy

    def resource(self, kind: str, current_version: Callable[[str], str | None]) -> None:
        """Tell the validator how to read the current version of resources of ``kind``."""
        self._resource_versions[kind] = current_version

    def _resource_version(self, kind: str, rid: str) -> str | None:
        fn = self._resource_versions.get(kind)
        if fn is None:
            raise ConfigurationError(f"no resource version reader for kind {kind!r}; call rt.resource()")
        return fn(rid)

    def _context(self, run: RunState, node: str, call_id: str, principal: Principal) -> ValidationContext:
        return ValidationContext(
            run_id=run.run_id,
            node_id=node,
            call_id=call_id,
            principal_id=principal.id,
            scopes=tuple(principal.scopes),
            resource_version=self._resource_version,
            state=self.state,
        )

    def _enable_cache(self, spec: ToolSpec) -> None:
        """Give the runtime a read cache once a tool that may use it is registered."""
        guard = self.engine.stages.guard
        if (guard is not None and guard.cache is not None) or not cacheable(spec):
            return
        if self._cache is None:
            self._cache = ReadCache()
        self.engine.set_guard(Guard(meter=self.meter, cache=self._cache))

    # ------------------------------------------------------------------ runs
    def run_state(self, run_id: str | None = None, principal: Principal | None = None) -> RunState:
        """The state of a run (the default run when ``run_id`` is None), opened on first use."""
        if run_id is None:
            run_id = self._default_run or self.new_run()
            self._default_run = run_id
        return self.engine.run(run_id, principal)

    def run_id_of(self, run_id: str | None = None, *, principal: Principal | None = None) -> str:
        """The id of ``run_id`` (the default run when None), opening the run on first use."""
        return self.run_state(run_id, principal).run_id

    def new_run(self, run_id: str | None = None, *, principal: Principal | None = None) -> str:
        """Start a run (or resume one by id) and return its id."""
        run_id = run_id or f"run_{uuid.uuid4().hex[:16]}"
        self.engine.run(run_id, principal)
        return run_id

    def finish(self, run_id: str, *, status: str = "ok", **data: Any) -> None:
        """Record the end of a run; its state leaves memory (kept in the store, read back on use)."""
        self.record(run_id, "run_finished", {"status": status, **data})
        self.engine.forget(run_id)

    def record(self, run_id: str, kind: str, data: Mapping[str, Any], *, call_id: str | None = None) -> None:
        """Append an event of another stage (for example ``verified``) to a run's trace."""
        self.engine.record(run_id, kind, data, call_id=call_id)

    def session(
        self,
        run_id: str | None = None,
        *,
        provider: Provider = "openai_chat",
        principal: Principal | None = None,
        offer: Mapping[str, Any] | None = None,
    ) -> Session:
        """An agent session over one run: the documented way to drive a model loop.

        ``provider``: ``"openai_chat"``, ``"openai_responses"`` or ``"anthropic"``; ``offer``:
        keyword arguments of :meth:`offer` for every turn (default: every tool). See
        :class:`actionspace.session.Session`.
        """
        return Session(self, run_id or self.new_run(principal=principal), provider, principal, offer)

    # ------------------------------------------------------------------ calls
    def call_all(
        self,
        raw: Any,
        *,
        run_id: str | None = None,
        principal: Principal | None = None,
        provenance: Mapping[str, str] | None = None,
        sources: Mapping[str, Sequence[str]] | None = None,
    ) -> list[Observation]:
        """Every call in ``raw`` (any accepted format), in order; one observation each."""
        run = self.run_state(run_id, principal)
        return self.engine.calls(
            raw, run_id=run.run_id, principal=principal, provenance=provenance, sources=sources
        )

    def call(
        self,
        raw: Any,
        *,
        run_id: str | None = None,
        node_id: str | None = None,
        principal: Principal | None = None,
        provenance: Mapping[str, str] | None = None,
        sources: Mapping[str, Sequence[str]] | None = None,
        dry_run: bool = False,
        fresh: bool = False,
    ) -> Observation:
        """Check and run one proposed call; returns its Observation (errors are values, not raised).

        ``dry_run``: the call passes the stages up to the gates (resolve, authorize, validate and
        the user stages), then the tool's ``preview`` runs instead of the tool: the observation's
        ``data`` is the preview, ``diagnostics["dry_run"]`` is True; no ledger entry, no effect.
        ``fresh``: a read is not served from the read cache (its new result is cached). A committed
        write drops the cached reads whose read set its write set overlaps.

        ``node_id`` names the logical action within the run (default: node identity — the same
        tool with the same arguments in the same turn is one action). When ``raw`` holds several
        calls the observation groups them in ``items``, each answering the model's own call id
        (``render_results`` gives one provider result per call). ``sources`` binds arguments to
        ``"user"`` and/or earlier call ids (checked; see policy/flow.py).
        """
        run_id = run_id or self.run_id_of(None, principal=principal)
        out = self.engine.calls(
            raw,
            run_id=run_id,
            node_id=node_id,
            principal=principal,
            provenance=provenance,
            sources=sources,
            dry_run=dry_run,
            fresh=fresh,
        )
        return out[0] if len(out) == 1 else group(out, run_id)

    async def acall(
        self,
        raw: Any,
        *,
        run_id: str | None = None,
        node_id: str | None = None,
        principal: Principal | None = None,
        provenance: Mapping[str, str] | None = None,
        sources: Mapping[str, Sequence[str]] | None = None,
        dry_run: bool = False,
        fresh: bool = False,
    ) -> Observation:
        """Async :meth:`call`: async tools are awaited, blocking sync tools run on a worker thread."""
        run_id = run_id or self._default_run or self.run_id_of(None, principal=principal)
        if not (provenance or sources or dry_run or fresh):
            quick = await self.engine.aquick(raw, run_id, node_id, principal)
            if quick is not None:
                return quick
        out = await self.engine.acalls(
            raw,
            run_id=run_id,
            node_id=node_id,
            principal=principal,
            provenance=provenance,
            sources=sources,
            dry_run=dry_run,
            fresh=fresh,
        )
        return out[0] if len(out) == 1 else group(out, run_id)

    async def acall_all(
        self,
        raw: Any,
        *,
        run_id: str | None = None,
        principal: Principal | None = None,
        provenance: Mapping[str, str] | None = None,
        sources: Mapping[str, Sequence[str]] | None = None,
    ) -> list[Observation]:
        """Async :meth:`call_all`."""
        run = self.run_state(run_id, principal)
        return await self.engine.acalls(
            raw, run_id=run.run_id, principal=principal, provenance=provenance, sources=sources
        )

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
        run = self.run_state(run_id, principal)
        return astream(
            self.engine,
            raw,
            run_id=run.run_id,
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
        run = self.engine.run(run_id)
        run.flow.add_user_input(text, label)
        rec = Recorder(run, None)
        rec.add("user_input", {"text": text[:2000], "chars": len(text), "input_label": label.to_dict()})
        self.engine.flush(rec)

    def context_label(self, run_id: str) -> Label:
        """The join of everything the model was shown in ``run_id`` (see policy/flow.py)."""
        return self.engine.run(run_id).flow.context

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
        run = self.run_state(run_id, principal)
        definitions, event = offer(
            catalog=self.catalog,
            discovery=self.discovery,
            run=run,
            principal=principal or run.principal,
            seen_errors=errors_in_trace(self.trace.events(run.run_id)) | set(errors),
            names=names,
            query=query,
            limit=limit,
            phase=phase,
            capabilities=capabilities,
            disclosure=disclosure,
            describe=lambda: describer(self.catalog, self.engine.known_run, self.record),
        )
        self.record(run.run_id, "candidates_offered", event)
        return definitions

    def describe(self, name: str, *, run_id: str | None = None) -> dict[str, Any]:
        """The definition of a tool, as the model may see it.

        Without ``run_id``: the current version's ``ToolSpec.describe()``. With it: the full
        definition (schemas, examples) of the version offered to that run, recorded as a
        ``described`` event; in a disclosure run this is what lets the tool be called. Raises
        UnknownToolError for a tool not registered (or, with ``run_id``, not offered to the run).
        """
        if run_id is None:
            return self.catalog.get(name).describe()
        run = self.engine.run(run_id)
        spec = described_spec(self.catalog.find, run, name)
        self.record(run_id, "described", describe_event(spec, via="host"))
        return full_definition(spec)

    # ------------------------------------------------------------------ plans
    def environment(self, name: str, env: Environment) -> None:
        """Register a transactional environment that atomic plan groups can use (``ToolSpec.transaction``).

        ``env`` speaks :class:`actionspace.plan.groups.Environment`: ``mode`` (``"transaction"`` or
        ``"switch"``), ``begin(key)`` and ``committed(key)``.
        """
        self.planner.environment(name, env)

    @property
    def plan_backend(self) -> str:
        """Where ``run_plan`` runs plans by default: ``"inprocess"`` or an installed backend (``"dbos"``)."""
        return self.planner.backend

    @property
    def durable(self) -> Any:
        """The configuration of the durable backend (a ``DurableConfig``; None: its defaults)."""
        return self.planner.config

    @property
    def environments(self) -> Mapping[str, Environment]:
        """The transactional environments registered with :meth:`environment`, by name."""
        return self.planner.environments

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
        ``backend``: ``"inprocess"`` or an installed backend such as ``"dbos"`` (a durable workflow;
        see :mod:`actionspace.durable`, which takes no ``tool_limits``, ``cancel`` or ``retry_of``);
        default: the Runtime's ``plan_backend``.
        """
        if (backend or self.planner.backend) == "inprocess":
            run_id = self.run_state(run_id, principal).run_id
        return await self.planner.arun(
            plan,
            run_id=run_id,
            principal=principal,
            max_concurrency=max_concurrency,
            tool_limits=tool_limits,
            cancel=cancel,
            retry_of=retry_of,
            backend=backend,
        )

    def run_plan(self, plan: Plan | Mapping[str, Any], **options: Any) -> PlanResult:
        """Sync :meth:`arun_plan` (runs its own event loop; from async code use ``arun_plan``)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            with asyncio.Runner(loop_factory=new_event_loop) as runner:  # waits end on time
                return runner.run(self.arun_plan(plan, **options))
        raise ConfigurationError("run_plan was called inside a running event loop; await rt.arun_plan(...)")

    # ------------------------------------------------------------------ budgets
    def budget(self, *, run_id: str | None = None, principal: Principal | None = None) -> dict[str, float]:
        """What the budgets still allow, per limited unit (the least over every applicable budget).

        Per-run budgets count only when ``run_id`` is given; ``principal`` defaults to the run's
        (or the runtime's) principal. Empty when no budgets are configured.
        """
        if self.meter is None:
            return {}
        run = self.engine.known_run(run_id) if run_id is not None else None
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
    def add_mcp_server(self, server: ToolSource[TS]) -> TS:
        """Connect an MCP server and register its tools; the runtime closes it on ``close()``.

        See :mod:`actionspace.adapters.mcp_client` for trust, versions and errors. Raises
        ConfigurationError when the server cannot be reached.
        """
        toolset = server.toolset()
        toolset.register(self)
        self._mcp.append(toolset)
        return toolset

    async def aadd_mcp_server(self, server: ToolSource[TS]) -> TS:
        """Async :meth:`add_mcp_server`."""
        toolset = server.toolset()
        await toolset.aregister(self)
        self._mcp.append(toolset)
        return toolset

    # ------------------------------------------------------------------ the ledger
    def recover(self, *, min_age_s: float = 0.0) -> RecoveryReport:
        """Settle every ``dispatched`` / ``unknown`` ledger entry through its status query (sends nothing).

        ``min_age_s`` leaves alone entries touched more recently (another live process may hold
        them); the runtime's own start-up recovery uses 30 s.
        """
        envs = self.planner.environments
        specs = SpecsWithGroups(self.catalog, envs) if envs else self.catalog
        return recover(
            self.ledger, specs, self.record, min_age_s=min_age_s, shape=self._shape, now=self.clock.time()
        )

    def purge(self, *, retention_s: float = DEFAULT_RETENTION_S) -> int:
        """Delete settled ledger entries older than ``retention_s`` (default 24 h); never unresolved ones."""
        point("during_purge")
        return self.ledger.purge(older_than=self.clock.time() - retention_s)

    def resolve(self, key: str, *, outcome: str, by: str, reason: str) -> LedgerEntry:
        """Reconcile an ``unknown_commit`` by hand (``committed`` or ``failed``); the decision is traced."""
        return resolve_by_hand(
            self.ledger, key, outcome=outcome, by=by, reason=reason, record=self.record, shape=self._shape
        )

    def _shape(self, value: Any) -> Shaped:
        """A result settled by recovery, shaped like any other (trimmed, its artifact stored)."""
        return shape(value, artifacts=self.artifacts)

    # ------------------------------------------------------------------ lifetime
    def close(self, *, wait: bool = False) -> None:
        """Release threads and stores; ``wait`` lets timed-out tool calls finish first."""
        for toolset in self._mcp:
            toolset.close()
        self._mcp.clear()
        self.engine.executor.close(wait=wait)
        self.ledger.close()
        self.approvals.store.close()
        self.trace.close()

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
